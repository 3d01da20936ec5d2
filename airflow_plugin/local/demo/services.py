"""`noetlc demo up|down|status`: a throwaway Postgres and the local HTTP API, in the background.

What the bundled examples call, started once and left running between `noetlc run` commands:

* **Postgres** (Debian's postgresql-15 binaries): a cluster initialised in
  ``<home>/demo/postgres`` (``initdb``, trust auth, no durability: the data is thrown away), on
  127.0.0.1 and a free port chosen at the first ``up`` (``--pg-port`` fixes it), with a database
  ``noetl_demo`` holding the table the ``case_sink_vars`` example sinks into. PostgreSQL
  refuses to run as root: as root every server binary runs as the ``postgres`` user
  (``runuser``), and when that user cannot reach the home (``/root`` is private) the
  cluster lives in a ``/tmp/noetlc-demo-pg-*`` folder instead; ``status`` says where.
* **The HTTP API** of ``http_server`` on 127.0.0.1:5555, the port the examples default to
  (``--http-port`` moves it; the examples then take ``--set api_url=...``): a
  ``python -m airflow_plugin.local.demo.http_server`` process in its own session.

Registration: ``<home>/demo/state.json`` records both services and the connection
``AIRFLOW_CONN_PG_LOCAL=postgresql://postgres@127.0.0.1:PORT/noetl_demo``; ``noetlc run`` with
that home adds it to the Airflow process's environment (``launch.child_environment``), where
Airflow's own environment-variable secrets backend finds it. A ``pg_local`` the caller defines
(in the environment or ``--connections``) wins over the demo's.

``up`` is idempotent (what runs is left alone, what stopped is started again) and undoes what it
started when it fails (a taken HTTP port leaves no Postgres behind); ``down`` stops both and
removes every file the demo made. Pure Python, no Airflow.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..home import Home

__all__ = [
    "DATABASE",
    "HTTP_PORT",
    "DemoError",
    "Service",
    "connection_env",
    "down",
    "status",
    "up",
]

DATABASE = "noetl_demo"
CONNECTION = "pg_local"
CONNECTION_ENV = "AIRFLOW_CONN_PG_LOCAL"
HTTP_PORT = 5555  # the examples' default api_url / base_url
PG_BIN = Path(os.environ.get("NOETLC_PG_BIN", "/usr/lib/postgresql/15/bin"))
HTTP_MODULE = "airflow_plugin.local.demo.http_server"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])  # the folder holding airflow_plugin/

# Tables the examples expect to exist (a sink writes into a table, it does not create it):
# case_sink_vars upserts into order_counts.
_DEMO_SCHEMA = "CREATE TABLE IF NOT EXISTS order_counts (label text PRIMARY KEY, count int)"

# A disposable server: no durability, few resources, quick shutdown (as tests/harness/postgres.py).
_PG_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "40",
    "shared_buffers": "32MB",
    "log_min_messages": "warning",
    "logging_collector": "off",
}


class DemoError(RuntimeError):
    """A service could not be started or stopped; the message says why and what to do."""


@dataclass(frozen=True)
class Service:
    name: str
    running: bool
    where: str  # URL / address, or why it is not running
    detail: str = ""


# -- state -------------------------------------------------------------------------------------


def _demo_dir(home: Home) -> Path:
    return home.root / "demo"


def _state_path(home: Home) -> Path:
    return _demo_dir(home) / "state.json"


def _read_state(home: Home) -> dict[str, Any]:
    try:
        return json.loads(_state_path(home).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise DemoError(f"unreadable demo state {_state_path(home)}: {exc}") from None


def _write_state(home: Home, state: dict[str, Any]) -> None:
    path = _state_path(home)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


@contextlib.contextmanager
def _locked(home: Home) -> Iterator[None]:
    """One `demo` command at a time per home (not the run lock: runs go on meanwhile)."""
    home.root.mkdir(parents=True, exist_ok=True)
    fd = os.open(home.root / ".demo.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def connection_env(home: Home) -> dict[str, str]:
    """The ``AIRFLOW_CONN_*`` variables the demo registered in ``home`` (none when it is down)."""
    try:
        state = json.loads(_state_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return dict(state.get("connections") or {})


# -- postgres ----------------------------------------------------------------------------------


def _as_root() -> bool:
    return os.geteuid() == 0


def _pg(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    binary = PG_BIN / args[0]
    if not binary.exists():
        raise DemoError(
            f"PostgreSQL binaries not found in {PG_BIN} (Debian: apt-get install postgresql-15; "
            "elsewhere set NOETLC_PG_BIN to the folder holding initdb and pg_ctl)"
        )
    command = [str(binary), *args[1:]]
    if _as_root():
        command = ["runuser", "-u", "postgres", "--", *command]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout)


def _postgres_can_reach(folder: Path) -> bool:
    done = subprocess.run(
        ["runuser", "-u", "postgres", "--", "test", "-x", str(folder)],
        check=False,
        capture_output=True,
    )
    return done.returncode == 0


def _pg_base(home: Home) -> Path:
    """A new folder for the cluster: under the home, or in /tmp when `postgres` cannot reach it."""
    base = _demo_dir(home) / "postgres"
    if _as_root() and not _postgres_can_reach(_demo_dir(home)):
        base = Path(tempfile.mkdtemp(prefix="noetlc-demo-pg-"))
    base.mkdir(parents=True, exist_ok=True)
    if _as_root():
        entry = pwd.getpwnam("postgres")
        os.chown(base, entry.pw_uid, entry.pw_gid)
    return base


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pg_running(pg: dict[str, Any]) -> bool:
    data = Path(pg["base"]) / "data"
    return data.is_dir() and _pg("pg_ctl", "-D", str(data), "status").returncode == 0


def _pg_up(home: Home, pg: dict[str, Any] | None, port: int) -> dict[str, Any]:
    if pg is None or not (Path(pg["base"]) / "data" / "PG_VERSION").is_file():
        base = _pg_base(home)
        data = base / "data"
        done = _pg("initdb", "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                   "--locale=C", "--no-sync")  # fmt: skip
        if done.returncode != 0:
            shutil.rmtree(base, ignore_errors=True)
            raise DemoError(f"initdb failed: {done.stderr.strip() or done.stdout.strip()}")
        pg = {"base": str(base), "port": port or _free_port()}
        lines = [f"{key} = {value}" for key, value in _PG_SETTINGS.items()]
        lines += [f"port = {pg['port']}", f"unix_socket_directories = '{base}'"]
        auto_conf = data / "postgresql.auto.conf"
        auto_conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
        if _as_root():
            entry = pwd.getpwnam("postgres")
            os.chown(auto_conf, entry.pw_uid, entry.pw_gid)
    elif port and port != pg["port"]:
        raise DemoError(
            f"the demo's Postgres is set up on port {pg['port']}; "
            f"`noetlc demo down` first to move it to {port}"
        )
    base = Path(pg["base"])
    if not _pg_running(pg):
        done = _pg("pg_ctl", "-D", str(base / "data"), "-l", str(base / "server.log"), "-w",
                   "start")  # fmt: skip
        if done.returncode != 0:
            log = _tail(base / "server.log")
            raise DemoError(
                f"Postgres did not start on 127.0.0.1:{pg['port']} "
                f"(is the port taken? `noetlc demo down`, then `noetlc demo up --pg-port N`):\n"
                f"{done.stderr.strip()}\n{log}"
            )
    done = _pg("createdb", "-h", "127.0.0.1", "-p", str(pg["port"]), "-U", "postgres", DATABASE)
    if done.returncode != 0 and "already exists" not in done.stderr:
        raise DemoError(f"createdb {DATABASE} failed: {done.stderr.strip()}")
    done = _pg("psql", "-h", "127.0.0.1", "-p", str(pg["port"]), "-U", "postgres", "-d", DATABASE,
               "-v", "ON_ERROR_STOP=1", "-qc", _DEMO_SCHEMA)  # fmt: skip
    if done.returncode != 0:
        raise DemoError(f"creating the examples' tables failed: {done.stderr.strip()}")
    return pg


def _pg_down(pg: dict[str, Any]) -> None:
    base = Path(pg["base"])
    if (base / "data").is_dir() and _pg_running(pg):
        done = _pg("pg_ctl", "-D", str(base / "data"), "-m", "fast", "-w", "stop")
        if done.returncode != 0:
            raise DemoError(f"pg_ctl stop failed: {done.stderr.strip()}")
    shutil.rmtree(base, ignore_errors=True)


def _pg_uri(pg: dict[str, Any]) -> str:
    return f"postgresql://postgres@127.0.0.1:{pg['port']}/{DATABASE}"


# -- http --------------------------------------------------------------------------------------


def _http_answers(port: int) -> bool:
    # Imported here: every `noetlc run` imports this module (connection_env), and importing
    # urllib's HTTP stack (http.client, email, ssl) costs about as much CPU as starting Python.
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return json.loads(response.read()) == {"status": "ok"}
    except (OSError, ValueError, urllib.error.URLError):
        return False


def _is_our_server(pid: int) -> bool:
    """``pid`` is alive and is the demo's HTTP server (not a process that reused the id)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return HTTP_MODULE.encode() in cmdline


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _http_up(home: Home, http: dict[str, Any] | None, port: int | None) -> dict[str, Any]:
    if http and _is_our_server(http["pid"]) and _http_answers(http["port"]):
        if port and port != http["port"]:
            raise DemoError(
                f"the demo's HTTP API runs on port {http['port']}; "
                f"`noetlc demo down` first to move it to {port}"
            )
        return http
    port = port or HTTP_PORT
    if _port_taken(port):
        raise DemoError(
            f"127.0.0.1:{port} is taken by another process; stop it, or start the demo's HTTP "
            f"API on another port (`noetlc demo up --http-port N`) and pass "
            f"`--set api_url=http://127.0.0.1:N` / `--set base_url=...` to the examples"
        )
    log = _demo_dir(home) / "http.log"
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *paths])
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", HTTP_MODULE, "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # outlives this command and its terminal's Ctrl-C
        )
    deadline = time.monotonic() + 15
    while not _http_answers(port):
        if process.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            raise DemoError(f"the HTTP API did not start on 127.0.0.1:{port}:\n{_tail(log)}")
        time.sleep(0.1)
    return {"pid": process.pid, "port": port, "log": str(log)}


def _http_down(http: dict[str, Any]) -> None:
    pid = http["pid"]
    if not _is_our_server(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while _is_our_server(pid) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaps it when this process started it (tests)
        time.sleep(0.05)
    if _is_our_server(pid):
        os.kill(pid, signal.SIGKILL)


# -- commands ----------------------------------------------------------------------------------


def up(home: Home, *, pg_port: int = 0, http_port: int | None = None) -> list[Service]:
    """Start what is not running (idempotent); returns the status afterwards. ``http_port``:
    where the HTTP API listens (default: where it runs, else ``HTTP_PORT``). When ``up``
    fails, what this call started is stopped again (a Postgres left running by a failed
    ``up`` would hold its port with nothing recorded as usable)."""
    with _locked(home):
        _demo_dir(home).mkdir(parents=True, exist_ok=True)
        state = _read_state(home)
        pg_was_running = bool(state.get("postgres")) and _pg_running(state["postgres"])
        try:
            state["postgres"] = _pg_up(home, state.get("postgres"), pg_port)
            state["connections"] = {CONNECTION_ENV: _pg_uri(state["postgres"])}
            _write_state(home, state)
            state["http"] = _http_up(home, state.get("http"), http_port)
        except BaseException:
            if not pg_was_running and state.get("postgres"):
                with contextlib.suppress(DemoError, OSError):
                    _pg_down(state.pop("postgres"))
                state.pop("connections", None)
            raise
        finally:
            _write_state(home, state)  # what runs is recorded, so `down` finds it
    return status(home)


def down(home: Home) -> list[str]:
    """Stop both services and remove what the demo made; returns what was stopped."""
    stopped = []
    with _locked(home):
        state = _read_state(home)
        if state.get("http"):
            if _is_our_server(state["http"]["pid"]):
                stopped.append(f"http      pid {state['http']['pid']}")
            _http_down(state["http"])
        if state.get("postgres"):
            if _pg_running(state["postgres"]):
                stopped.append(f"postgres  127.0.0.1:{state['postgres']['port']}")
            _pg_down(state["postgres"])
        shutil.rmtree(_demo_dir(home), ignore_errors=True)
    return stopped


def status(home: Home) -> list[Service]:
    state = _read_state(home)
    pg, http = state.get("postgres"), state.get("http")
    services = []
    if pg and _pg_running(pg):
        services.append(
            Service(
                "postgres",
                True,
                f"127.0.0.1:{pg['port']} database {DATABASE}",
                f"connection {CONNECTION} = {_pg_uri(pg)}; data {pg['base']}",
            )
        )
    else:
        services.append(Service("postgres", False, "`noetlc demo up` starts it"))
    if http and _is_our_server(http["pid"]) and _http_answers(http["port"]):
        services.append(
            Service("http", True, f"http://127.0.0.1:{http['port']}", f"pid {http['pid']}")
        )
    else:
        services.append(Service("http", False, "`noetlc demo up` starts it"))
    return services


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"
