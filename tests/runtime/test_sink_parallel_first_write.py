"""Parallel loop items whose sink writes into a table that does not exist yet (issue 31): the
first writes race to create it. Run for real: compiled, then ``dag.test()`` (in process the
parallel loop's items run on threads, as under ``noetlc run``), ten runs of 50 items each into
a new DuckDB table, every run asserted; and the same race on PostgreSQL, where 50 sessions run
``CREATE TABLE IF NOT EXISTS`` together."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.harness.compiled import compile_playbook

ITEMS = 50
RUNS = 10

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: sink_race
  path: tests/sink_race
workload:
  database: ""
  count: 50
workflow:
  - step: start
    tool:
      kind: python
      args:
        count: "{{ count }}"
      code: |
        result = {"orders": [{"id": i, "total": 10 * i} for i in range(int(count))]}
    next:
      - step: price_each
  - step: price_each
    loop:
      in: "{{ start.orders }}"
      iterator: order
      mode: parallel
    tool:
      kind: python
      args:
        order: "{{ order }}"
      code: |
        result = {"id": order["id"], "usd": round(order["total"] * 1.1, 2)}
    sink:
      tool: {kind: duckdb, database: "{{ database }}", table: orders_usd, mode: upsert, key: id}
      data: "{{ result }}"
    next:
      - step: end
  - step: end
    tool:
      kind: python
      code: |
        result = {"done": True}
"""


@pytest.fixture
def compiled(airflow_db, tmp_path: Path) -> tuple[str, str]:
    return compile_playbook(PLAYBOOK, tmp_path, "sink_race")


def test_parallel_items_upsert_into_a_new_duckdb_table(compiled, run_dag, tmp_path, capsys):
    source, dag_id = compiled
    timings = []
    for attempt in range(RUNS):
        database = tmp_path / f"run{attempt}.duckdb"  # a new file: the table does not exist
        started = time.perf_counter()
        out = run_dag(source, dag_id, {"database": str(database), "count": ITEMS})
        timings.append(time.perf_counter() - started)
        assert out.state == "success", (attempt, out.states)
        stats = out.xcom["price_each.tail"]["result"]["stats"]
        assert stats == {"total": ITEMS, "success": ITEMS, "failed": 0}, attempt
        with duckdb.connect(str(database)) as con:
            rows = con.execute("SELECT id, usd FROM orders_usd ORDER BY id").fetchall()
        assert rows == [(i, round(10 * i * 1.1, 2)) for i in range(ITEMS)], attempt
    with capsys.disabled():
        print(
            f"\n{RUNS} of {RUNS} runs of {ITEMS} parallel items into a new DuckDB table: "
            f"{min(timings):.1f}-{max(timings):.1f} s per run"
        )


PG_PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: pg_create_race
  path: tests/pg_create_race
workload:
  table: ""
  count: 50
workflow:
  - step: start
    tool:
      kind: python
      args:
        count: "{{ count }}"
      code: |
        result = {"ids": list(range(int(count)))}
    next:
      - step: each
  - step: each
    loop:
      in: "{{ start.ids }}"
      iterator: id
      mode: parallel
    tool:
      kind: postgres
      auth: pg_local
      command: |
        CREATE TABLE IF NOT EXISTS {{ table }} (id int PRIMARY KEY, label text);
        INSERT INTO {{ table }} VALUES ({{ id }}, 'item {{ id }}')
    next:
      - step: end
  - step: end
    tool:
      kind: python
      code: |
        result = {"done": True}
"""


def test_parallel_items_create_one_postgres_table(
    airflow_db, run_dag, tmp_path, pg_connections, pg_test_dsn, capsys
):
    source, dag_id = compile_playbook(PG_PLAYBOOK, tmp_path, "pg_create_race")
    tables = [f"race_{uuid.uuid4().hex[:10]}" for _ in range(RUNS)]
    try:
        for attempt, table in enumerate(tables):
            out = run_dag(source, dag_id, {"table": table, "count": ITEMS})
            assert out.state == "success", (attempt, out.states)
            with psycopg.connect(pg_test_dsn) as db:
                ids = [r[0] for r in db.execute(f"SELECT id FROM {table} ORDER BY id")]
            assert ids == list(range(ITEMS)), attempt
    finally:
        with psycopg.connect(pg_test_dsn, autocommit=True) as db:
            for table in tables:
                db.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.mark.parametrize(
    "command",
    [
        "CREATE TABLE IF NOT EXISTS {t} (id int PRIMARY KEY); INSERT INTO {t} VALUES ({i})",
        "CREATE TABLE IF NOT EXISTS {t} (id int PRIMARY KEY)",
    ],
    ids=["in-a-transaction", "alone"],
)
def test_concurrent_create_if_not_exists_sessions(pg_connections, pg_test_dsn, command):
    """50 sessions at once, each its own connection (no pool to narrow the race): every
    ``CREATE TABLE IF NOT EXISTS`` call succeeds, in a transaction with an insert or alone."""
    from airflow_plugin.tools import ToolCall, get_tool

    postgres = get_tool("postgres")
    table = f"race_{uuid.uuid4().hex[:10]}"
    barrier = threading.Barrier(ITEMS)
    outcomes: list = [None] * ITEMS

    def item(i: int) -> None:
        barrier.wait()
        config = {"kind": "postgres", "auth": "pg_local", "pool": False}
        config["command"] = command.format(t=table, i=i)
        outcomes[i] = postgres(ToolCall(step="s", task="s", config=config))

    threads = [threading.Thread(target=item, args=(i,)) for i in range(ITEMS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        failed = [o.error for o in outcomes if not o.ok]
        assert failed == [], failed[:3]
    finally:
        with psycopg.connect(pg_test_dsn, autocommit=True) as db:
            db.execute(f"DROP TABLE IF EXISTS {table}")


HOLDER = """\
import sys, time
from airflow_plugin.hooks.duckdb import writing
with writing(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_another_process_writing_makes_a_sink_wait_then_fail_retryable(tmp_path, monkeypatch):
    """Processes queue on the database file (LocalExecutor runs mapped items in processes):
    a sink waits while another process writes, and past NOETL_DUCKDB_LOCK_TIMEOUT fails with
    the retryable LOCK_CONFLICT, naming the variable."""
    import subprocess
    import sys

    from airflow_plugin.tools.sink import run_sink

    database = str(tmp_path / "shared.duckdb")
    spec = {
        "tool": {
            "kind": "duckdb",
            "database": database,
            "table": "t",
            "mode": "upsert",
            "key": "id",
        },
        "data": {"id": 1},
    }

    def hold(seconds: float) -> subprocess.Popen:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, database, str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        return holder

    holder = hold(1.0)
    started = time.perf_counter()
    outcome = run_sink(spec, step="s")
    waited = time.perf_counter() - started
    holder.wait(10)
    assert outcome.ok, outcome.error
    assert waited > 0.5  # it waited for the other process instead of failing

    monkeypatch.setenv("NOETL_DUCKDB_LOCK_TIMEOUT", "0.3")
    holder = hold(3.0)
    try:
        outcome = run_sink(spec, step="s")
    finally:
        holder.kill()
        holder.wait(10)
    assert not outcome.ok
    assert outcome.error["code"] == "LOCK_CONFLICT" and outcome.error["retryable"] is True
    assert "NOETL_DUCKDB_LOCK_TIMEOUT" in outcome.error["message"]


def test_the_guides_canonical_pipeline_sink_runs(airflow_db, run_dag, tmp_path, monkeypatch):
    """docs/writing-playbooks.md section 7's canonical form, as printed there: the pipeline's
    duckdb task writes the priced rows."""
    import re

    monkeypatch.setenv("NOETL_DATA_DIR", str(tmp_path / "data"))
    guide = Path(__file__).resolve().parents[2] / "docs" / "writing-playbooks.md"
    blocks = re.findall(r"```yaml\n(.*?)```", guide.read_text(encoding="utf-8"), re.DOTALL)
    (block,) = [b for b in blocks if "path: guide/orders_canonical" in b]
    out = run_dag(*compile_playbook(block, tmp_path, "guide"))
    assert out.state == "success", out.states
    record = out.xcom["report"]["result"]
    assert record["_prev"]["rows"] == [{"rows_written": 2}]
    assert record["results"]["rows"]["rows"] == [{"id": 1, "total": 48.0}, {"id": 2, "total": 90.0}]
    (database,) = (tmp_path / "data" / "noetldb").glob("*.duckdb")
    with duckdb.connect(str(database)) as con:
        assert con.execute("SELECT * FROM priced_orders ORDER BY id").fetchall() == [
            (1, 48.0),
            (2, 90.0),
        ]
