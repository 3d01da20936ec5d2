"""Compiled playbooks on a real Airflow 3 deployment with the LocalExecutor: api-server,
scheduler, dag-processor and triggerer started by ``scripts/airflow-stack.sh``, everything
driven through the REST API, the NoETL event log read from the stack's Postgres."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from airflow_plugin.deploy.rest import AirflowApiError, AirflowClient

from .checks import names, run_branching_concurrently, run_hello_world, wait_for_events
from .conftest import stack_script

PARENT = "examples.nested_parent"
CHILD = "examples.nested_child"
SLEEPER = "tests.deploy_sleeper"


def test_stack_status_reports_every_process(local_stack) -> None:
    done = stack_script("status", "--state", str(local_stack.state), timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.rsplit(None, 1) for line in done.stdout.splitlines())
    assert lines == {
        **{
            name: "alive"
            for name in ("api-server", "scheduler", "dag-processor", "triggerer", "postgres")
        },
        "scheduler health": "healthy",
        "triggerer health": "healthy",
        "dag_processor health": "healthy",
        "API/UI": local_stack.manifest["api_url"],  # where to point a browser
    }
    print(f"stack up in {local_stack.up_seconds:.1f} s: {local_stack.manifest['timings']}")


def test_hello_world_runs_and_is_logged(local_stack) -> None:
    run_hello_world(local_stack)


def test_nested_playbook_defers_to_the_triggerer_and_returns_the_child_result(local_stack):
    client = local_stack.client
    client.wait_for_dag(CHILD)
    run_id = client.trigger(PARENT, conf={"who": "Grace"})["dag_run_id"]
    seen = set()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        seen.add(client.task_instance(PARENT, run_id, "call_child")["state"])
        if client.get_run(PARENT, run_id)["state"] in ("success", "failed"):
            break
        time.sleep(0.3)
    run = client.wait_for_run(PARENT, run_id, timeout=10)
    assert run["state"] == "success", client.task_instances(PARENT, run_id)
    # The step waited for its child on the triggerer, not in a worker slot.
    assert "deferred" in seen, seen
    # The triggerer ran the wait (its own log of the trigger, next to the task's log).
    task_logs = Path(local_stack.manifest["airflow_home"]) / "logs" / f"dag_id={PARENT}"
    trigger_logs = list((task_logs / f"run_id={run_id}" / "task_id=call_child").glob("*.trigger.*"))
    assert trigger_logs, f"no trigger log under {task_logs}"
    trigger_log = trigger_logs[0].read_text()
    assert "DagStateTrigger" in trigger_log and "trigger completed" in trigger_log, trigger_log
    child_run = f"noetl__{run_id}__call_child"
    assert client.get_run(CHILD, child_run)["state"] == "success"
    assert client.get_run(CHILD, child_run)["conf"] == {"name": "Grace"}
    # The child's result is the step's result, and the next step sees it.
    assert client.xcom_return(PARENT, run_id, "call_child")["result"] == {"greeting": "hello Grace"}
    assert client.xcom_return(PARENT, run_id, "end")["result"] == {
        "child": {"greeting": "hello Grace"}
    }
    # Parent and child each have their own complete run in the event log.
    parent_events = wait_for_events(local_stack, PARENT, run_id, "PlaybookProcessed")
    child_events = wait_for_events(local_stack, CHILD, child_run, "PlaybookProcessed")
    for events in (parent_events, child_events):
        assert Counter(names(events))["WorkflowFinished"] == 1
        assert [e["status"] for e in events if e["name"] == "WorkflowFinished"] == ["success"]
    child_execution = {e["execution_id"] for e in child_events}
    assert len(child_execution) == 1
    assert {e["execution_id"] for e in parent_events}.isdisjoint(child_execution)
    # The nested step's own events carry the task's coordinates (they are told in two task
    # processes: the call's start where the child was triggered, the rest after the deferral),
    # and the call points at the child's execution.
    step_events = [e for e in parent_events if e["step"] == "call_child"]
    assert [e["name"] for e in step_events if e["entity"] != "task"] == [
        "ToolStarted",
        "ToolCompleted",
        "StepStarted",
        "StepFinished",
        "NextEvaluated",
    ], step_events
    assert {(e["task_id"], e["try_number"]) for e in step_events} == {("call_child", 1)}
    completed = next(e for e in step_events if e["name"] == "ToolCompleted")
    assert completed["data"]["result"] == {"greeting": "hello Grace"}
    assert {int(completed["data"]["child_execution_id"])} == child_execution


def test_a_failed_child_run_fails_the_nested_step_naming_it(local_stack) -> None:
    client = local_stack.client
    parent, child = "tests.deploy_failing_parent", "tests.deploy_failing_child"
    client.wait_for_dag(child)
    run_id = client.trigger(parent)["dag_run_id"]
    run = client.wait_for_run(parent, run_id, timeout=180)
    assert run["state"] == "failed"
    states = {ti["task_id"]: ti["state"] for ti in client.task_instances(parent, run_id)}
    assert states == {"start": "failed", "after": "upstream_failed"}
    assert client.get_run(child, f"noetl__{run_id}__start")["state"] == "failed"
    events = wait_for_events(local_stack, parent, run_id, "PlaybookProcessed")
    [errored] = [e for e in events if e["name"] == "ToolErrored"]
    assert errored["step"] == "start" and errored["task_id"] == "start"
    assert child in errored["data"]["error"]
    [finished] = [e for e in events if e["name"] == "TaskFinished" and e["task_id"] == "start"]
    assert finished["status"] == "error"
    assert finished["data"]["error"].startswith("AirflowFailException: step 'start': "), finished


def test_a_paused_child_dag_fails_the_nested_step_at_once_saying_so(local_stack) -> None:
    client = local_stack.client
    parent, child = "tests.deploy_paused_parent", "tests.deploy_paused_child"
    # Compiled DAGs are created unpaused (no global setting on this stack says so).
    assert client.wait_for_dag(child)["is_paused"] is False
    client.set_paused(child, True)
    try:
        run_id = client.trigger(parent)["dag_run_id"]
        run = client.wait_for_run(parent, run_id, timeout=120)
    finally:
        client.set_paused(child, False)
    assert run["state"] == "failed"
    events = wait_for_events(local_stack, parent, run_id, "PlaybookProcessed")
    [errored] = [e for e in events if e["name"] == "ToolErrored"]
    assert f"the child playbook's DAG {child!r} is paused" in errored["data"]["error"], errored
    assert f"airflow dags unpause {child}" in errored["data"]["error"]


def test_a_child_that_is_not_deployed_fails_the_nested_step_naming_it(local_stack) -> None:
    client = local_stack.client
    parent = "tests.deploy_missing_child_parent"
    run_id = client.trigger(parent)["dag_run_id"]
    run = client.wait_for_run(parent, run_id, timeout=120)
    assert run["state"] == "failed"
    events = wait_for_events(local_stack, parent, run_id, "PlaybookProcessed")
    [errored] = [e for e in events if e["name"] == "ToolErrored"]
    assert (
        "the child playbook's DAG 'tests.deploy_never_deployed' is not deployed"
        in errored["data"]["error"]
    ), errored


def test_four_concurrent_runs_of_one_dag(local_stack) -> None:
    run_branching_concurrently(local_stack)


def _running_sleeper(stack) -> tuple[str, int]:
    """A run of the sleeper whose step is under way: (run id, pid of its task process)."""
    client = stack.client
    run_id = client.trigger(SLEEPER, conf={"seconds": 600})["dag_run_id"]
    # Inside the step: once its python call is under way and the event log has it (what the
    # process had not stored when killed would come from its journal, but only later: at the
    # next delivery).
    events = wait_for_events(stack, SLEEPER, run_id, "ToolStarted", timeout=90)
    assert "ToolStarted" in names(events), names(events)
    ti = client.task_instance(SLEEPER, run_id, "start")
    assert ti["state"] == "running" and ti["pid"], ti
    # The task instance's pid is the task process itself; its parent is the supervisor (the
    # LocalExecutor's worker process).
    cmdline = Path(f"/proc/{ti['pid']}/cmdline").read_bytes().replace(b"\0", b" ")
    assert cmdline.startswith(b"airflow worker"), cmdline
    return run_id, ti["pid"]


def _assert_one_failed_attempt(stack, run_id: str) -> dict:
    client = stack.client
    run = client.wait_for_run(SLEEPER, run_id, timeout=120, interval=0.5)
    assert run["state"] == "failed"
    assert client.task_instance(SLEEPER, run_id, "start")["state"] == "failed"
    events = wait_for_events(stack, SLEEPER, run_id, "PlaybookProcessed")
    finished = [e for e in events if e["name"] == "TaskFinished"]
    assert len(finished) == 1, finished
    assert finished[0]["task_id"] == "start" and finished[0]["try_number"] == 1
    assert finished[0]["status"] == "error" and finished[0]["source"] == "server"
    # The step began and never ended.
    assert "StepStarted" in names(events) and "StepFinished" not in names(events)
    assert [e["status"] for e in events if e["name"] == "WorkflowFinished"] == ["error"]
    return finished[0]


def test_sigkilled_task_process_has_exactly_one_failed_task_finished(local_stack) -> None:
    run_id, pid = _running_sleeper(local_stack)
    os.kill(pid, signal.SIGKILL)
    # The supervisor saw its child die and told the API server (which calls no listener):
    # the listener tells the attempt's end when the scheduler ends the run.
    finished = _assert_one_failed_attempt(local_stack, run_id)
    assert finished["data"]["state"] == "failed"
    assert "did not tell" in finished["data"]["told_by"]


def test_sigkilled_worker_has_exactly_one_failed_task_finished(local_stack) -> None:
    run_id, pid = _running_sleeper(local_stack)
    supervisor = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert b"LocalExecutor" in Path(f"/proc/{supervisor}/cmdline").read_bytes()
    # The task process and its supervisor die together: nobody tells the API server, the
    # executor reports the lost worker and the scheduler fails the attempt (its heartbeat
    # timeout is 15 s in the stack), through the listener in the scheduler.
    os.kill(supervisor, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    finished = _assert_one_failed_attempt(local_stack, run_id)
    assert "error" in finished["data"], finished


def test_rest_client_errors_name_the_request_never_the_password(local_stack) -> None:
    secret = "not-the-password-7f3a"
    bad = AirflowClient(local_stack.manifest["api_url"], "admin", secret)
    try:
        with pytest.raises(AirflowApiError, match=r"POST /auth/token as 'admin': 40[13]") as error:
            bad.token()
    finally:
        bad.close()
    assert secret not in str(error.value)
    client = local_stack.client
    with pytest.raises(AirflowApiError, match=r"GET /api/v2/dags/no\.such\.dag: 404") as error:
        client.get_dag("no.such.dag")
    assert error.value.status_code == 404
    with pytest.raises(AirflowApiError, match=r"DAG 'no.such.dag' not parsed after 1 s"):
        client.wait_for_dag("no.such.dag", timeout=1)


def test_postgres_playbook_uses_the_stacks_connection(local_stack) -> None:
    """`auth: pg_local` is the stack's AIRFLOW_CONN_PG_LOCAL, the database noetl_data."""
    client = local_stack.client
    dag_id = "examples.postgres_upsert"
    run_id = client.trigger(dag_id)["dag_run_id"]
    run = client.wait_for_run(dag_id, run_id, timeout=120)
    assert run["state"] == "success", client.task_instances(dag_id, run_id)
    rows = client.xcom_return(dag_id, run_id, "read_back")["result"]["command_0"]["rows"]
    with psycopg.connect(local_stack.manifest["data_url"]) as conn:
        stored = conn.execute("SELECT name, score FROM example_scores ORDER BY name").fetchall()
    assert [(row["name"], row["score"]) for row in rows] == stored
    assert len(stored) == 3


def test_parallel_loop_iterations_are_mapped_tasks_with_their_own_events(local_stack) -> None:
    client = local_stack.client
    dag_id = "examples.loop_parallel"
    run_id = client.trigger(dag_id)["dag_run_id"]
    run = client.wait_for_run(dag_id, run_id, timeout=120)
    assert run["state"] == "success", client.task_instances(dag_id, run_id)
    bodies = [ti for ti in client.task_instances(dag_id, run_id) if ti["task_id"] == "measure.body"]
    assert sorted(ti["map_index"] for ti in bodies) == [0, 1, 2, 3]
    assert {ti["state"] for ti in bodies} == {"success"}
    assert client.xcom_return(dag_id, run_id, "report")["result"] == {"total_letters": 18}
    events = wait_for_events(local_stack, dag_id, run_id, "PlaybookProcessed")
    finished = Counter(
        (e["task_id"], e["map_index"]) for e in events if e["name"] == "TaskFinished"
    )
    # No outcome task: `start` is a bare noop, which cannot fail, so no step routes a failure.
    assert finished == Counter(
        [("start", -1), ("measure.head", -1), ("measure.tail", -1), ("report", -1)]
        + [("measure.body", index) for index in range(4)]
    )
    assert Counter(names(events))["LoopIterationCompleted"] == 4
