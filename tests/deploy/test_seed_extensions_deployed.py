"""Cursor loops and the quantum tool on the real LocalExecutor stack (tests/deploy/conftest.py),
triggered through the REST API, results and the event log asserted.

* cursor: the worker slots are mapped task instances the executor runs as separate processes,
  so they drain the queue at the same time; one completion event per item;
* cursor, one slot's task process killed with SIGKILL mid-drain: Airflow retries the slot, the
  item it held comes back through the claim's stale-claim clause, every item is done exactly
  once (a primary key on the results) and the run succeeds; in the event log the killed try
  has exactly one TaskFinished (error, told at the run's end from Airflow's task history), the
  retry its own TaskStarted and TaskFinished (success), and what the killed process emitted
  while the event store was stalled (its table locked) is there, from its journal;
* quantum: the Bell example on the aer simulator, provenance in the step result and in the
  ToolCompleted event of the deployment's event store.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from airflow_plugin.events.outbox import Outbox

from .checks import names, wait_for_events

CURSOR = "tests.deploy_cursor"


def _workers(client, run_id: str) -> list[dict]:
    return sorted(
        (ti for ti in client.task_instances(CURSOR, run_id) if ti["task_id"] == "work.worker"),
        key=lambda ti: ti["map_index"],
    )


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _done_rows(stack, queue: str) -> list[tuple[int, int]]:
    with psycopg.connect(stack.manifest["data_url"]) as conn:
        return conn.execute(f"SELECT id, pid FROM {queue}_done ORDER BY id").fetchall()


def _queue(stack, queue: str) -> Counter:
    with psycopg.connect(stack.manifest["data_url"]) as conn:
        rows = conn.execute(f"SELECT status, attempt_count FROM {queue}_queue").fetchall()
    return Counter(rows)


@contextlib.contextmanager
def _event_store_stalled(stack) -> Iterator[None]:
    """The stack's event table locked: every process's event writes wait until the end."""
    with psycopg.connect(stack.manifest["events_url"]) as conn:
        conn.execute("LOCK TABLE noetl.event_log IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def _items_by(stack, queue: str, pid: int) -> set[int]:
    return {item for item, by in _done_rows(stack, queue) if by == pid}


def _moment(value) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def test_cursor_slots_drain_the_queue_concurrently(local_stack) -> None:
    client = local_stack.client
    client.wait_for_dag(CURSOR)
    run_id = client.trigger(
        CURSOR, conf={"items": 40, "pause": 0.2, "slots": 4, "queue": "cursor_a"}
    )["dag_run_id"]
    run = client.wait_for_run(CURSOR, run_id, timeout=240)
    assert run["state"] == "success", client.task_instances(CURSOR, run_id)
    assert client.xcom_return(CURSOR, run_id, "verify")["result"]["rows"] == [
        {"done": 40, "total": 40}
    ]
    tail = client.xcom_return(CURSOR, run_id, "work.tail")["result"]
    assert tail["stats"] == {"total": 40, "success": 40, "failed": 0}
    workers = _workers(client, run_id)
    assert [w["map_index"] for w in workers] == [0, 1, 2, 3]
    assert {w["state"] for w in workers} == {"success"}
    # At the same time: every slot started before any slot ended.
    assert max(_at(w["start_date"]) for w in workers) < min(_at(w["end_date"]) for w in workers)
    rows = _done_rows(local_stack, "cursor_a")
    assert [r[0] for r in rows] == list(range(1, 41))
    assert len({pid for _, pid in rows}) >= 2  # items were taken by more than one process
    assert _queue(local_stack, "cursor_a") == Counter({("done", 1): 40})
    events = wait_for_events(local_stack, CURSOR, run_id, "PlaybookProcessed")
    done = [e for e in events if e["name"] == "LoopIterationCompleted"]
    assert sorted(e["data"]["item"]["id"] for e in done) == list(range(1, 41))
    assert {e["alias"] for e in done} == {"call.done"}
    # The items' own chain (python + postgres per item) left no bookkeeping events.
    item_events = [e for e in events if e["step"] == "work" and e["iteration"] is not None]
    assert {e["name"] for e in item_events} == {"LoopIterationCompleted"}


def test_cursor_slot_killed_mid_drain_is_retried_and_every_item_done_once(local_stack) -> None:
    client = local_stack.client
    client.wait_for_dag(CURSOR)
    conf = {"items": 60, "pause": 0.5, "slots": 4, "stale_seconds": 3, "queue": "cursor_b"}
    run_id = client.trigger(CURSOR, conf=conf)["dag_run_id"]
    deadline = time.monotonic() + 180
    while True:
        victim = next((w for w in _workers(client, run_id) if w["map_index"] == 1), None)
        if victim and victim["state"] == "running" and victim["pid"]:
            try:
                if len(_done_rows(local_stack, "cursor_b")) >= 6:
                    break
            except psycopg.errors.UndefinedTable:
                pass
        assert time.monotonic() < deadline, _workers(client, run_id)
        time.sleep(0.2)
    killed_pid = victim["pid"]
    journals = Path(local_stack.state) / "noetl" / "outbox" / "journal"
    # Stall the event store, let the slot finish one more item (its completion event can now
    # reach the store only through the process's journal), then kill the slot's process.
    with _event_store_stalled(local_stack):
        stalled_at = datetime.now(UTC)
        before = _items_by(local_stack, "cursor_b", killed_pid)
        while not _items_by(local_stack, "cursor_b", killed_pid) - before:
            assert time.monotonic() < deadline + 60, "the slot finished no item while stalled"
            time.sleep(0.05)
        time.sleep(0.2)  # its event is emitted right after the item's row is committed
        assert list(journals.glob(f"{killed_pid}-*.jsonl")), sorted(journals.iterdir())
        os.kill(killed_pid, signal.SIGKILL)
        stalled_items = _items_by(local_stack, "cursor_b", killed_pid) - before
    killed_at = time.monotonic()

    run = client.wait_for_run(CURSOR, run_id, timeout=300, interval=0.5)
    assert run["state"] == "success", client.task_instances(CURSOR, run_id)
    retried = client.task_instance(CURSOR, run_id, "work.worker", 1)
    assert retried["state"] == "success" and retried["try_number"] >= 2, retried
    rows = _done_rows(
        local_stack, "cursor_b"
    )  # a primary key: an item done twice would have failed
    assert [r[0] for r in rows] == list(range(1, 61))
    queue = _queue(local_stack, "cursor_b")
    assert sum(queue.values()) == 60 and {status for status, _ in queue} == {"done"}
    # The item the killed attempt held (if it held one) was claimed twice, and done once.
    assert sum(n for (_, attempts), n in queue.items() if attempts > 1) <= 1
    assert client.xcom_return(CURSOR, run_id, "verify")["result"]["rows"] == [
        {"done": 60, "total": 60}
    ]
    events = wait_for_events(local_stack, CURSOR, run_id, "PlaybookProcessed")
    done = [e for e in events if e["name"] == "LoopIterationCompleted"]
    counted = Counter(e["data"]["item"]["id"] for e in done)
    assert max(counted.values()) == 1, counted  # never two completions of one item
    # Every item a surviving process did has its completion event.
    survivors = {item for item, pid in rows if pid != killed_pid}
    assert survivors <= set(counted), sorted(survivors - set(counted))
    # What the killed process emitted while the store was stalled is in the store (from its
    # journal, adopted by the next delivery), emitted by try 1 after the stall began.
    slot = [e for e in events if e["task_id"] == "work.worker" and e["map_index"] == 1]
    late = [e for e in slot if e["try_number"] == 1 and _moment(e["timestamp"]) >= stalled_at]
    late_items = {e["data"]["item"]["id"] for e in late if e["name"] == "LoopIterationCompleted"}
    assert stalled_items and stalled_items <= late_items, (stalled_items, late)
    assert not list(journals.glob(f"{killed_pid}-*.jsonl"))
    # One TaskFinished per try of the slot, the retry's told by its own process. The killed
    # try told nobody; the scheduler tells it when the executor's report of the dead worker
    # reaches it before the supervisor's up_for_retry does (``_process_executor_events`` ->
    # ``handle_failure``), else the run's end tells it from Airflow's task history. Both use
    # the attempt's id: one row whichever came first, or both.
    tries = list(range(1, retried["try_number"] + 1))
    ends = {e["try_number"]: e for e in slot if e["name"] == "TaskFinished"}
    assert sorted(e["try_number"] for e in slot if e["name"] == "TaskFinished") == tries, ends
    assert sorted(e["try_number"] for e in slot if e["name"] == "TaskStarted") == tries
    killed = ends[1]
    assert killed["status"] == "error" and killed["source"] == "server", killed
    assert killed["data"]["will_retry"] is True
    told_by = killed["data"]["told_by"]
    assert told_by in ("run end (task_instance_history)", "server hook on_task_instance_failed")
    assert ends[tries[-1]]["status"] == "success" and ends[tries[-1]]["source"] == "worker"
    # Nothing left waiting: the run's end delivered what the stall spilled.
    outbox = Outbox(Path(local_stack.state) / "noetl" / "outbox")
    waited = time.monotonic() + 30
    while outbox.count() and time.monotonic() < waited:
        time.sleep(0.5)
    assert outbox.count() == 0
    print(
        f"\ncursor on the stack: slot 1 killed, retried (try {retried['try_number']}), run done "
        f"{time.monotonic() - killed_at:.1f}s after the kill; items by the killed process: "
        f"{sum(1 for _, pid in rows if pid == killed_pid)}, of which {len(stalled_items)} while "
        f"the store was stalled; its events after the stall, from its journal: {len(late)}; "
        f"its TaskFinished told by {told_by}"
    )


def test_quantum_bell_on_the_stack_with_provenance(local_stack) -> None:
    client = local_stack.client
    dag_id = "examples.quantum_bell"
    client.wait_for_dag(dag_id)
    run_id = client.trigger(dag_id, conf={"shots": 200})["dag_run_id"]
    run = client.wait_for_run(dag_id, run_id, timeout=240)
    assert run["state"] == "success", client.task_instances(dag_id, run_id)
    result = client.xcom_return(dag_id, run_id, "start")["result"]
    assert set(result["counts"]) <= {"00", "11"} and sum(result["counts"].values()) == 200
    provenance = result["provenance"]
    assert provenance["provider"] == "aer" and provenance["shots"] == 200
    assert provenance["seed_simulator"] == 7
    assert client.xcom_return(dag_id, run_id, "summarize")["result"]["outcomes"]
    events = wait_for_events(local_stack, dag_id, run_id, "PlaybookProcessed")
    (completed,) = [e for e in events if e["name"] == "ToolCompleted" and e["step"] == "start"]
    assert completed["data"]["provenance"]["job_id"] == result["job_id"]
    assert "PlaybookProcessed" in names(events)
