"""A warm runner for `noetlc run`: one background process per managed home, each run forked from it.

A cold `noetlc run` spends most of its wall time before the first step: importing Airflow,
reading its settings, opening the metadata DB and building the in-process Execution API
(``warmup``). The warm runner pays that once: ``python -m airflow_plugin.local.warm --home H``
does all of it and then waits on a Unix socket. For each run the CLI connects and sends the run
(its environment, working directory, log file and request) together with its stdout, stderr and
the home-lock descriptor (``SCM_RIGHTS``); the runner forks, and the child is from there on the
same process a cold run starts (``__main__``): it takes those descriptors as its own, claims the
terminal, runs ``runner.execute`` and leaves with ``os._exit``. The runner reports the child's
pid first (so Ctrl-C in the CLI reaches it) and its exit status last.

Isolation: every run is a fresh fork of a runner that never ran a playbook, so whatever a run
does to its process (modules a python step imports, a crash, ``os._exit``, a segfault) dies with
it; the runner only sees an exit status. The lock of the run's slot (``home.claim``) travels
with the run, as with a cold child; the runner does not wait for a fork, so runs in other slots
run at the same time (``_Serving``), and ``warm_fork.py`` points each fork at its slot's DB.

Life cycle: the first run of a home finds no runner, runs cold as today and starts one in the
background for the next run; the runner leaves after ``NOETLC_WARM_IDLE`` seconds without a run
(default 900), when its code changed on disk (the CLI sends the code's fingerprint, both
packages; a mismatch stops it and that run goes cold), and on ``noetlc run --stop``. On by
default (``enabled``): ``--cold``, ``NOETLC_WARM=0`` or a ``CI`` variable turn it off,
``--warm``/``NOETLC_WARM=1`` on; the tests' conftest sets ``NOETLC_WARM=0``, so a test uses it
only when it asks.

The socket lives in the temporary folder under a name derived from the home (Unix socket paths
are short), is created with mode 0600, and the runner serves only its own user (``SO_PEERCRED``).
The client side (``serve_run``, ``start``, ``stop``) is pure Python: the CLI imports it without
Airflow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .home import Home, code_stamp, pin_code_stamp
from .launch import EXIT_INTERRUPTED
from .warm_fork import become_run

__all__ = [
    "ENV_WARM",
    "Warm",
    "enabled",
    "fingerprint",
    "serve_run",
    "socket_path",
    "start",
    "stop",
    "stop_command",
]

ENV_WARM = "NOETLC_WARM"
ENV_IDLE = "NOETLC_WARM_IDLE"
DEFAULT_IDLE = 900.0
_MAX_MESSAGE = 1 << 24


_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def enabled(flag: bool | None, environ: Mapping[str, str] | None = None) -> bool:
    """``--warm`` (True) / ``--cold`` (False) first, then ``NOETLC_WARM``; by default on, except
    where ``CI`` is set: a CI job leaves no background process behind and measures cold runs."""
    if flag is not None:
        return flag
    environ = os.environ if environ is None else environ
    setting = environ.get(ENV_WARM, "").strip().lower()
    if setting in _ON:
        return True
    if setting in _OFF:
        return False
    return environ.get("CI", "").strip().lower() in ("", *_OFF)


def socket_path(home: Home) -> Path:
    """One runner per home, whichever slot: the name derives from the home's root."""
    digest = hashlib.sha256(str(home.root.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"noetlc-warm-{os.getuid()}-{digest}.sock"


def fingerprint() -> str:
    """The interpreter and the code's stamp: a runner started from other code must not serve a
    run (it would run yesterday's operators, or compile with yesterday's compiler)."""
    return f"{sys.executable}|{code_stamp()}"


# -- framing: one JSON object per message, length-prefixed ----------------------------------------


def _send(sock: socket.socket, value: Any, fds: list[int] | None = None) -> None:
    data = json.dumps(value).encode("utf-8")
    frame = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(sock, [frame], fds)
    else:
        sock.sendall(frame)


def _recv_exact(sock: socket.socket, size: int, fds: list[int]) -> bytes:
    chunks, got = [], 0
    while got < size:
        data, received, _, _ = socket.recv_fds(sock, size - got, 8)
        fds.extend(received)
        if not data:
            raise ConnectionError("the other side closed the warm-runner socket")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> tuple[Any, list[int]]:
    fds: list[int] = []
    (size,) = struct.unpack("!I", _recv_exact(sock, 4, fds))
    if size > _MAX_MESSAGE:
        raise ConnectionError(f"warm-runner message of {size} bytes")
    return json.loads(_recv_exact(sock, size, fds)), fds


# -- the CLI side ---------------------------------------------------------------------------------


def _connect(home: Home) -> socket.socket | None:
    path = socket_path(home)
    if not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def serve_run(
    home: Home,
    env: Mapping[str, str],
    log: Path,
    lock_fd: int,
    work: Mapping[str, Any],
) -> int | None:
    """Run ``work`` in a fork of the home's warm runner, in the slot ``home`` is (the CLI holds
    its lock, ``lock_fd``; ``env`` is that slot's): ``{"request": ...}`` (compiled already) or
    ``{"compile": {"args", "names", "run"}}`` (the fork compiles, with the compiler imported
    there); the run's exit status, or None when no runner (of this code) answers, and the caller
    runs cold."""
    sock = _connect(home)
    if sock is None:
        return None
    with sock:
        try:
            hello = {"fingerprint": fingerprint(), "env": dict(env), "cwd": os.getcwd()}
            hello.update(log=str(log), slot=home.slot, **work)
            sys.stdout.flush()
            sys.stderr.flush()
            _send(sock, hello, [1, 2, lock_fd])
            answer, _ = _recv(sock)
        except (OSError, ConnectionError, ValueError):
            return None
        if "pid" not in answer:
            return None  # another code version: it is leaving; run cold
        pid = int(answer["pid"])
        while True:
            try:
                final, _ = _recv(sock)
                return int(final["exit"])
            except KeyboardInterrupt:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)
            except (OSError, ConnectionError, ValueError, KeyError):
                print("noetlc: error: the warm runner went away during the run", file=sys.stderr)
                return 1


def start(home: Home, env: Mapping[str, str]) -> None:
    """Start the home's runner in the background (its own session: the CLI's Ctrl-C and exit do
    not reach it); it serves from the next run on."""
    log = home.logs / "warm.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        subprocess.Popen(
            [sys.executable, "-P", "-m", "airflow_plugin.local.warm", "--home", str(home.root)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
        )


def stop(home: Home, timeout: float = 10.0) -> bool:
    """Ask the home's runner to leave; True when one was running."""
    sock = _connect(home)
    if sock is None:
        return False
    with sock:
        try:
            _send(sock, {"stop": True})
            _recv(sock)
        except (OSError, ConnectionError, ValueError):
            pass
    deadline = time.monotonic() + timeout
    while socket_path(home).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


class Warm:
    """The CLI's handle on the home's runner for one run (``noetl_compile.run_cli.run_run``).
    ``env``: the environment the runner starts with (the home's slot 0, where it rehearses);
    each run sends its own slot's."""

    def __init__(self, home: Home, env: Mapping[str, str]) -> None:
        self.home, self.env = home.at(0), env
        self.ready = socket_path(home).exists()

    @classmethod
    def of(cls, flag: bool | None, home: Home, env: Mapping[str, str]) -> Warm | None:
        return cls(home, env) if enabled(flag, env) else None

    def run(
        self, slot: Home, env: Mapping[str, str], log: Path, lock_fd: int, work: Mapping[str, Any]
    ) -> int | None:
        code = serve_run(slot, env, log, lock_fd, work)
        if code is None or code in (0, 1, 2, EXIT_INTERRUPTED):
            return code
        # As launch.Child.run says it of a cold child: a run that died (os._exit, a signal).
        how = f"signal {-code}" if code < 0 else f"status {code}"
        print(
            f"noetlc: error: the Airflow process stopped unexpectedly ({how})\nAirflow log: {log}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED if code == -signal.SIGINT else 1

    def start(self) -> None:
        start(self.home, self.env)


def stop_command(home_arg: str | None) -> int:
    """``noetlc run --stop [--home DIR]``."""
    from .home import default_home

    home = Home(Path(home_arg).expanduser() if home_arg else default_home())
    if stop(home):
        print(f"noetlc: stopped the warm runner of {home.root}")
    else:
        print(f"noetlc: no warm runner for {home.root}")
    return 0


# -- the runner -----------------------------------------------------------------------------------


def _peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _compile(home: Home, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The CLI's compile step (``noetl_compile.run_compile.compile_for_run``), here where the
    compiler is imported already: its diagnostics go to the CLI's stdout/stderr (fds 1 and 2 are
    theirs by now)."""
    from noetl_compile.run_compile import NOT_COMPILED, compile_for_run

    names, args = spec.get("names"), spec["args"]
    request = compile_for_run(
        args["playbook"],
        str(home.dags),
        None if names is None else set(names),
        dialect=args.get("dialect"),
        as_json=args.get("json", False),
        fuse=args.get("fuse", False),
    )
    sys.stdout.flush()
    sys.stderr.flush()
    if request is None:
        os._exit(NOT_COMPILED)  # the playbook does not compile; the diagnostics were printed
    request.update(spec["run"])
    return request


# What every run imports after the fork (measured: about 0.3 s of a warm hello_world run, and
# 0.6 s for the compiler). Imported once here, they are shared by every fork. (A fork that
# imports nothing more: compare sys.modules at the fork's start and end.)
_PRELOAD = (
    "noetl_compile.run_compile",
    "noetl_compile.compile",
    "noetl_compile.check",
    "noetl_compile.lower",
    "noetl_compile.emit.python",
    "airflow_plugin.local.runner",
    "airflow_plugin.local.driver",
    "airflow_plugin.local.report",
    "airflow_plugin.local.live",
    "airflow_plugin.local.__main__",
    "airflow_plugin.operators.step",
    "airflow_plugin.operators.region",
    "airflow_plugin.operators.loop",
    "airflow_plugin.runtime.step",
    "airflow_plugin.runtime.interpreter",
    "airflow_plugin.tools",
    "airflow_plugin.events",
    # The event log a run records to (each fork opens its own store; the rehearsal records to
    # memory only, so nothing imported these before the fork).
    "airflow_plugin.events.config",
    "airflow_plugin.events.outbox",
    "airflow_plugin.events.store",
    "airflow_plugin.events.writer",
    "airflow_plugin.hooks.state",
    "airflow.sdk",
    "airflow.models.dagbag",
    "airflow.providers.standard.operators.hitl",
)


def _preload() -> None:
    import importlib
    import logging

    for name in _PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:
            logging.getLogger("noetl.warm").warning("preload of %s failed", name, exc_info=True)
    # State Airflow builds on first use, in every fork otherwise (measured with cProfile in a
    # fork of a hello_world run): SQLAlchemy configures all mappers on the first query (0.3 s
    # profiled) and the metrics registry parses a YAML file on the first metric (0.18 s).
    for name, build in _FIRST_USE:
        try:
            build(importlib.import_module(name))
        except Exception:
            logging.getLogger("noetl.warm").warning("warming %s failed", name, exc_info=True)


_FIRST_USE = (
    ("sqlalchemy.orm", lambda module: module.configure_mappers()),
    ("airflow._shared.observability.metrics.stats", lambda module: module._get_registry()),
    ("airflow.sdk._shared.observability.metrics.stats", lambda module: module._get_registry()),
)


def _rehearse(home: Home, log: Any) -> None:
    """The rehearsal run (``rehearsal.py``); a failure costs the forks speed, never a run."""
    from .rehearsal import rehearse

    started = time.monotonic()
    try:
        state = rehearse(home, _compile_playbook)
    except Exception:
        log.warning("the rehearsal run failed; serving without it", exc_info=True)
        return
    log.info("rehearsal run %s in %.1fs", state, time.monotonic() - started)


def _locate_endpoints(log: Any) -> None:
    """``warmup.locate_endpoints``: a failure costs the forks a few milliseconds, never a run."""
    from .warmup import locate_endpoints

    try:
        log.info("located %d endpoint(s) of the Execution API", locate_endpoints())
    except Exception:
        log.warning("could not locate the Execution API's endpoints", exc_info=True)


def _compile_playbook(path: str, dags: str) -> dict[str, Any]:
    from noetl_compile.run_compile import compile_for_run

    request = compile_for_run(path, dags, None)
    if request is None:
        raise RuntimeError("the rehearsal playbook does not compile")
    return request


def serve(home: Home, idle: float) -> None:
    import gc
    import logging

    gc.disable()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s warm: %(message)s")
    log = logging.getLogger("noetlc.warm")
    started = time.monotonic()
    import airflow  # noqa: F401 - the point of this process

    from .runner import ensure_db
    from .warmup import prepare_execution_api

    ensure_db(home)
    from airflow import settings

    if settings.engine is not None:
        with settings.engine.connect():
            pass  # open the DB (and the pool) once, here
    api = prepare_execution_api()
    _preload()
    pin_code_stamp()  # what every fork's run reads; a client of other code stops this runner
    mine = fingerprint()
    path = socket_path(home)
    # One runner per home: a second one (two starts racing) leaves at once.
    import fcntl

    guard = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.info("another runner serves this home; leaving")
        return
    _rehearse(home, log)
    _locate_endpoints(log)
    gc.collect()
    gc.freeze()  # forks share these pages; the collector never walks them again
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o077)
    try:
        server.bind(str(path))
    finally:
        os.umask(old_umask)
    server.listen(16)
    log.info("ready in %.1fs (execution API: %s) on %s", time.monotonic() - started, api, path)
    _Serving(home, server, path, guard, mine, log).loop(idle)


class _Serving:
    """The runner's loop: one thread, never blocked by a run. Each run is a fork that the loop
    hands the connection's descriptors to and then forgets until its pidfd says it ended, so
    runs of one home run at the same time (each in the slot its CLI claimed). A stop, or a
    client of other code, ends the listening at once (the socket is removed and the one-runner
    guard released, so a new runner may start) and the runs in flight still get their exit
    statuses before the process leaves."""

    def __init__(self, home: Home, server: socket.socket, path: Path, guard: int, mine: str, log):
        self.home, self.server, self.path, self.guard = home, server, path, guard
        self.mine, self.log = mine, log
        self.chooser = selectors.DefaultSelector()
        self.chooser.register(server, selectors.EVENT_READ, None)
        self.running: dict[int, tuple[socket.socket, int, float]] = {}  # pidfd -> conn, pid, t0
        self.listening = True
        self.served = 0

    def loop(self, idle: float) -> None:
        try:
            while self.listening or self.running:
                ready = self.chooser.select(None if self.running else idle)
                if not ready:
                    self.log.info("idle for %.0fs after %d run(s); leaving", idle, self.served)
                    return
                for key, _ in ready:
                    if key.data is None:
                        self._accept()
                    else:
                        self._finished(key.data)
        finally:
            self._stop_listening()

    def _stop_listening(self) -> None:
        if not self.listening:
            return
        self.listening = False
        with contextlib.suppress(KeyError, ValueError):
            self.chooser.unregister(self.server)
        self.server.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self.guard)  # a new runner may start while these runs finish

    def _accept(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        conn.settimeout(None)
        try:
            if _peer_uid(conn) != os.getuid():
                conn.close()
                return
            message, fds = _recv(conn)
        except (OSError, ConnectionError, ValueError):
            conn.close()
            return
        if message.get("stop") or message.get("fingerprint") != self.mine or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            stop = bool(message.get("stop"))
            with contextlib.suppress(OSError):
                _send(conn, {"stopping": True} if stop else {"stale": True})
            conn.close()
            why = "stopped" if stop else "code changed on disk"
            self.log.info("%s after %d run(s), %d in flight", why, self.served, len(self.running))
            self._stop_listening()
            return
        sys.stdout.flush()  # nothing of the runner's may reach the run's terminal
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self._in_the_fork(conn)
            try:
                become_run(message, fds, self.home, _compile)
            finally:
                os._exit(1)  # become_run leaves with os._exit; this is a safety net
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            _send(conn, {"pid": pid})
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            # No pidfd (Linux before 5.3): this run is waited for here, as runners did before
            # they served runs at once; correct, only not concurrent.
            self._report(conn, pid, time.monotonic())
            return
        self.running[pidfd] = (conn, pid, time.monotonic())
        self.chooser.register(pidfd, selectors.EVENT_READ, pidfd)

    def _in_the_fork(self, conn: socket.socket) -> None:
        """Nothing of the runner's stays open in a run: not the socket, not the one-runner
        guard (its lock would outlive the runner), not the connections of other runs."""
        self.chooser.close()
        self.server.close()
        if self.listening:
            os.close(self.guard)
        for pidfd, (other, _, _) in self.running.items():
            other.close()
            os.close(pidfd)
        conn.close()

    def _finished(self, pidfd: int) -> None:
        conn, pid, began = self.running.pop(pidfd)
        self.chooser.unregister(pidfd)
        os.close(pidfd)
        self._report(conn, pid, began)

    def _report(self, conn: socket.socket, pid: int, began: float) -> None:
        _, status, usage = os.wait4(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        self.served += 1
        self.log.info(
            "run %d (pid %d) exited %d: %.2f s wall, %.2f s CPU",
            self.served,
            pid,
            code,
            time.monotonic() - began,
            usage.ru_utime + usage.ru_stime,
        )
        with contextlib.suppress(OSError):
            _send(conn, {"exit": code})
        conn.close()


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m airflow_plugin.local.warm")
    parser.add_argument("--home", required=True)
    args = parser.parse_args(argv)
    idle = float(os.environ.get(ENV_IDLE) or DEFAULT_IDLE)
    serve(Home(Path(args.home)), idle)


if __name__ == "__main__":
    main()
