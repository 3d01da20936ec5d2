"""The README's examples block, run as a user runs it: `noetlc demo up`, every bundled playbook
exactly as the README shows it, `noetlc demo down`, and nothing left running.

Each playbook's header promises results (``# Result: STEP {json}``): the step's result as
`noetlc run` prints it under ``results:`` must hold every key given there with that value (or
equal it, for a result that is not an object). The block and the promises are read by
scripts/readme_examples.py, as scripts/smoke_airflow.py reads them on each Airflow version. The
examples' own runtime behaviour is tested in
test_examples_run.py; this test is about the path a new user takes, from the README's text.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_MODULE = ROOT / "scripts" / "readme_examples.py"
TIMEOUT = 600  # one command: large_loop takes about a minute on an idle 2-core machine, far more
# under a loaded one


def _examples() -> ModuleType:
    """scripts/readme_examples.py, the reader scripts/smoke_airflow.py runs the same block with."""
    spec = importlib.util.spec_from_file_location("noetlc_readme_examples", EXAMPLES_MODULE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


examples = _examples()


def _noetlc(home: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("NOETL_STRICT", "NOETL_NESTED")}
    environ = {k: v for k, v in environ.items() if not k.startswith("AIRFLOW_CONN_")}
    environ.update(NOETLC_HOME=str(home), PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "-m", "noetl_compile", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""  # gone


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            found.append(f"{cmdline.parent.name}: {args}")
    return found


def test_every_bundled_example_runs_as_the_readme_shows(tmp_path: Path) -> None:
    home = tmp_path / "home"
    lines = examples.examples_block()
    playbooks = sorted(p.name for p in (ROOT / "playbooks").glob("*.yaml"))
    shown = [shlex.split(line, comments=True) for line in lines]
    run_targets = sorted(Path(w[w.index("run") + 1]).name for w in shown if "run" in w)
    assert run_targets == playbooks, "every bundled playbook is shown exactly once"
    assert lines[-1].split("#")[0].strip() == "noetlc demo down"

    failures, status_text, started = [], "", False
    try:
        for line in lines:
            env, args = examples.command(line)
            done = _noetlc(home, args, env)
            if args[:2] == ["demo", "up"]:
                assert done.returncode == 0, done.stderr + done.stdout
                started = True
                again = _noetlc(home, ["demo", "up"], {})  # idempotent: the same processes
                assert again.returncode == 0 and again.stdout == done.stdout, again.stdout
                status = _noetlc(home, ["demo", "status"], {})
                assert status.returncode == 0, status.stdout
                status_text = status.stdout
                assert "http://127.0.0.1:5555" in status_text and "pg_local" in status_text
                continue
            if args[:2] == ["demo", "down"]:
                assert done.returncode == 0, done.stderr + done.stdout
                started = False
                continue
            playbook = ROOT / args[args.index("run") + 1]
            if done.returncode != 0:
                failures.append(f"{line}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
                continue
            assert done.stdout.splitlines()[
                -len(examples.printed_results(done.stdout)) - 2
            ].startswith("success in "), done.stdout
            failures += [f"{line}: {b}" for b in examples.broken_promises(playbook, done.stdout)]
    finally:
        if started:
            _noetlc(home, ["demo", "down"], {})
    assert failures == [], "\n\n".join(failures)

    # Nothing left: no server on the demo's ports, no process on its files, no files.
    pg_port = int(status_text.split("127.0.0.1:", 1)[1].split()[0])
    data_dir = status_text.split("; data ", 1)[1].split()[0]
    assert not _port_open(5555) and not _port_open(pg_port)
    http_pid = int(status_text.split(" pid ", 1)[1].split()[0])
    assert _processes_mentioning(data_dir) == []
    assert "demo.http_server" not in _cmdline(http_pid)
    assert not Path(data_dir).exists() and not (home / "demo").exists()
    after = _noetlc(home, ["demo", "status"], {})
    assert after.returncode == 3 and after.stdout.count("stopped") == 2, after.stdout
