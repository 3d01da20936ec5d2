"""Every attempt of a retried task has exactly one TaskFinished, told by whoever saw it end.

A task fails twice and succeeds on its third try (Airflow ``retries``) under ``dag.test()``,
with the listener plugin and a real SQLite/Postgres store. Its attempts are told by the task
process itself; the run's end tells every archived attempt again (``task_instance_history``),
with the same ids, so each attempt is one row. When the task process never told its failure
(as when it is killed with SIGKILL: no hook runs), the run's end is what tells it.
"""

from __future__ import annotations

import textwrap

import pytest

from airflow_plugin.events import set_default_recorder
from airflow_plugin.events.projection import project
from airflow_plugin.templating.ids import execution_id_for

DAG_ID = "events.flaky"
SOURCE = textwrap.dedent(
    f"""
    import datetime as dt

    from airflow.sdk import DAG, task

    # Tagged noetl: the event log records it like a compiled playbook's DAG.
    with DAG({DAG_ID!r}, schedule=None, tags=["noetl"]) as dag:

        @task(retries=2, retry_delay=dt.timedelta(0))
        def flaky(**context):
            try_number = context["ti"].try_number
            if try_number < 3:
                raise RuntimeError(f"flaky on try {{try_number}}")
            return {{"try": try_number}}

        flaky()
    """
)


class KilledBeforeTelling:
    """Passes events on to the store, except the failures a task process tells of itself:
    what the store sees when each failed attempt was killed before its hooks could run."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def record(self, event) -> None:
        if event.name == "TaskFinished" and event.source == "worker" and event.status == "error":
            return
        self.inner.record(event)

    def flush(self, timeout=None) -> bool:
        return self.inner.flush(timeout)

    def deliver_soon(self) -> None:
        self.inner.deliver_soon()


def task_ends(rows: list[dict]) -> list[dict]:
    return sorted(
        (r for r in rows if r["name"] == "TaskFinished" and r["task_id"] == "flaky"),
        key=lambda r: r["try_number"],
    )


@pytest.mark.parametrize("told_by_worker", [True, False], ids=["worker-told", "killed"])
def test_each_try_of_a_retried_task_finishes_once(event_log, run_dag, told_by_worker):
    if not told_by_worker:
        set_default_recorder(KilledBeforeTelling(event_log.recorder))
    out = run_dag(SOURCE, DAG_ID)
    assert out.state == "success" and out.xcom["flaky"] == {"try": 3}
    rows = event_log.rows(dag_id=DAG_ID, run_id=out.run_id)

    ends = task_ends(rows)
    assert [(e["try_number"], e["status"]) for e in ends] == [
        (1, "error"),
        (2, "error"),
        (3, "success"),
    ]
    assert len({e["event_id"] for e in ends}) == 3
    for end in ends[:2]:
        assert end["data"]["will_retry"] is True
        if told_by_worker:
            assert end["source"] == "worker" and "flaky on try" in end["data"]["error"]
        else:
            assert end["source"] == "server"
            assert end["data"]["told_by"] == "run end (task_instance_history)"
            assert end["data"]["state"] == "failed" and end["duration_sec"] is not None
    assert ends[2]["source"] == "worker"
    # Each try started once, with its own events.
    starts = [r["try_number"] for r in rows if r["name"] == "TaskStarted"]
    assert sorted(starts) == [1, 2, 3]

    # Replay: the run and the task succeeded (archived tries told last change nothing).
    state = project(r for r in rows if r["execution_id"] == execution_id_for(DAG_ID, out.run_id))
    assert state["status"] == "success"
    assert state["tasks"]["flaky"]["status"] == "success"
    assert state["tasks"]["flaky"]["try_number"] == 3
    assert state["tasks"]["flaky"]["error"] is None  # the failed tries' errors are history


def test_a_step_run_that_succeeds_after_a_failed_one_replays_without_its_old_error():
    """A region visits a step twice (a retry arc): the first visit failed, the second succeeded.
    The replayed step is a success with no error; a failed last visit keeps its error."""

    def finished(status: str, **data):
        return {"name": "StepFinished", "step": "fetch", "status": status, "data": data}

    first = finished("error", error={"message": "HTTP 503"})
    state = project([first, finished("success", result={"page": 2})])
    assert state["steps"]["fetch"] == {"status": "success", "runs": 2, "error": None}
    state = project([finished("success", result={"page": 1}), first])
    assert state["steps"]["fetch"]["error"] == {"message": "HTTP 503"}
