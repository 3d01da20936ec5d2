"""The seed's cursor shape at test scale: 10 facilities x 100 patients x 5 data types = 5,000
claims drained by 8 slots, each in its own OS process (as the LocalExecutor or Celery runs
mapped slots), against a real Postgres, under CPU load the test starts itself (4 busy-loop
processes on top of the 8 slots: a live slot is regularly descheduled for longer than a claim's
1 s stale interval). One slot is killed with SIGKILL while it holds an item; another is stopped
with SIGSTOP while it holds an item, past its 1 s lease, until a live slot has completed that
item, then continued with SIGCONT.

Asserted: every item processed exactly once (a primary key on the results, the queue's counts,
every lease done once), the killed slot's item taken over when its lease expired and processed
once by another slot, the stopped slot's late completion refused and recorded (its report's
``lease_lost`` and a ``CursorLeaseLost`` event), one completion event per item, and events per
item <= 1.1 (printed next to the same work as a ``loop.in``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import psycopg
import pytest

from airflow_plugin.drivers.postgres import GUARANTEE
from airflow_plugin.events import MemoryRecorder, flush, recording, set_default_recorder
from airflow_plugin.events.outbox import Outbox
from airflow_plugin.events.store import EventStore
from airflow_plugin.events.writer import StoreRecorder
from airflow_plugin.runtime.loop import finish, run_loop
from tests.harness.postgres import airflow_conn_env
from tests.runtime.cursor import workqueue

TOTAL = 10 * 100 * 5  # 10 facilities x 100 patients x 5 data types
SLOTS, VICTIM, PAUSED = 8, 40, 80
STALE, LEASE = 1, 1  # seconds: the claim's stale-claim clause and the driver's lease
BURNERS = int(os.environ.get("NOETL_TEST_BURNERS", "4"))  # CPU load, as `stress-ng --cpu 4`


def _wait_for_pid(marker, slots, what: str) -> int:
    deadline = time.monotonic() + 300
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline, f"no slot claimed the {what} item"
        assert all(p.poll() is None for p in slots), f"a slot exited before the {what}"
        time.sleep(0.05)
    return int(marker.read_text())


def _done_by(dsn: str, item: int) -> int | None:
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT r.pid FROM facility_results r JOIN facility_queue q USING"
            " (facility, patient, data_type) WHERE q.id = %s",
            (item,),
        ).fetchone()
    return None if found is None else found[0]


@pytest.mark.slow
def test_5000_claims_8_slots_one_killed_one_stopped_every_item_once_under_load(
    airflow_db, pg_cluster, pg_connections, pg_test_dsn, tmp_path
):
    payload = workqueue.compiled_payload(tmp_path / "dags")
    workqueue.fill_queue(pg_test_dsn, TOTAL)
    events_url = pg_cluster.create_database(f"events_{uuid.uuid4().hex[:8]}")
    marker, pause_marker, resume = (tmp_path / n for n in ("victim.pid", "paused.pid", "resume"))
    execution_id = 7_000_000_000 + os.getpid()
    inputs = workqueue.step_inputs(
        execution_id,
        SLOTS,
        stale_seconds=STALE,
        lease_seconds=LEASE,
        victim=VICTIM,
        marker=str(marker),
        pause_victim=PAUSED,
        pause_marker=str(pause_marker),
        resume_file=str(resume),
    )
    job = workqueue.write_job(tmp_path / "job.json", "scale", payload, inputs)
    scope = workqueue.read_job(job)["cursor"]["scope"]
    env = {
        "NOETL_EVENTS_URL": events_url,
        airflow_conn_env("pg_local"): os.environ[airflow_conn_env("pg_local")],
    }
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(BURNERS)]
    slots: list[subprocess.Popen] = []
    stopped_pid = None
    try:
        started = time.monotonic()
        slots = workqueue.start_slots(job, SLOTS, env)
        # The slot that claimed the victim writes its pid and parks: kill it mid-item.
        victim_pid = _wait_for_pid(marker, slots, "victim")
        (killed,) = [p for p in slots if p.pid == victim_pid]
        os.kill(victim_pid, signal.SIGKILL)
        # The slot that claimed the pause victim writes its pid and waits: stop it there until
        # its lease expired and a live slot completed the item, then let it go on.
        live = [p for p in slots if p is not killed]
        stopped_pid = _wait_for_pid(pause_marker, live, "pause victim")
        (stopped,) = [p for p in slots if p.pid == stopped_pid]
        os.kill(stopped_pid, signal.SIGSTOP)
        deadline = time.monotonic() + 300
        while (taker := _done_by(pg_test_dsn, PAUSED)) is None:
            assert time.monotonic() < deadline, "nobody took over the stopped slot's item"
            time.sleep(0.1)
        assert taker != stopped_pid
        resume.write_text("go")
        os.kill(stopped_pid, signal.SIGCONT)
        stopped_pid = None
        outputs = {p.pid: p.communicate(timeout=900)[0] for p in slots}
        elapsed = time.monotonic() - started
    finally:
        if stopped_pid is not None:
            os.kill(stopped_pid, signal.SIGCONT)
        for p in slots + burners:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert killed.returncode == -signal.SIGKILL
    for p in slots:
        if p is not killed:
            assert p.returncode == 0, outputs[p.pid][-3000:]

    total = TOTAL
    with psycopg.connect(pg_test_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM facility_results").fetchone() == (total,)
        states = dict(conn.execute("SELECT status, count(*) FROM facility_queue GROUP BY 1"))
        assert states == {"done": total}
        leases = dict(
            conn.execute(
                "SELECT state, count(*) FROM noetl_cursor_lease WHERE scope = %s GROUP BY 1",
                (scope,),
            )
        )
        assert leases == {"done": total}
        # Claimed twice at least: by the killed (stopped) slot, then, once its lease expired,
        # by a live one.
        for item in (VICTIM, PAUSED):
            (claims,) = conn.execute(
                "SELECT claims FROM noetl_cursor_lease WHERE scope = %s AND item = %s",
                (scope, f"[{item}]"),
            ).fetchone()
            assert claims >= 2, item
        by_killed = conn.execute(
            "SELECT count(*) FROM facility_results WHERE pid = %s", (victim_pid,)
        ).fetchone()[0]
        pids = {pid for (pid,) in conn.execute("SELECT DISTINCT pid FROM facility_results")}
    assert _done_by(pg_test_dsn, VICTIM) not in (None, victim_pid)
    assert pids <= {p.pid for p in slots}

    # The stopped slot's late completion was refused and recorded in its report.
    reports = {n: workqueue.slot_report(job, n) for n in range(SLOTS)}
    lost = {
        n: [entry["item"]["id"] for entry in report["lease_lost"]]
        for n, report in reports.items()
        if report is not None and report["lease_lost"]
    }
    stopped_slot = [p.pid for p in slots].index(stopped.pid)
    assert PAUSED in lost.get(stopped_slot, []), lost
    assert {r["guarantee"] for r in reports.values() if r is not None} == {GUARANTEE}
    refused = sum(len(items) for items in lost.values())
    # Claims the stale-claim clause answered with an item a live slot still held: not run.
    skipped = sum(r["skipped"] for r in reports.values() if r is not None)

    # The loop's end over every surviving slot's records, recorded to the same store.
    records = []
    for report in reports.values():
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
    lost_events = [r for r in rows if r["name"] == "CursorLeaseLost"]
    assert len(lost_events) >= refused  # the killed slot may have recorded some too
    assert any(
        r["data"]["item"]["id"] == PAUSED and r["data"]["slot"] == stopped_slot for r in lost_events
    ), lost_events
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
        f"\ncursor: {total} items, {SLOTS} slots (one killed, one stopped), {BURNERS} CPU burners, "
        f"{elapsed:.1f}s, {total / elapsed:.0f} items/s, {refused} completion(s) refused, "
        f"{skipped} claim(s) of a held item skipped; "
        f"events/item cursor {cursor_ratio:.3f} vs loop.in "
        f"{loop_in_ratio:.2f} ({loop_in_ratio / cursor_ratio:.1f}x fewer)"
    )
    assert cursor_ratio <= 1.1
    store.dispose()
