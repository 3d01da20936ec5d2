"""The Airflow UI of the LocalExecutor stack in Debian's headless chromium: compiled DAGs read
like hand-written ones, and the NoETL execution view sits on the run page, behind Airflow's auth.

One run each of ``examples.branching``, ``examples.loop_parallel`` and ``examples.gates`` (its
gates answered with ``noetlc signal``); the browser gets the admin's session cookie (the JWT the
UI's login sets, from ``POST /auth/token``) and reads the pages' DOM. Screenshots go to
``$NOETLC_ARTIFACTS/ui`` (default ``.artifacts/ui`` in the checkout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from airflow_plugin.templating.ids import execution_id_for
from tests.harness.browser import Browser, chromium_path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("NOETLC_ARTIFACTS", ROOT / ".artifacts")) / "ui"

pytestmark = pytest.mark.slow


def _token(manifest: dict[str, Any], user: str) -> str:
    passwords = json.loads(Path(manifest["password_file"]).read_text())
    answer = httpx.post(
        f"{manifest['api_url']}/auth/token",
        json={"username": user, "password": passwords[user]},
        timeout=30,
    )
    assert answer.status_code in (200, 201), answer.text
    return answer.json()["access_token"]


def _noetlc(manifest: dict[str, Any], *args: str) -> subprocess.CompletedProcess:
    passwords = json.loads(Path(manifest["password_file"]).read_text())
    env = {
        **os.environ,
        "NOETL_AIRFLOW_URL": manifest["api_url"],
        "NOETL_AIRFLOW_USER": manifest["user"],
        "NOETL_AIRFLOW_PASSWORD": passwords[manifest["user"]],
        "NOETL_EVENTS_URL": manifest["events_url"],
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


def _wait_state(client, dag_id: str, run_id: str, task_id: str, wanted: str, timeout=180.0):
    deadline = time.monotonic() + timeout
    while True:
        states = {t["task_id"]: t["state"] for t in client.task_instances(dag_id, run_id)}
        if states.get(task_id) == wanted:
            return
        assert states.get(task_id) not in ("failed", "upstream_failed"), states
        assert time.monotonic() < deadline, (task_id, wanted, states)
        time.sleep(0.5)


@pytest.fixture(scope="module")
def ui(local_stack):
    """Runs of the three examples, finished, and a browser logged in as the admin."""
    if chromium_path() is None:
        pytest.fail("chromium is not installed (scripts/test.sh installs it)")
    client, manifest = local_stack.client, local_stack.manifest
    runs = {
        dag: client.trigger(dag)["dag_run_id"]
        for dag in ("examples.branching", "examples.loop_parallel", "examples.gates")
    }
    gates = runs["examples.gates"]
    execution = str(execution_id_for("examples.gates", gates))
    _wait_state(client, "examples.gates", gates, "start", "awaiting_input")
    answered = _noetlc(manifest, "signal", execution, "start", "--value", "discount=0.2")
    assert answered.returncode == 0, answered.stderr
    _wait_state(client, "examples.gates", gates, "approve", "awaiting_input")
    approved = _noetlc(manifest, "signal", execution, "approve", "--approve")
    assert approved.returncode == 0, approved.stderr
    for dag, run in runs.items():
        assert client.wait_for_run(dag, run, timeout=240)["state"] == "success", dag
    browser = Browser()
    try:
        browser.set_cookie("_token", _token(manifest, "admin"), manifest["api_url"] + "/")
        yield {"stack": local_stack, "runs": runs, "browser": browser, "base": manifest["api_url"]}
    finally:
        browser.close()


def _graph(ui: dict[str, Any], dag_id: str) -> str:
    browser, base = ui["browser"], ui["base"]
    run = ui["runs"][dag_id]
    browser.goto(f"{base}/dags/{quote(dag_id)}/runs/{quote(run)}")
    browser.wait_for("!!document.querySelector('button[aria-label^=\"Show Graph\"]')")
    browser.evaluate("document.querySelector('button[aria-label^=\"Show Graph\"]').click()")
    browser.wait_for("!!document.querySelector('.react-flow__node')")
    return run


def _view(ui: dict[str, Any], dag_id: str, name: str) -> dict[str, Any]:
    """The NoETL tab of the run page (screenshot) and the view itself, read from its DOM."""
    browser, base = ui["browser"], ui["base"]
    run = ui["runs"][dag_id]
    browser.goto(f"{base}/dags/{quote(dag_id)}/runs/{quote(run)}/plugin/noetl-run")
    browser.wait_for("!!document.querySelector('iframe[title=\"NoETL\"]')")
    src = browser.evaluate("document.querySelector('iframe[title=\"NoETL\"]').src")
    assert src == f"{base}/noetl/runs/{quote(dag_id, safe='')}/{quote(run, safe='')}"
    # Airflow sandboxes the tab's iframe; where it allows same-origin, wait for the page inside
    # (else the document is opaque to this page: give it the time a render takes).
    sandbox = browser.evaluate("document.querySelector('iframe[title=\"NoETL\"]').sandbox.value")
    if "allow-same-origin" in sandbox:
        browser.wait_for(
            "!!document.querySelector('iframe[title=\"NoETL\"]').contentDocument"
            ".getElementById('timeline')"
        )
    else:
        time.sleep(3)
    browser.screenshot(ARTIFACTS / f"{name}_noetl_tab.png")
    browser.goto(src)
    browser.wait_for("!!document.getElementById('timeline')")
    browser.screenshot(ARTIFACTS / f"{name}_noetl_view.png")
    return browser.evaluate(
        """(() => {
          const rows = id => [...document.querySelectorAll('#' + id + ' tbody tr')]
            .map(tr => [...tr.children].map(td => td.innerText.trim()));
          return {
            status: document.querySelector('#run-status').innerText.trim(),
            header: document.querySelector('header').innerText,
            timeline: rows('timeline'),
            steps: rows('steps'),
            loops: rows('loops'),
            gates: rows('gates'),
            links: [...document.querySelectorAll('a.log')].map(a => a.getAttribute('href')),
          };
        })()"""
    )


def _status(ui: dict[str, Any], dag_id: str) -> dict[str, Any]:
    manifest = ui["stack"].manifest
    execution = str(execution_id_for(dag_id, ui["runs"][dag_id]))
    done = _noetlc(manifest, "status", execution, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _events(ui: dict[str, Any], dag_id: str) -> list[dict[str, Any]]:
    return ui["stack"].run_events(dag_id, ui["runs"][dag_id])


def _assert_view_matches_the_event_log(ui, dag_id: str, view: dict[str, Any]) -> None:
    status = _status(ui, dag_id)
    events = _events(ui, dag_id)
    assert view["status"] == status["status"] == "success"
    assert [row[2] for row in view["timeline"]] == [e["name"] for e in events]
    # Numbered by their place in the run, 1..N: the N the header counts (the log's seq has gaps).
    assert [row[0] for row in view["timeline"]] == [str(n) for n in range(1, len(events) + 1)]
    assert f"{len(events)} events" in view["header"]
    steps = {row[0]: (row[1], int(row[2])) for row in view["steps"]}
    assert steps == {s: (e["status"], e["runs"]) for s, e in status["steps"].items()}
    run = quote(ui["runs"][dag_id], safe="")
    assert view["links"] and all(
        link.startswith(f"/dags/{quote(dag_id, safe='')}/runs/{run}/tasks/")
        for link in view["links"]
    )


def test_branching_shows_tool_kinds_edge_labels_and_its_noetl_view(ui):
    browser = ui["browser"]
    _graph(ui, "examples.branching")
    browser.wait_for("document.body.innerText.includes('start.large')")
    text = browser.text()
    browser.screenshot(ARTIFACTS / "branching_graph.png")
    for node in ("start (python)", "large_order (python)", "summary (python)"):
        assert node in text, node
    assert "NoETL python" in text  # the operator line of each node
    for label in ("start.large", "else", "amount > 200", "region == 'us'"):
        assert label in text, label
    view = _view(ui, "examples.branching", "branching")
    _assert_view_matches_the_event_log(ui, "examples.branching", view)


def test_loop_instances_are_named_by_their_city(ui):
    browser, base = ui["browser"], ui["base"]
    run = ui["runs"]["examples.loop_parallel"]
    _graph(ui, "examples.loop_parallel")
    browser.wait_for("document.body.innerText.includes('loop.done')")
    browser.screenshot(ARTIFACTS / "loop_parallel_graph.png")
    text = browser.text()
    assert "start (noop)" in text and "report (python)" in text and "NoETL noop" in text
    browser.goto(f"{base}/dags/examples.loop_parallel/runs/{quote(run)}/tasks/measure.body/mapped")
    browser.wait_for("document.body.innerText.includes('Lima')")
    browser.screenshot(ARTIFACTS / "loop_parallel_mapped.png")
    text = browser.text()
    for city in ("Paris", "Oslo", "Cairo", "Lima"):
        assert city in text, city
    mapped = ui["stack"].client.request(
        "GET", f"dags/examples.loop_parallel/dagRuns/{run}/taskInstances/measure.body/listMapped"
    )
    assert sorted(t["rendered_map_index"] for t in mapped["task_instances"]) == sorted(
        ["Paris", "Oslo", "Cairo", "Lima"]
    )
    view = _view(ui, "examples.loop_parallel", "loop_parallel")
    _assert_view_matches_the_event_log(ui, "examples.loop_parallel", view)
    assert view["loops"] == [["measure", "4/4", "0", "done"]]
    # The timeline names each mapped instance as Airflow does, by its city.
    named = {row[8] for row in view["timeline"] if row[8].startswith("measure.body")}
    assert {f"measure.body ({city}) log" for city in ("Paris", "Oslo", "Cairo", "Lima")} <= named


def test_gates_view_shows_each_gate_with_its_answer(ui):
    browser = ui["browser"]
    _graph(ui, "examples.gates")
    browser.wait_for("document.body.innerText.includes('approve.approved')")
    browser.screenshot(ARTIFACTS / "gates_graph.png")
    text = browser.text()
    assert "approve (gate: approve)" in text and "start (gate: input)" in text
    view = _view(ui, "examples.gates", "gates")
    _assert_view_matches_the_event_log(ui, "examples.gates", view)
    gates = {row[0]: row for row in view["gates"]}
    assert set(gates) == {"start", "cool_down", "approve"}
    assert all(row[3].startswith("answered") for row in gates.values())
    assert '"discount": 0.2' in gates["start"][4]
    assert '"choice": "approve"' in gates["approve"][4]


def test_the_view_refuses_anonymous_and_users_who_may_not_read_the_dag(ui):
    manifest = ui["stack"].manifest
    base = manifest["api_url"]
    run = ui["runs"]["examples.branching"]
    urls = [
        f"{base}/noetl/runs/examples.branching/{run}",
        f"{base}/noetl/runs/examples.branching/{run}/tasks/start",
        f"{base}/noetl/api/runs/examples.branching/{run}/events",
        f"{base}/noetl/api/runs/examples.branching/{run}/state",
    ]
    outsider = {"Authorization": f"Bearer {_token(manifest, 'outsider')}"}
    viewer = {"Authorization": f"Bearer {_token(manifest, 'viewer')}"}
    with httpx.Client(timeout=30) as http:
        for url in urls:
            anonymous = http.get(url)
            if "/noetl/api/" in url:
                assert anonymous.status_code == 401, url
            else:  # a page: to Airflow's login page, which comes back to it
                assert anonymous.status_code == 303, (url, anonymous.text)
                assert "/auth/login" in anonymous.headers["location"], anonymous.headers
            assert http.get(url, headers=outsider).status_code == 403, url
            forged = http.get(url, cookies={"_token": "not-a-jwt"}).status_code
            assert forged in (401, 403) if "/noetl/api/" in url else forged in (303, 403), url
            assert http.get(url, headers=viewer).status_code == 200, url
        state = http.get(urls[3], headers=viewer).json()
    # In a browser with no session: the login page, not {"detail":"Not authenticated"}.
    with Browser() as anonymous:
        anonymous.goto(urls[0])
        anonymous.wait_for("location.pathname.startsWith('/auth/login')")
        anonymous.screenshot(ARTIFACTS / "noetl_view_anonymous.png")
        assert "Not authenticated" not in anonymous.text()
    status = _status(ui, "examples.branching")
    assert {k: v for k, v in state.items() if k != "gate_history"} == status
