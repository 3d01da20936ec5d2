"""The NoETL execution view as Airflow's API server serves it: the real API app
(``airflow.api_fastapi.app.create_app``) with our plugin loaded by its entry point, Airflow's
SimpleAuthManager with real users and tokens, and the events of a real ``dag.test()`` run."""

from __future__ import annotations

import io
import json
import textwrap
from argparse import Namespace
from html.parser import HTMLParser
from urllib.parse import unquote

import pytest

from airflow_plugin.events.cli import run_status
from airflow_plugin.templating.ids import execution_id_for
from noetl_compile.cli import main

PLAYBOOK = """
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: web_view, path: web/view, description: "Loop and a secret"}
    workload:
      db_password: ""
      cities: [Paris, Oslo, Cairo]
    workflow:
      - step: start
        tool:
          kind: python
          input: {copied: "{{ workload.db_password }}"}
          code: |
            result = {"copy": copied, "length": len(copied)}
        next: {arcs: [{step: measure}]}
      - step: measure
        loop: {in: "{{ cities }}", iterator: city, spec: {mode: sequential}}  # one instance, in order
        tool:
          kind: python
          input: {city: "{{ iter.city }}"}
          code: |
            result = {"city": city, "letters": len(city)}
"""
SECRET = "web-view-pw-8642-qq"
USERS = {"admin": "admin", "viewer": "viewer", "nobody": ""}  # nobody: a user with no role


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.events = 0
        self.links: list[str] = []
        self.numbers: list[str] = []  # the first cell of each event row
        self.texts: list[str] = []
        self._cell = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and attrs.get("class") == "event":
            self.events += 1
            self._cell = 0
        if tag == "td":
            self._cell += 1
        if tag == "a" and attrs.get("class") == "log":
            self.links.append(attrs["href"])
        if "id" in attrs:
            self.ids.append(attrs["id"])

    def handle_data(self, data):
        self.texts.append(data)
        if self._cell == 1 and len(self.numbers) < self.events:
            self.numbers.append(data)


@pytest.fixture(scope="module")
def passwords(tmp_path_factory):
    path = tmp_path_factory.mktemp("auth") / "passwords.json"
    path.write_text(json.dumps({name: f"pw-{name}-1" for name in USERS}))
    return path


@pytest.fixture
def api(monkeypatch, passwords, event_log):
    monkeypatch.setenv(
        "AIRFLOW__CORE__AUTH_MANAGER",
        "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
    )
    monkeypatch.setenv(
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS",
        ",".join(f"{name}:{role}" for name, role in USERS.items()),
    )
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(passwords))
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "web-view-test-jwt-secret-0123456789")
    monkeypatch.setenv("NOETL_EVENTS_URL", event_log.store.url)
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from fastapi.testclient import TestClient

    purge_cached_app()
    client = TestClient(create_app("core"))

    def token(user: str) -> dict[str, str]:
        response = client.post("/auth/token", json={"username": user, "password": f"pw-{user}-1"})
        assert response.status_code in (200, 201), response.text
        return {"Authorization": f"Bearer {response.json()['access_token']}"}

    yield client, token
    purge_cached_app()


@pytest.mark.parametrize("event_store", ["sqlite"], indirect=True)
def test_view_shows_the_run_to_readers_only_and_equals_noetlc_status(
    event_log, api, airflow_db, run_dag, tmp_path
):
    source = tmp_path / "web_view.yaml"
    source.write_text(textwrap.dedent(PLAYBOOK))
    assert main(["compile", str(source), "-o", str(tmp_path / "dags")]) == 0
    (dag_file,) = (tmp_path / "dags").glob("*.py")
    out = run_dag(dag_file.read_text(), "web.view", {"db_password": SECRET})
    assert out.state == "success", out.states
    assert out.xcom["start"]["result"]["length"] == len(SECRET)  # the secret was really used
    rows = event_log.rows(dag_id="web.view", run_id=out.run_id)
    client, token = api
    base = f"/noetl/runs/web.view/{out.run_id}"
    urls = [
        base,
        f"{base}/tasks/measure.body?map_index=0",
        f"/noetl/api/runs/web.view/{out.run_id}/events",
        f"/noetl/api/runs/web.view/{out.run_id}/state",
    ]

    for url in urls:
        anonymous = client.get(url, follow_redirects=False)
        if "/api/" in url:
            assert anonymous.status_code == 401, url  # the JSON API: no login page for a script
        else:
            # A page: Airflow's login page, which comes back here (not raw "Not authenticated").
            assert anonymous.status_code == 303, (url, anonymous.text)
            location = anonymous.headers["location"]
            assert location.startswith("/auth/login") and "next=" in location, location
            assert url.split("?")[0] in unquote(location), location
        assert client.get(url, headers=token("nobody")).status_code == 403, url
    viewer = token("viewer")
    responses = {url: client.get(url, headers=viewer) for url in urls}
    assert all(r.status_code == 200 for r in responses.values()), {
        u: r.text[:200] for u, r in responses.items()
    }
    for url, response in responses.items():
        assert SECRET not in response.text, url

    events = responses[urls[2]].json()
    assert events["execution_id"] == str(execution_id_for("web.view", out.run_id))
    assert [e["event_id"] for e in events["events"]] == [r["event_id"] for r in rows]

    state = responses[urls[3]].json()
    printed = io.StringIO()
    args = Namespace(execution=events["execution_id"], json=True, url=event_log.store.url)
    assert run_status(args, out=printed) == 0
    expected = json.loads(printed.getvalue())
    assert {k: v for k, v in state.items() if k != "gate_history"} == expected
    assert state["loops"]["measure"]["finished"] == 3 and state["status"] == "success"

    page = _Rows()
    page.feed(responses[urls[0]].text)
    assert page.events == len(rows)
    # Events are numbered by their place in the run, 1..N, the N the header counts.
    assert page.numbers == [str(n) for n in range(1, len(rows) + 1)]
    assert f"{len(rows)} events" in responses[urls[0]].text
    # A mapped instance is named as Airflow names it: by its item's label.
    # The timeline names the mapped instance as Airflow does (its items), not by its index.
    label = "measure.body (Paris .. Cairo (3 items)) log"
    assert label in page.texts and "measure.body[0]" not in page.texts
    assert {"timeline", "steps", "loops", "results"} <= set(page.ids)
    assert (
        f"/dags/web.view/runs/{out.run_id.replace(':', '%3A').replace('+', '%2B')}/tasks/start?try_number=1"
        in page.links
    )
    assert "Content-Security-Policy" in responses[urls[0]].headers
    task_page = _Rows()
    task_page.feed(responses[urls[1]].text)
    mapped = [r for r in rows if r.get("task_id") == "measure.body" and r.get("map_index") == 0]
    assert task_page.events == len(mapped) > 0
    place = {r["event_id"]: str(n) for n, r in enumerate(rows, 1)}
    assert task_page.numbers == [place[r["event_id"]] for r in mapped]  # the run's numbers
    assert all("/mapped/0" in link for link in task_page.links)
    # The UI leaves the placeholder in the tab's URL on an unmapped task's page.
    unmapped = client.get(f"{base}/tasks/start?map_index={{MAP_INDEX}}", headers=viewer)
    start_page = _Rows()
    start_page.feed(unmapped.text)
    assert unmapped.status_code == 200
    assert start_page.events == len([r for r in rows if r.get("task_id") == "start"]) > 0
    static = client.get("/noetl/static/noetl.js")
    assert static.status_code == 200 and "step-filter" in static.text


def test_loading_the_plugin_does_not_build_the_view():
    """Every task runner loads the plugin: the view (FastAPI, Airflow's API security) is built
    only when the API server reads ``fastapi_apps``."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from airflow_plugin.plugin import NoetlPlugin\n"
        "assert 'airflow_plugin.web.app' not in sys.modules, 'built at import'\n"
        "views = NoetlPlugin.external_views\n"
        "assert [v['destination'] for v in views] == ['dag_run', 'task_instance']\n"
        "assert 'airflow_plugin.web.app' not in sys.modules\n"
        "apps = NoetlPlugin.fastapi_apps\n"
        "assert apps[0]['url_prefix'] == '/noetl' and apps is NoetlPlugin.fastapi_apps\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]
