"""`noetlc demo`'s services for real: a Postgres cluster and the HTTP API as background
processes, the `pg_local` connection `noetlc run` hands to Airflow, an idempotent `up`, a `down`
that leaves nothing (test_readme_examples.py drives the same through the CLI on port 5555)."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.request
from pathlib import Path

import psycopg
import pytest

from airflow_plugin.local.demo import services
from airflow_plugin.local.home import Home
from airflow_plugin.local.launch import child_environment


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def home(tmp_path: Path):
    home = Home(tmp_path / "home")
    yield home
    services.down(home)  # also when the test failed half-way


def test_up_registers_pg_local_serves_http_is_idempotent_and_down_leaves_nothing(home):
    http_port = _free_port()
    found = services.up(home, http_port=http_port)
    assert [(s.name, s.running) for s in found] == [("postgres", True), ("http", True)]
    state = json.loads((home.root / "demo" / "state.json").read_text())
    pg_port, pid = state["postgres"]["port"], state["http"]["pid"]

    # The connection `noetlc run` gives Airflow reaches the demo database and its example table.
    uri = services.connection_env(home)["AIRFLOW_CONN_PG_LOCAL"]
    assert uri == f"postgresql://postgres@127.0.0.1:{pg_port}/noetl_demo"
    with psycopg.connect(uri, connect_timeout=5) as db:
        assert db.execute("SELECT count(*) FROM order_counts").fetchone() == (0,)
    env = child_environment(home, base={"PATH": os.environ["PATH"]})
    assert env["AIRFLOW_CONN_PG_LOCAL"] == uri
    # The caller's own pg_local wins over the demo's; --connections wins over both.
    own = "postgresql://me@db.example:5432/prod"
    assert (
        child_environment(home, base={"AIRFLOW_CONN_PG_LOCAL": own})["AIRFLOW_CONN_PG_LOCAL"] == own
    )
    flag = child_environment(
        home, base={"AIRFLOW_CONN_PG_LOCAL": own}, connections={"AIRFLOW_CONN_PG_LOCAL": "x://"}
    )
    assert flag["AIRFLOW_CONN_PG_LOCAL"] == "x://"

    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/users/1", timeout=5) as response:
        assert json.loads(response.read())["id"] == 1

    # Idempotent: a second `up` keeps both processes; a server that died is started again.
    services.up(home, http_port=http_port)
    again = json.loads((home.root / "demo" / "state.json").read_text())
    assert (again["postgres"]["port"], again["http"]["pid"]) == (pg_port, pid)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)  # this process started it: reap it, as a shell would
    assert [s.running for s in services.status(home)] == [True, False]
    services.up(home, http_port=http_port)
    new_pid = json.loads((home.root / "demo" / "state.json").read_text())["http"]["pid"]
    assert new_pid != pid and all(s.running for s in services.status(home))

    base = Path(again["postgres"]["base"])
    stopped = services.down(home)
    assert [line.split()[0] for line in stopped] == ["http", "postgres"]
    deadline = time.monotonic() + 5
    while _port_open(http_port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _port_open(http_port) and not _port_open(pg_port)
    assert not base.exists() and not (home.root / "demo").exists()
    assert services.connection_env(home) == {}
    assert [s.running for s in services.status(home)] == [False, False]
    assert services.down(home) == []


def test_up_names_a_taken_http_port_and_stops_the_postgres_it_started(home):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(services.DemoError, match=f"127.0.0.1:{port} is taken") as failed:
            services.up(home, http_port=port)
    assert "--http-port N" in str(failed.value)
    # The Postgres this `up` started is stopped again: nothing runs, nothing is left to stop.
    assert [s.running for s in services.status(home)] == [False, False]
    assert services.connection_env(home) == {}
    assert services.down(home) == []


def test_demo_up_moves_off_5555_with_http_port(home, capsys):
    """`noetlc demo up --http-port N` serves the API on N and says how the examples reach it;
    a second `up` asking for another port is refused while it runs."""
    from noetl_compile.cli import main

    port = _free_port()
    assert main(["demo", "up", "--http-port", str(port), "--home", str(home.root)]) == 0
    out = capsys.readouterr().out
    assert f"http      running  http://127.0.0.1:{port}" in out
    assert f"--set api_url=http://127.0.0.1:{port}" in out
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
        assert json.loads(response.read()) == {"status": "ok"}
    assert main(["demo", "up", "--home", str(home.root)]) == 0  # where it runs: kept
    other = _free_port()
    assert main(["demo", "up", "--http-port", str(other), "--home", str(home.root)]) == 1
    assert f"runs on port {port}" in capsys.readouterr().err
