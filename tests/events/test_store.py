"""The store on both backends: migrations, idempotent ordered appends, reads, views."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import uuid

import pytest
import sqlalchemy as sa

from airflow_plugin.events import Event
from airflow_plugin.events.schema import VIEWS, event_log
from airflow_plugin.events.store import HEAD_REVISION, EventStore, StoreUnavailable
from airflow_plugin.events.writer import event_row


def row(n: int, *, execution_id: int = 7, name: str = "StepFinished", **extra) -> dict:
    base = {
        "event_id": str(uuid.UUID(int=n + 1)),
        "execution_id": execution_id,
        "timestamp": dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=n),
        "source": "worker",
        "name": name,
        "entity": "step",
        "entity_id": f"s{n}",
        "status": "success",
        "step": f"s{n % 3}",
        "data": {"n": n, "nested": {"list": [1, 2, n]}},
        "duration_sec": 0.5,
        "dag_id": "d",
        "run_id": "r",
    }
    base.update(extra)
    return base


def test_migrates_on_first_use_to_the_head_revision(event_store):
    assert event_store.current_revision() is None
    assert event_store.count() == 0  # first use migrates
    assert event_store.current_revision() == HEAD_REVISION
    columns = {
        c["name"]
        for c in sa.inspect(event_store.engine).get_columns(
            "event_log", schema=None if event_store.dialect == "sqlite" else "noetl"
        )
    }
    assert columns == {c.name for c in event_log.columns}


def test_migration_file_and_schema_module_define_the_same_table(event_store):
    event_store.migrate()
    schema = None if event_store.dialect == "sqlite" else "noetl"
    inspector = sa.inspect(event_store.engine)
    migrated = {
        c["name"]: (type(c["type"]).__name__, c["nullable"])
        for c in inspector.get_columns("event_log", schema=schema)
    }
    reflected = sa.Table(
        "event_log", sa.MetaData(), schema=schema, autoload_with=event_store.engine
    )
    assert set(migrated) == {c.name for c in event_log.columns}
    for column in event_log.columns:
        assert reflected.c[column.name].nullable == column.nullable, column.name
    assert {i["name"] for i in inspector.get_indexes("event_log", schema=schema)} >= {
        "ix_event_log_execution",
        "ix_event_log_dag_run",
    }
    assert set(VIEWS) <= set(inspector.get_view_names(schema=schema))


def _migrate(url: str) -> str:
    store = EventStore(url)
    store.migrate()
    return store.current_revision()


def test_concurrent_first_uses_migrate_once(event_store):
    # Four task processes start at once against an empty store.
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        assert pool.map(_migrate, [event_store.url] * 4) == [HEAD_REVISION] * 4


@pytest.mark.parametrize("size", [5, 300])  # a multi-row INSERT and, on Postgres, COPY
def test_append_ignores_duplicates_and_keeps_emission_order(event_store, size):
    rows = [row(n) for n in range(size)]
    event_store.append(rows)
    # The same batch again, a batch holding one id twice, and one new row.
    event_store.append(rows)
    event_store.append([rows[0], rows[0], row(size)])
    stored = event_store.events(7)
    assert [r["event_id"] for r in stored] == [r["event_id"] for r in rows] + [
        row(size)["event_id"]
    ]
    assert [r["seq"] for r in stored] == sorted(r["seq"] for r in stored)
    assert stored[3]["data"] == {"n": 3, "nested": {"list": [1, 2, 3]}}
    assert stored[0]["timestamp"] == "2026-01-01T00:00:00+00:00"


def test_reads_by_execution_and_by_dag_run(event_store):
    event_store.append([row(1, execution_id=1), row(2, execution_id=2, run_id="other")])
    assert [r["entity_id"] for r in event_store.events(1)] == ["s1"]
    assert [r["entity_id"] for r in event_store.events(dag_id="d", run_id="other")] == ["s2"]
    listed = event_store.executions()
    assert [(e["execution_id"], e["events"]) for e in listed] == [(2, 1), (1, 1)]


def test_views_answer_durations_errors_retries_and_loop_throughput(event_store):
    event_store.append(
        [
            row(1, name="StepFinished"),
            row(2, name="ToolCompleted", step="a"),
            row(3, name="ToolErrored", step="a", status="error"),
            row(4, name="RetryStarted", step="a"),
            row(5, name="LoopIterationCompleted", loop_id="L", duration_sec=2.0),
            row(6, name="LoopIterationCompleted", loop_id="L", duration_sec=4.0),
        ]
    )
    prefix = "" if event_store.dialect == "sqlite" else "noetl."
    with event_store.engine.connect() as conn:
        rates = conn.execute(
            sa.text(f"SELECT step, calls, errors, error_rate FROM {prefix}error_rates")
        ).all()
        assert [tuple(r) for r in rates] == [("a", 2, 1, 0.5)]
        retries = conn.execute(sa.text(f"SELECT step, retries FROM {prefix}retry_counts")).all()
        assert [tuple(r) for r in retries] == [("a", 1)]
        loops = conn.execute(
            sa.text(
                f"SELECT loop_id, iterations, busy_sec, mean_iteration_sec FROM {prefix}loop_throughput"
            )
        ).all()
        assert [tuple(r) for r in loops] == [("L", 2, 6.0, 3.0)]
        durations = conn.execute(
            sa.text(f"SELECT step, duration_sec FROM {prefix}step_durations")
        ).all()
        assert [tuple(r) for r in durations] == [("s1", 0.5)]


def test_an_unreachable_store_raises_store_unavailable_quickly():
    import time

    store = EventStore("postgresql://nobody@127.0.0.1:1/none")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="127.0.0.1"):
        store.append([row(1)])
    assert time.monotonic() - started < 10  # a hang guard: refused connections fail at once


def test_password_never_appears_in_descriptions():
    store = EventStore("postgresql://user:s3cr3t-pw@127.0.0.1:5/db")
    assert "s3cr3t-pw" not in store.describe() and "s3cr3t-pw" not in repr(store)


# Every character JSON and COPY's text format treat specially: backslashes (COPY's escape),
# quotes, a tab and a newline (COPY's separators, escaped by JSON), non-ASCII text.
TRICKY = 'back\\slash \\\\N "quoted"\ttab\nline ünï \\u0041 end\\'


def test_copy_keeps_every_character_and_the_first_of_a_repeated_id(event_store):
    """300 rows go through COPY on Postgres: rows the writer made (with their encoded line)
    and plain dicts (read back from an outbox file) in one batch, one id twice."""
    made = [
        event_row(
            Event(
                name="LoopIterationCompleted",
                entity="loop",
                entity_id=f"{TRICKY}#{n}",
                status="success",
                execution_id="9",
                step="square",
                iteration=n,
                duration=0.25,
                data={"result": {"text": TRICKY, "n": n, "big": 2**62}},
                event_id=str(uuid.UUID(int=10_000 + n)),
                dag_id="d",
                map_index=n % 4,
            ),
            65536,
        )
        for n in range(150)
    ]
    plain = [
        row(n, execution_id=9, entity_id=f"{TRICKY}{n}", data={"t": TRICKY}) for n in range(150)
    ]
    batch = [*made, *plain]
    batch.insert(7, {**batch[3], "entity_id": "a second copy is dropped"})
    event_store.append(batch)
    stored = event_store.events(9)
    assert [r["event_id"] for r in stored] == [r["event_id"] for r in made + plain]
    first = stored[3]
    assert first["entity_id"] == f"{TRICKY}#3"
    assert first["data"] == {"result": {"text": TRICKY, "n": 3, "big": 2**62}}
    assert (first["iteration"], first["map_index"], first["duration_sec"]) == (3, 3, 0.25)
    assert first["timestamp"] == made[3]["timestamp"]
    assert stored[150]["entity_id"] == f"{TRICKY}0" and stored[150]["data"] == {"t": TRICKY}
