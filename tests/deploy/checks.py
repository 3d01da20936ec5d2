"""Checks shared by the LocalExecutor and the Celery deployment tests (plain functions over a
started :class:`tests.deploy.conftest.Stack`)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

HELLO = "examples.hello_world"
BRANCHING = "examples.branching"

# Four confs of the branching playbook and what its `summary` step returns for each: exclusive
# routing (small/large), inclusive fan-out (finance above 200, sales always, legal in the US).
BRANCHING_CASES = [
    ({"amount": 50, "region": "eu"}, {"tier": "small", "notified": []}, {"small_order"}),
    ({"amount": 150, "region": "eu"}, {"tier": "large", "notified": ["sales"]}, {"notify_sales"}),
    (
        {"amount": 250, "region": "eu"},
        {"tier": "large", "notified": ["finance", "sales"]},
        {"notify_finance", "notify_sales"},
    ),
    (
        {"amount": 300, "region": "us"},
        {"tier": "large", "notified": ["finance", "sales"]},
        {"notify_finance", "notify_sales", "notify_legal"},
    ),
]
BRANCHING_OPTIONAL = {
    "small_order",
    "large_order",
    "notify_finance",
    "notify_sales",
    "notify_legal",
}


def names(events: list[dict[str, Any]]) -> list[str]:
    return [event["name"] for event in events]


def wait_for_events(stack, dag_id: str, run_id: str, last: str, timeout: float = 30.0):
    """The run's events once ``last`` is stored (the scheduler's writer is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        events = stack.run_events(dag_id, run_id)
        if last in names(events) or time.monotonic() > deadline:
            return events
        time.sleep(0.3)


def assert_complete_run_log(
    stack, dag_id: str, run_id: str, status: str, tasks: dict[str, str]
) -> list[dict[str, Any]]:
    """The event log of one finished run: one start and one end of the workflow, each task's
    attempt started and finished once with its Airflow coordinates, nothing of other runs.

    ``tasks``: task_id -> the TaskFinished status expected (success, skipped, error)."""
    events = wait_for_events(stack, dag_id, run_id, "PlaybookProcessed")
    counts = Counter(names(events))
    for name in (
        "PlaybookExecutionRequested",
        "WorkflowStarted",
        "WorkflowFinished",
        "PlaybookProcessed",
    ):
        assert counts[name] == 1, (name, names(events))
    assert {event["run_id"] for event in events} == {run_id}
    assert {event["dag_id"] for event in events} == {dag_id}
    assert len({event["execution_id"] for event in events}) == 1
    by_name = {event["name"]: event for event in events}
    assert by_name["WorkflowFinished"]["status"] == status
    assert by_name["PlaybookProcessed"]["status"] == status
    assert by_name["WorkflowFinished"]["seq"] < by_name["PlaybookProcessed"]["seq"]
    # The scheduler tells the run's start before any task of it is queued.
    started = by_name["WorkflowStarted"]["seq"]
    assert all(e["seq"] > started for e in events if e["entity"] == "task"), names(events)

    finished = [e for e in events if e["name"] == "TaskFinished"]
    assert Counter(e["task_id"] for e in finished) == Counter(list(tasks)), finished
    for event in finished:
        assert event["status"] == tasks[event["task_id"]], event
    for task_id, expected in tasks.items():
        own = [e for e in events if e["task_id"] == task_id]
        if expected == "skipped":
            assert [e["name"] for e in own] == ["TaskFinished"], own
            continue
        # Airflow coordinates on every event the task's process told.
        for event in own:
            assert event["map_index"] == -1 and event["try_number"] == 1, event
        order = [e["name"] for e in own if e["entity"] in ("task", "step")]
        assert order[0] == "TaskStarted" and order[-1] == "TaskFinished", order
        if task_id != "noetl_outcome":  # the run's outcome task runs no step (lower/outcome.py)
            assert "StepStarted" in order
    return events


def run_hello_world(stack) -> str:
    client = stack.client
    run = client.trigger(HELLO, conf={"message": "hello deploy"})
    run_id = run["dag_run_id"]
    done = client.wait_for_run(HELLO, run_id, timeout=120)
    assert done["state"] == "success", client.task_instances(HELLO, run_id)
    states = {ti["task_id"]: ti["state"] for ti in client.task_instances(HELLO, run_id)}
    # noetl_outcome: the run's NoETL outcome (operators/outcome.py); no step's call failed.
    assert states == {
        "start": "success",
        "greet": "success",
        "end": "success",
        "noetl_outcome": "success",
    }
    value = client.xcom_return(HELLO, run_id, "end")
    # The conf overrides the workload: the run's own message, not the playbook's default.
    assert value["result"] == {"status": "complete", "echo": "HELLO DEPLOY"}
    assert value["status"] == "ok"
    events = assert_complete_run_log(stack, HELLO, run_id, "success", states)
    # Told by the worker's task processes and by the scheduler: the listener runs in both.
    assert {e["source"] for e in events if e["name"] == "TaskStarted"} == {"worker"}
    assert {e["source"] for e in events if e["name"] == "WorkflowFinished"} == {"server"}
    identity = {(e["playbook_path"], e["playbook_hash"]) for e in events}
    assert len(identity) == 1 and next(iter(identity))[0] == "playbooks/hello_world.yaml"
    return run_id


def run_branching_concurrently(stack) -> list[dict[str, Any]]:
    """Four runs of one DAG at once; each gets its own result and its own complete event log."""
    client = stack.client
    client.wait_for_dag(BRANCHING)
    client.set_paused(BRANCHING, False)
    runs = [client.trigger(BRANCHING, conf=conf)["dag_run_id"] for conf, _, _ in BRANCHING_CASES]
    finished = [client.wait_for_run(BRANCHING, run_id, timeout=240) for run_id in runs]
    assert [run["state"] for run in finished] == ["success"] * 4, finished
    # They really ran at the same time: every run started before any of them ended.
    latest_start = max(run["start_date"] for run in finished)
    earliest_end = min(run["end_date"] for run in finished)
    assert latest_start < earliest_end, [(r["start_date"], r["end_date"]) for r in finished]
    instances = []
    execution_ids = set()
    for run_id, (conf, summary, taken) in zip(runs, BRANCHING_CASES, strict=True):
        tis = client.task_instances(BRANCHING, run_id)
        instances += tis
        states = {ti["task_id"]: ti["state"] for ti in tis}
        ran = {task for task, state in states.items() if state == "success"}
        assert ran & BRANCHING_OPTIONAL == taken | (
            {"large_order"} if conf["amount"] > 100 else set()
        )
        assert client.xcom_return(BRANCHING, run_id, "summary")["result"] == summary, conf
        expected = {
            task: ("success" if state == "success" else "skipped") for task, state in states.items()
        }
        events = assert_complete_run_log(stack, BRANCHING, run_id, "success", expected)
        execution_ids |= {e["execution_id"] for e in events}
    assert len(execution_ids) == 4
    return instances
