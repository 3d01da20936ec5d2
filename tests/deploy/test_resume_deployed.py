"""`noetlc resume` on a real deployment (LocalExecutor stack): a run whose middle step fails is
resumed after the fix; the step before it does not run again; events, `noetlc status` and the
REST client's paging against the real API server agree. The step that raised is a failed task
with the traceback in its log, though the canonical engine's plain `next` took the failure
(operators/failure_routes.py).

The run is triggered without a logical date (as every REST trigger here is), which is what
`airflow tasks clear -s/-e` cannot find and the clear by ``dag_run_id`` can. The NoETL view is
read in Debian's headless chromium (screenshot in ``$NOETLC_ARTIFACTS/ui``).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from argparse import Namespace
from pathlib import Path
from urllib.parse import quote

import pytest

from airflow_plugin.deploy.rest import AirflowClient
from airflow_plugin.events.cli import run_status
from airflow_plugin.templating.ids import execution_id_for
from tests.harness.browser import Browser

from .test_ui_deployed import ARTIFACTS

pytestmark = pytest.mark.slow

DAG = "tests.deploy_resume"


def ends(stack, run_id: str, count: int, timeout: float = 30.0) -> list[dict]:
    """The run's events once ``count`` WorkflowFinished are stored (the writer is asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = stack.run_events(DAG, run_id)
        if sum(r["name"] == "WorkflowFinished" for r in rows) >= count:
            return rows
        assert time.monotonic() < deadline, [(r["name"], r["status"]) for r in rows]
        time.sleep(0.3)


def task_log(client: AirflowClient, run_id: str, task_id: str, try_number: int) -> str:
    """A task instance's log as the REST API serves it (structured lines joined as JSON)."""
    path = f"dags/{DAG}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/logs/{try_number}"
    answer = client.request("GET", path, params={"full_content": True})
    if isinstance(answer, dict):
        return "\n".join(json.dumps(line) for line in answer.get("content") or [])
    return str(answer)


def test_resume_clears_the_failed_step_and_downstream_and_the_run_succeeds(local_stack, tmp_path):
    stack, client = local_stack, local_stack.client
    divisor = tmp_path / "divisor"
    run_id = client.trigger(DAG, conf={"divisor_file": str(divisor)})["dag_run_id"]
    run = client.wait_for_run(DAG, run_id, timeout=240)
    assert run["state"] == "failed" and run["logical_date"] is None
    execution = execution_id_for(DAG, run_id)
    ends(stack, run_id, 1)
    # The middle step that raised is red, its traceback in its task log; the step before it
    # succeeded, and the run's outcome task ends it failed as NoETL does.
    first = {ti["task_id"]: ti["state"] for ti in client.task_instances(DAG, run_id)}
    assert first["extract"] == "success" and first["transform"] == "failed", first
    assert first["noetl_outcome"] == "failed", first
    log = task_log(client, run_id, "transform", 1)
    assert "Traceback" in log and "ZeroDivisionError: integer division or modulo by zero" in log, (
        log[-3000:]
    )

    # The real API server pages: two task instances a page for a run of six.
    manifest = stack.manifest
    passwords = json.loads(Path(manifest["password_file"]).read_text())
    password = passwords[manifest["user"]]
    with AirflowClient(manifest["api_url"], manifest["user"], password, page_size=2) as small:
        paged = small.task_instances(DAG, run_id)
    assert len(paged) == 6
    assert sorted(ti["task_id"] for ti in paged) == sorted(
        ti["task_id"] for ti in client.task_instances(DAG, run_id)
    )

    divisor.write_text("2")
    env = {
        **os.environ,
        "NOETL_AIRFLOW_URL": manifest["api_url"],
        "NOETL_AIRFLOW_USER": manifest["user"],
        "NOETL_AIRFLOW_PASSWORD": password,
        "NOETL_EVENTS_URL": manifest["events_url"],
    }

    def noetlc(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "noetl_compile", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    dry = noetlc("resume", str(execution), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would clear" in dry.stdout and "extract" not in dry.stdout, dry.stdout
    assert client.get_run(DAG, run_id)["state"] == "failed"  # nothing cleared
    done = noetlc("resume", str(execution))
    assert done.returncode == 0, done.stderr
    assert "transform" in done.stdout and "extract" not in done.stdout, done.stdout

    run = client.wait_for_run(DAG, run_id, timeout=240, states={"success", "failed"})
    tries = {
        ti["task_id"]: (ti["state"], ti["try_number"]) for ti in client.task_instances(DAG, run_id)
    }
    assert run["state"] == "success", tries
    assert tries["extract"] == ("success", 1)  # not run again
    assert tries["transform"] == ("success", 2)
    assert client.xcom_return(DAG, run_id, "load")["result"] == {"loaded": 5}

    rows = ends(stack, run_id, 2)
    finished = [
        (r["status"], r["data"].get("run_attempt", 0))
        for r in rows
        if r["name"] == "WorkflowFinished"
    ]
    assert finished == [("error", 0), ("success", 1)]
    text = io.StringIO()
    status_args = Namespace(execution=str(execution), url=manifest["events_url"], json=False)
    assert run_status(status_args, text, io.StringIO()) == 0
    lines = text.getvalue()
    assert lines.splitlines()[0].split("  ")[2] == "success", lines
    assert "run attempt 1  error" in lines and "run attempt 2  success" in lines, lines
    assert "task transform try 2  success" in lines, lines

    # The NoETL view in a browser: the latest truth, with the failed attempt kept as history.
    with Browser() as browser:
        browser.set_cookie("_token", client.token(), manifest["api_url"] + "/")
        browser.goto(
            f"{manifest['api_url']}/noetl/runs/{quote(DAG, safe='')}/{quote(run_id, safe='')}"
        )
        browser.wait_for("!!document.getElementById('history')")
        browser.screenshot(ARTIFACTS / "resume_noetl_view.png")
        view = browser.evaluate(
            """(() => ({
              status: document.querySelector('#run-status').innerText.trim(),
              history: [...document.querySelectorAll('#history tbody tr')]
                .map(tr => [...tr.children].map(td => td.innerText.trim())),
            }))()"""
        )
    assert view["status"] == "success", view
    assert ["run", "attempt 1", "error", ""] in view["history"], view
    assert ["run", "attempt 2", "success", ""] in view["history"], view
    assert ["transform", "try 2", "success", ""] in view["history"], view
