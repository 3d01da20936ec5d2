"""Gates on a real deployment: `scripts/airflow-stack.sh up` (Postgres, api-server, scheduler,
dag-processor, triggerer, LocalExecutor), runs triggered through the REST API, answered with
`noetlc signal` and listed with `noetlc gates` as a user would, in subprocesses.

What it shows: the input gate waits in ``awaiting_input`` and `noetlc gates` lists it; a typed
``--value`` resumes it; the sleep gate waits in ``deferred`` (its worker slot is free: the
triggerer holds the wait); an approval routes to ``charge`` with the price computed from the
answer, a rejection to ``cancel``; the deployment's event log (Postgres) has ``PlaybookPaused``
and ``SignalReceived``; the CLI's refusals are one line.

The stack and its REST client come from the deployment work (``airflow_plugin/deploy/stack.py``,
``rest.py``, ``scripts/airflow-stack.sh``). A stack that cannot start fails these tests; they are
never skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STACK_SCRIPT = ROOT / "scripts" / "airflow-stack.sh"
DAG_ID = "tests.gates_deferred"


@pytest.fixture(scope="module")
def stack(local_stack):
    """The run's LocalExecutor stack (tests/deploy/conftest.py); its DAG folder holds
    tests/deploy/playbooks: gates_deferred (examples.gates with a 20 s cool-down, so the sleep
    is deferred to the triggerer) and gate_assigned."""
    return {
        "client": local_stack.client,
        "manifest": local_stack.manifest,
        "state": local_stack.state,
    }


def noetlc(stack: dict[str, Any], *args: str) -> subprocess.CompletedProcess:
    manifest = stack["manifest"]
    passwords = json.loads(Path(manifest["password_file"]).read_text())
    env = {
        **os.environ,
        "NOETL_AIRFLOW_URL": manifest["api_url"],
        "NOETL_AIRFLOW_USER": manifest["user"],
        "NOETL_AIRFLOW_PASSWORD": passwords[manifest["user"]],
        "NOETL_EVENTS_URL": stack["manifest"]["events_url"],
    }
    return subprocess.run(
        [sys.executable, "-m", "noetl_compile", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def states(client: Any, run_id: str) -> dict[str, str | None]:
    return {ti["task_id"]: ti["state"] for ti in client.task_instances(DAG_ID, run_id)}


def wait_for(client: Any, run_id: str, task_id: str, wanted: str, timeout: float = 120.0):
    """Poll until ``task_id`` is in state ``wanted``; returns every state seen of it."""
    seen: list[str | None] = []
    deadline = time.monotonic() + timeout
    while True:
        everything = states(client, run_id)
        state = everything.get(task_id)
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == wanted:
            return seen
        assert state not in ("failed", "upstream_failed"), (
            task_id,
            seen,
            everything,
            logs(client, run_id, everything),
        )
        assert time.monotonic() < deadline, f"{task_id} never {wanted}: {seen}"
        time.sleep(0.3)


def logs(client: Any, run_id: str, everything: dict[str, Any]) -> dict[str, str]:
    """The last lines of the failed tasks' logs, for a failure message."""
    found = {}
    for task_id, state in everything.items():
        if state == "failed":
            path = f"dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/logs/1"
            try:
                answer = client.request("GET", path, params={"full_content": True})
            except Exception as exc:  # noqa: BLE001 - a diagnostic must not hide the failure
                answer = str(exc)
            if isinstance(answer, dict):
                answer = "\n".join(
                    str(line.get("event", line)) if isinstance(line, dict) else str(line)
                    for line in answer.get("content") or []
                )
            found[task_id] = str(answer)[-3000:]
    return found


def execution_of(run_id: str) -> str:
    from airflow_plugin.templating.ids import execution_id_for

    return str(execution_id_for(DAG_ID, run_id))


def test_input_sleep_approve_on_the_stack(stack):
    client = stack["client"]
    run_id = client.trigger(DAG_ID)["dag_run_id"]
    execution = execution_of(run_id)
    wait_for(client, run_id, "start", "awaiting_input")

    listed = noetlc(stack, "gates", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    mine = [r for r in rows if r["execution_id"] == execution]
    assert [(r["gate"], r["subject"], r["state"]) for r in mine] == [
        ("start", "Discount for an order of 1200?", "awaiting_input")
    ]
    assert mine[0]["timeout"] == "1d" and mine[0]["timeout_at"]  # from PlaybookPaused
    text = noetlc(stack, "gates")
    assert f"{execution}  start  (input)" in text.stdout
    assert f"noetlc signal {execution} start --value discount=..." in text.stdout

    answered = noetlc(stack, "signal", execution, "start", "--value", "discount=0.2")
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.startswith(f"answered gate start of execution {execution}")

    # The sleep gate waits in the triggerer: deferred, no worker slot held.
    seen = wait_for(client, run_id, "cool_down", "success")
    assert "deferred" in seen, seen
    wait_for(client, run_id, "approve", "awaiting_input")
    approved = noetlc(stack, "signal", execution, "approve", "--approve")
    assert approved.returncode == 0, approved.stderr
    assert client.wait_for_run(DAG_ID, run_id, timeout=120)["state"] == "success"
    assert states(client, run_id)["cancel"] == "skipped"

    result = {t: client.xcom_return(DAG_ID, run_id, t)["result"] for t in ("start", "price")}
    assert result["start"]["values"] == {"discount": 0.2}
    assert result["start"]["responded_by"] == stack["manifest"]["user"]
    assert result["price"] == {"price": 960.0}
    assert client.xcom_return(DAG_ID, run_id, "charge")["result"] == {"charged": 960.0}
    approve = client.xcom_return(DAG_ID, run_id, "approve")["result"]
    assert approve["approved"] is True and approve["timed_out"] is False
    slept = client.xcom_return(DAG_ID, run_id, "cool_down")["result"]
    assert set(slept) == {"slept_until"} and slept["slept_until"]

    again = noetlc(stack, "signal", execution, "approve", "--reject")
    assert again.returncode == 1
    assert again.stderr.startswith(
        f"noetlc: error: gate 'approve' of execution {execution} was already answered by "
    )
    assert again.stderr.count("\n") == 1

    from airflow_plugin.events.store import EventStore

    store = EventStore(stack["manifest"]["events_url"])
    try:
        rows = store.events(int(execution), names=["PlaybookPaused", "SignalReceived"])
    finally:
        store.dispose()
    assert [(e["name"], e["entity_id"]) for e in rows] == [
        ("PlaybookPaused", "start"),
        ("SignalReceived", "start"),
        ("PlaybookPaused", "cool_down"),
        ("SignalReceived", "cool_down"),
        ("PlaybookPaused", "approve"),
        ("SignalReceived", "approve"),
    ]
    assert rows[1]["data"]["values"] == {"discount": 0.2}
    assert rows[5]["data"]["choice"] == "approve"


def test_reject_routes_to_cancel_on_the_stack(stack):
    client = stack["client"]
    run_id = client.trigger(DAG_ID)["dag_run_id"]
    execution = execution_of(run_id)
    wait_for(client, run_id, "start", "awaiting_input")
    # Named by DAG run instead of execution; the value as one JSON object.
    answered = noetlc(
        stack, "signal", "start", "--dag", DAG_ID, "--run", run_id, "--value", '{"discount": 0.1}'
    )
    assert answered.returncode == 0, answered.stderr
    wait_for(client, run_id, "approve", "awaiting_input")

    wrong = noetlc(stack, "signal", execution, "approve", "--value", "x=1")
    assert wrong.returncode == 1
    assert wrong.stderr == (
        f"noetlc: error: gate 'approve' of execution {execution} is an approve gate: "
        "answer it with --approve or --reject\n"
    )
    missing = noetlc(stack, "signal", execution, "nope", "--approve")
    assert missing.returncode == 1
    assert missing.stderr == (
        f"noetlc: error: no gate 'nope' in execution {execution}; waiting there: approve\n"
    )

    rejected = noetlc(stack, "signal", execution, "approve", "--reject")
    assert rejected.returncode == 0, rejected.stderr
    assert client.wait_for_run(DAG_ID, run_id, timeout=120)["state"] == "success"
    final = states(client, run_id)
    assert final["charge"] == "skipped" and final["cancel"] == "success"
    assert client.xcom_return(DAG_ID, run_id, "price")["result"] == {"price": 1080.0}
    assert client.xcom_return(DAG_ID, run_id, "cancel")["result"] == {"charged": 0}
    assert client.xcom_return(DAG_ID, run_id, "approve")["result"]["choice"] == "reject"


def test_only_an_assignee_may_answer(stack):
    client = stack["client"]
    dag_id = "tests.gate_assigned"
    run_id = client.trigger(dag_id)["dag_run_id"]
    deadline = time.monotonic() + 120
    while client.task_instance(dag_id, run_id, "start")["state"] != "awaiting_input":
        assert time.monotonic() < deadline, "the assigned gate never waited"
        time.sleep(0.3)
    from airflow_plugin.templating.ids import execution_id_for

    execution = str(execution_id_for(dag_id, run_id))
    listed = noetlc(stack, "gates")
    assert f"{execution}  start  (approve)" in listed.stdout
    assert "    Only Ann may approve\n    for: ann; timeout: 1h (at " in listed.stdout
    refused = noetlc(stack, "signal", execution, "start", "--approve")
    assert refused.returncode == 1
    user = stack["manifest"]["user"]
    assert refused.stderr == (
        f"noetlc: error: gate 'start' of execution {execution} may be answered only by ann: "
        f"403 User={user} (id={user}) is not a respondent for the task.\n"
    )
    assert client.task_instance(dag_id, run_id, "start")["state"] == "awaiting_input"


def test_input_timeout_falls_back_to_its_default_on_the_stack(stack):
    client = stack["client"]
    dag_id = "tests.gate_timeout"
    client.wait_for_dag(dag_id)
    run_id = client.trigger(dag_id)["dag_run_id"]
    # Nobody answers: the scheduler's timeout sweep applies the params' defaults.
    run = client.wait_for_run(dag_id, run_id, timeout=180)
    assert run["state"] == "success", client.task_instances(dag_id, run_id)
    start = client.xcom_return(dag_id, run_id, "start")["result"]
    assert start["values"] == {"discount": 0.25} and start["timed_out"] is True
    assert client.xcom_return(dag_id, run_id, "price")["result"] == {"price": 75.0}
