"""`noetlc gates` / `noetlc signal` refusals that need no deployment: one line, exit status 1
(the answers themselves are tested on a real stack in tests/deploy/test_gates_deployed.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def noetlc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("NOETL_AIRFLOW_")}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "noetl_compile", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_no_credentials_is_one_line():
    result = noetlc("gates")
    assert result.returncode == 1
    assert result.stderr == (
        "noetlc: error: no Airflow user: pass --user and --password or set NOETL_AIRFLOW_USER "
        "and NOETL_AIRFLOW_PASSWORD\n"
    )


def test_an_unreachable_server_is_one_line():
    url = f"http://127.0.0.1:{closed_port()}"
    env = {"NOETL_AIRFLOW_URL": url, "NOETL_AIRFLOW_USER": "a", "NOETL_AIRFLOW_PASSWORD": "b"}
    for args in (["gates"], ["signal", "1", "approve", "--approve"]):
        result = noetlc(*args, env=env)
        assert result.returncode == 1, result.stderr
        assert result.stderr.startswith(f"noetlc: error: cannot reach Airflow at {url}: Connect")
        assert result.stderr.count("\n") == 1


def test_signal_needs_an_answer_and_a_target():
    no_answer = noetlc("signal", "1", "approve")
    assert no_answer.returncode == 2 and "one of the arguments" in no_answer.stderr
    env = {"NOETL_AIRFLOW_USER": "a", "NOETL_AIRFLOW_PASSWORD": "b"}
    no_run = noetlc("signal", "approve", "--approve", env=env)
    assert no_run.returncode == 1
    assert no_run.stderr == (
        "noetlc: error: usage: noetlc signal EXECUTION GATE, or GATE --dag D --run R\n"
    )
