"""The seed's cursor shape at test scale: 10 facilities x 100 patients x 5 data types = 5,000
claims drained by 8 slots, each in its own OS process (as the LocalExecutor or Celery runs
mapped slots), against a real Postgres; one slot is killed with SIGKILL while it holds an item.

Asserted: every item processed exactly once (a primary key on the results and the counts), the
killed slot's item reclaimed by the claim's stale-claim clause and processed once by another
slot, one completion event per item, and events per item <= 1.1 (printed next to the same work
as a ``loop.in``)."""

from __future__ import annotations

import os
import signal
import time
import uuid

import psycopg

from airflow_plugin.events import MemoryRecorder, flush, recording, set_default_recorder
from airflow_plugin.events.outbox import Outbox
from airflow_plugin.events.store import EventStore
from airflow_plugin.events.writer import StoreRecorder
from airflow_plugin.runtime.loop import finish, run_loop
from tests.harness.postgres import airflow_conn_env
from tests.runtime.cursor import workqueue

TOTAL = 10 * 100 * 5  # 10 facilities x 100 patients x 5 data types
SLOTS, VICTIM = 8, 40


def test_5000_claims_8_slots_one_killed_every_item_once(
    airflow_db, pg_cluster, pg_connections, pg_test_dsn, tmp_path
):
    payload = workqueue.compiled_payload(tmp_path / "dags")
    workqueue.fill_queue(pg_test_dsn, TOTAL)
    events_url = pg_cluster.create_database(f"events_{uuid.uuid4().hex[:8]}")
    marker = tmp_path / "victim.pid"
    execution_id = 7_000_000_000 + os.getpid()
    inputs = workqueue.step_inputs(
        execution_id, SLOTS, stale_seconds=3, victim=VICTIM, marker=str(marker)
    )
    job = workqueue.write_job(tmp_path / "job.json", "scale", payload, inputs)
    env = {
        "NOETL_EVENTS_URL": events_url,
        airflow_conn_env("pg_local"): os.environ[airflow_conn_env("pg_local")],
    }
    started = time.monotonic()
    slots = workqueue.start_slots(job, SLOTS, env)
    try:
        # The slot that claimed the victim writes its pid and parks: kill it mid-item.
        deadline = time.monotonic() + 120
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline, "no slot claimed the victim item"
            assert all(p.poll() is None for p in slots), "a slot exited before the victim"
            time.sleep(0.05)
        victim_pid = int(marker.read_text())
        (killed,) = [p for p in slots if p.pid == victim_pid]
        os.kill(victim_pid, signal.SIGKILL)
        outputs = {p.pid: p.communicate(timeout=400)[0] for p in slots}
    finally:
        for p in slots:
            if p.poll() is None:
                p.kill()
    elapsed = time.monotonic() - started
    assert killed.returncode == -signal.SIGKILL
    for p in slots:
        if p is not killed:
            assert p.returncode == 0, outputs[p.pid][-3000:]

    total = TOTAL
    with psycopg.connect(pg_test_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM facility_results").fetchone() == (total,)
        states = dict(conn.execute("SELECT status, count(*) FROM facility_queue GROUP BY 1"))
        assert states == {"done": total}
        # Claimed twice: by the killed slot, then (reclaimed when stale) by a live one.
        retried = conn.execute(
            "SELECT id, attempt_count FROM facility_queue WHERE attempt_count > 1"
        ).fetchall()
        assert retried == [(VICTIM, 2)]
        (pid,) = conn.execute(
            "SELECT r.pid FROM facility_results r JOIN facility_queue q USING"
            " (facility, patient, data_type) WHERE q.id = %s",
            (VICTIM,),
        ).fetchone()
        assert pid != victim_pid
        by_killed = conn.execute(
            "SELECT count(*) FROM facility_results WHERE pid = %s", (victim_pid,)
        ).fetchone()[0]
        used = conn.execute("SELECT count(DISTINCT pid) FROM facility_results").fetchone()[0]
    assert used == SLOTS - 1 + (by_killed > 0)

    # The loop's end over every surviving slot's records, recorded to the same store.
    records = []
    for n in range(SLOTS):
        report = workqueue.slot_report(job, n)
        if report is not None:  # none from the killed slot
            records += report["records"]
    store = EventStore(events_url)
    recorder = StoreRecorder(store, Outbox(tmp_path / "outbox"), flush_timeout=30)
    with recording(recorder, dag_id="tests.facility_queue", run_id="scale", task_id="work.tail"):
        outcome, _ = finish(payload, inputs, records)
    assert flush(recorder, 60)
    # The killed attempt's records died with it: its items are done and in the event log,
    # but only finished slot attempts make the loop result.
    kept = total - by_killed
    assert outcome.result["stats"] == {"total": kept, "success": kept, "failed": 0}
    assert outcome.next_steps == ["done"]

    rows = store.events(execution_id)
    completions = [r for r in rows if r["name"] == "LoopIterationCompleted"]
    completed = [r["data"]["item"]["id"] for r in completions]
    assert len(completed) == len(set(completed))  # never two completions of one item
    # Every item of a surviving slot has its completion event; the killed process may have died
    # with its last events still queued in memory (at most the items it completed).
    assert total - by_killed <= len(completed) <= total
    assert len({r["event_id"] for r in rows}) == len(rows)
    cursor_ratio = len(rows) / total

    # The same work as a `loop.in` over 200 of the rows, in process, events counted.
    with psycopg.connect(pg_test_dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM facility_results WHERE facility = 1 AND patient <= 40")
        conn.execute("UPDATE facility_queue SET status = 'claimed' WHERE id <= 200")
        items = [
            dict(zip(("id", "facility", "patient", "data_type", "attempt_count"), row, strict=True))
            for row in conn.execute(
                "SELECT id, facility, patient, data_type, attempt_count FROM facility_queue"
                " WHERE id <= 200 ORDER BY id"
            )
        ]
    loop_in = {
        **payload,
        "loop": {"in": items, "iterator": "item", "mode": "sequential"},
    }
    memory = MemoryRecorder()
    previous = set_default_recorder(memory)
    try:
        run_loop(loop_in, {**inputs, "execution_id": execution_id + 1})
    finally:
        set_default_recorder(previous)
    loop_in_ratio = len(memory.events) / len(items)
    print(
        f"\ncursor: {total} items, {SLOTS} slots (one killed), {elapsed:.1f}s, "
        f"{total / elapsed:.0f} items/s; events/item cursor {cursor_ratio:.3f} vs loop.in "
        f"{loop_in_ratio:.2f} ({loop_in_ratio / cursor_ratio:.1f}x fewer)"
    )
    assert cursor_ratio <= 1.1
    store.dispose()
