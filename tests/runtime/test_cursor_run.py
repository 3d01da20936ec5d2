"""Cursor loops (``loop.cursor``) for real: the example under ``dag.test()``, a second driver
registered only through the ``noetl.cursor_drivers`` entry point, loud failures."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import psycopg
import pytest

from airflow_plugin.drivers import registry
from airflow_plugin.events import MemoryRecorder, set_default_recorder
from noetl_compile.cli import main

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "cursor"


@pytest.fixture
def events():
    recorder = MemoryRecorder()
    previous = set_default_recorder(recorder)
    try:
        yield recorder
    finally:
        set_default_recorder(previous)


@pytest.fixture
def run_playbook(airflow_db, run_dag, tmp_path):
    def run(path: Path, conf=None):
        out = tmp_path / "dags"
        assert main(["compile", str(path), "-o", str(out)]) == 0
        (source,) = [p.read_text() for p in out.glob("*.py")]
        dag_id = source.split('dag_id="', 1)[1].split('"', 1)[0]
        return run_dag(source, dag_id, conf)

    return run


def test_example_cursor_queue_drains_every_job_once_and_routes_on_loop_done(
    run_playbook, pg_connections, pg_test_dsn, events
):
    with psycopg.connect(pg_test_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS jobs")
    out = run_playbook(ROOT / "playbooks" / "cursor_queue.yaml")
    assert out.state == "success", out.states
    slots = out.xcom["work.head"]
    assert [s["slot"] for s in slots] == [0, 1, 2, 3]
    assert slots[0]["cursor"]["auth"] == "pg_local"  # rendered once, at loop start
    # The head's XCom holds the rendered claim and the connection *name*, never the DSN.
    assert "postgresql://" not in json.dumps(slots) and "127.0.0.1" not in json.dumps(slots)
    tail = out.xcom["work.tail"]["result"]
    assert tail["stats"] == {"total": 20, "success": 20, "failed": 0}
    assert [r["row_count"] for r in tail["results"]] == [1] * 20
    assert out.xcom["verify"]["result"]["rows"] == [{"done": 20}]
    with psycopg.connect(pg_test_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone() == (20,)
        # The loop ended well: its tail deleted the loop start's 20 leases (no other loop start
        # of this test left any either).
        scope = slots[0]["cursor"]["scope"]
        assert scope and conn.execute(
            "SELECT count(*) FROM noetl_cursor_lease WHERE scope = %s", (scope,)
        ).fetchone() == (0,)
    # One completion event per item, and none of the item chain's bookkeeping.
    work = [e for e in events.events if e.step == "work"]
    done = [e for e in work if e.name == "LoopIterationCompleted"]
    assert len(done) == 20 and {e.alias for e in done} == {"call.done"}
    assert sorted(e.data["item"]["id"] for e in done) == list(range(1, 21))
    assert {e.name for e in work if e.iteration is not None} == {"LoopIterationCompleted"}
    # Around the items: the loop's start and end, and the loop step's own start and finish.
    assert [e.name for e in work if e.iteration is None and e.entity != "task"] == [
        "LoopStarted",
        "LoopFinished",
        "StepStarted",
        "StepFinished",
        "NextEvaluated",
    ]


def test_a_second_driver_needs_no_change_to_compiler_or_runtime(
    run_playbook, tmp_path, monkeypatch, events
):
    """A SQLite queue drained through a driver that only an entry point declares."""
    # A distribution on sys.path that declares the driver, as `pip install` would.
    site = tmp_path / "site"
    dist = site / "noetl_sqlite_cursor-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: noetl-sqlite-cursor\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[noetl.cursor_drivers]\nsqlite = sqlite_cursor_driver:SqliteCursorDriver\n"
    )
    (site / "sqlite_cursor_driver.py").write_text((HERE / "sqlite_driver.py").read_text())
    monkeypatch.syspath_prepend(str(site))
    registry.forget_drivers()
    queue = tmp_path / "queue.db"
    with sqlite3.connect(queue) as conn:
        conn.execute("CREATE TABLE q (id INTEGER PRIMARY KEY, status TEXT DEFAULT 'pending')")
        conn.executemany("INSERT INTO q (id) VALUES (?)", [(i,) for i in range(1, 13)])
    monkeypatch.setenv(
        "AIRFLOW_CONN_QUEUE_DB", json.dumps({"conn_type": "sqlite", "host": str(queue)})
    )
    try:
        out = run_playbook(HERE / "sqlite_queue.yaml")
    finally:
        sys.modules.pop("sqlite_cursor_driver", None)
        registry.forget_drivers()
    assert out.state == "success", out.states
    tail = out.xcom["work.tail"]["result"]
    assert tail["stats"] == {"total": 12, "success": 12, "failed": 0}
    assert sorted(r["doubled"] for r in tail["results"]) == [2 * i for i in range(1, 13)]
    assert out.xcom["report"]["result"] == {"items": 12}
    with sqlite3.connect(queue) as conn:
        assert conn.execute("SELECT count(*) FROM q WHERE status = 'claimed'").fetchone() == (12,)


def test_unknown_driver_fails_the_loop_naming_what_is_registered(run_playbook, tmp_path, events):
    playbook = (HERE / "sqlite_queue.yaml").read_text().replace("kind: sqlite", "kind: mysql")
    path = tmp_path / "mysql_queue.yaml"
    path.write_text(playbook)
    out = run_playbook(path)
    assert out.state == "failed"
    assert out.states["work.head"] == "failed" and out.states["report"] != "success"
    message = _task_error(events, "work.head")
    assert "no cursor driver 'mysql'" in message and "postgres" in message


def test_claim_template_that_cannot_render_fails_the_head(run_playbook, tmp_path, events):
    playbook = (HERE / "sqlite_queue.yaml").read_text().replace("{{ queue }}", "{{ nowhere.x }}")
    path = tmp_path / "broken_claim.yaml"
    path.write_text(playbook)
    out = run_playbook(path)
    assert out.state == "failed"
    assert out.states["work.head"] == "failed"
    assert "loop.cursor.auth" in _task_error(events, "work.head")


def _task_error(events, task_id: str) -> str:
    # The listener may tell an attempt's end twice (the worker, then the run's end) under one
    # event id; the store keeps the first.
    finished: dict = {}
    for e in events.events:
        if e.name == "TaskFinished" and e.task_id == task_id:
            finished.setdefault(e.event_id, e)
    (failed,) = finished.values()
    assert failed.status == "error"
    return json.dumps(failed.data)


def test_postgres_driver_shares_one_pool_per_dsn_and_process(pg_connections, pg_test_dsn):
    from airflow_plugin.drivers import ClaimSpec, CursorDriverError
    from airflow_plugin.drivers.postgres import PostgresCursorDriver, close_pools, pool_size

    close_pools()  # an earlier test of this process may have opened the pool already

    with psycopg.connect(pg_test_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS pool_q")
        conn.execute(
            "CREATE TABLE pool_q (id int PRIMARY KEY, n numeric, taken bool DEFAULT false)"
        )
        conn.execute("INSERT INTO pool_q (id, n) VALUES (1, 1.5), (2, 2.5)")
    claim = (
        "UPDATE pool_q SET taken = true WHERE id = (SELECT id FROM pool_q WHERE NOT taken"
        " ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, n"
    )
    first = PostgresCursorDriver(ClaimSpec("postgres", claim, "pg_local", {"pool_size": 3}))
    second = PostgresCursorDriver(ClaimSpec("postgres", claim, "pg_local", {"pool_size": 5}))
    assert pool_size(first.conninfo) == 5  # one pool, grown to the largest size asked
    assert first.claim() == {"id": 1, "n": 1.5}  # JSON-safe values (Decimal -> number)
    assert second.claim() == {"id": 2, "n": 2.5}
    assert first.claim() is None
    # The server ends the pool's connections (a restart, an administrator): the next claim
    # goes through on a fresh connection instead of failing the slot.
    with psycopg.connect(pg_test_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'noetl-cursor' AND pid <> pg_backend_pid()"
        )
        conn.execute("UPDATE pool_q SET taken = false WHERE id = 2")
    assert first.claim() == {"id": 2, "n": 2.5}
    broken = PostgresCursorDriver(ClaimSpec("postgres", "SELECT * FROM no_such_queue", "pg_local"))
    with pytest.raises(CursorDriverError, match="no_such_queue") as failure:
        broken.claim()
    assert failure.value.code == "42P01"
    with pytest.raises(CursorDriverError, match="pool_size"):
        PostgresCursorDriver(ClaimSpec("postgres", claim, "pg_local", {"pool_size": 0}))
