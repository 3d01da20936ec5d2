"""A run that failed, cleared in Airflow and run again: the log keeps both attempts.

Under ``dag.test()`` with the listener plugin and a real SQLite/Postgres store: ``transform``
fails until its input exists, so the run fails. The input is then supplied and the failed task
and its downstream are cleared with Airflow's own ``clear_task_instances`` (what the REST API's
clearTaskInstances does: the run's ``clear_number`` goes up, the tries are archived), and the
run is driven to its end again the way ``dag.test`` drives one. The second WorkflowFinished is
an event of its own: events, ``noetlc status`` and the projection say success, and keep the
failed try and the failed attempt as history; the step that had succeeded did not run again.
"""

from __future__ import annotations

import importlib.util
import io
import textwrap
import uuid
from argparse import Namespace
from pathlib import Path

from airflow_plugin.events.cli import run_status, timeline
from airflow_plugin.events.projection import project
from airflow_plugin.templating.ids import execution_id_for

DAG_ID = "events.cleared"


def source(flag: Path) -> str:
    return textwrap.dedent(
        f"""
        from pathlib import Path

        from airflow.sdk import DAG, task

        # Tagged noetl: the event log records it like a compiled playbook's DAG.
        with DAG({DAG_ID!r}, schedule=None, tags=["noetl"]) as dag:

            @task
            def extract():
                return 5

            @task
            def transform(value):
                if not Path({str(flag)!r}).exists():
                    raise ZeroDivisionError("the divisor is not there yet")
                return value * 2

            @task
            def load(value):
                return {{"loaded": value}}

            load(transform(extract()))
        """
    )


def sdk_dag(dags_folder: Path, dag_id: str):
    """The DAG object of the file ``run_dag`` wrote (tasks run from it, as ``dag.test`` runs
    them: the serialized DAG schedules, the SDK one executes)."""
    spec = importlib.util.spec_from_file_location(
        f"cleared_{uuid.uuid4().hex}", dags_folder / f"{dag_id}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def clear_and_rerun(dag, run_id: str, task_ids: set[str]) -> str:
    """Clear ``task_ids`` of the run with Airflow's clear (run state back to queued, its
    clear_number + 1), then run what became runnable as ``dag.test`` does; the run's state."""
    dag_id = dag.dag_id
    from airflow.models.dagbag import DBDagBag
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance, clear_task_instances
    from airflow.sdk import timezone
    from airflow.sdk.definitions.dag import _run_task
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import select

    with create_session() as session:
        tis = list(
            session.scalars(
                select(TaskInstance).where(
                    TaskInstance.dag_id == dag_id,
                    TaskInstance.run_id == run_id,
                    TaskInstance.task_id.in_(task_ids),
                )
            )
        )
        clear_task_instances(tis, session, dag_run_state=DagRunState.QUEUED)
    with create_session() as session:
        dag_run = session.scalar(
            select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)
        )
        dag_run.dag = DBDagBag().get_dag_for_run(dag_run=dag_run, session=session)
        dag_run.state = DagRunState.RUNNING
        session.commit()
        for _ in range(50):
            if dag_run.state != DagRunState.RUNNING:
                break
            session.expire_all()
            schedulable, _ = dag_run.update_state(session=session)
            for ti in schedulable:
                ti.try_number += 1
                ti.state = TaskInstanceState.SCHEDULED
                ti.scheduled_dttm = timezone.utcnow()
            session.commit()
            for ti in dag_run.get_task_instances(session=session):
                if ti.state == TaskInstanceState.SCHEDULED:
                    _run_task(ti=ti, task=dag.task_dict[ti.task_id])
        return str(getattr(dag_run.state, "value", dag_run.state))


def test_a_cleared_run_that_succeeds_reads_success_and_keeps_the_failed_attempt(
    event_log, run_dag, airflow_db, tmp_path
):
    flag = tmp_path / "divisor"
    out = run_dag(source(flag), DAG_ID)
    assert out.state == "failed" and out.states["transform"] == "failed", out.states
    execution = execution_id_for(DAG_ID, out.run_id)
    failed = project(event_log.rows(execution))
    assert failed["status"] == "error"

    flag.write_text("2")
    dag = sdk_dag(airflow_db, DAG_ID)
    assert clear_and_rerun(dag, out.run_id, {"transform", "load"}) == "success"
    rows = event_log.rows(execution)

    finished = [r for r in rows if r["name"] == "WorkflowFinished"]
    assert [(r["status"], r["data"].get("run_attempt", 0)) for r in finished] == [
        ("error", 0),
        ("success", 1),
    ]
    assert len({r["event_id"] for r in finished}) == 2
    # The re-run's tasks announced its start again, as attempt 1 (read in the task process).
    started = [r for r in rows if r["name"] == "WorkflowStarted"]
    assert sorted(r["data"].get("run_attempt", 0) for r in started) == [0, 1]
    assert [r["source"] for r in started if r["data"].get("run_attempt")] == ["worker"]
    requested = [r for r in rows if r["name"] == "PlaybookExecutionRequested"]
    assert len(requested) == 1  # the request was made once
    transform_ends = [
        (r["try_number"], r["status"])
        for r in rows
        if r["name"] == "TaskFinished" and r["task_id"] == "transform"
    ]
    assert sorted(transform_ends) == [(1, "error"), (2, "success")]
    # The step that had succeeded was not run again: one start, one try.
    extract_starts = [r for r in rows if r["name"] == "TaskStarted" and r["task_id"] == "extract"]
    assert [r["try_number"] for r in extract_starts] == [1]

    state = project(rows)
    assert state["status"] == "success"
    assert [(a["attempt"], a["status"]) for a in state["attempts"]] == [
        (0, "error"),
        (1, "success"),
    ]
    transform = state["tasks"]["transform"]
    assert transform["status"] == "success" and transform["error"] is None
    assert [(t["try_number"], t["status"]) for t in transform["tries"]] == [
        (1, "failed"),
        (2, "success"),
    ]
    assert "ZeroDivisionError" in transform["tries"][0]["error"]

    out_text = io.StringIO()
    args = Namespace(execution=str(execution), url=event_log.store.url, json=False)
    assert run_status(args, out_text, io.StringIO()) == 0, "status did not read the log"
    text = out_text.getvalue()
    assert text.splitlines()[0].split("  ")[2] == "success", text
    assert "  run attempt 1  error" in text and "  run attempt 2  success" in text
    assert "task transform try 1  failed  error: ZeroDivisionError" in text, text
    assert "task transform try 2  success" in text
    # `noetlc events`: both ends of the run, the second saying which attempt it was.
    ends = [line for line in timeline(rows).splitlines() if "WorkflowFinished" in line]
    assert len(ends) == 2 and "run attempt" not in ends[0], ends
    assert "success" in ends[1] and ends[1].endswith("run attempt 2"), ends


def test_the_same_finish_told_twice_is_one_event(event_log):
    """Idempotency stays for true duplicates: an attempt's end told by two processes."""
    from airflow_plugin.events.recorder import flush
    from airflow_plugin.events.workflow import run_finished

    for _ in range(2):
        for attempt in (0, 1):
            run_finished(77, "dup", status="success", data={}, run_attempt=attempt, run_id="r")
    flush(event_log.recorder)
    rows = [r for r in event_log.rows(77) if r["name"] == "WorkflowFinished"]
    assert sorted(r["data"].get("run_attempt", 0) for r in rows) == [0, 1]
