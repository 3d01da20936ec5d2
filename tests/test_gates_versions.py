"""`noetlc gates` / `noetlc signal` find a deployment's waiting gates on each Airflow: a gate waits
in ``awaiting_input`` on 3.3 and ``deferred`` (to ``HITLTrigger``) on 3.1 and 3.2, where
``awaiting_input`` is not a task state at all (the API refuses the filter with 422); 3.0 has no
HITL endpoints. A server on 127.0.0.1 answers as each version's REST API does (the routes and
models of ``api_fastapi/core_api/routes/public/hitl.py`` of 3.1.8, 3.2.2 and 3.3.2): the version,
the paged list with its ``state`` and ``response_received`` filters, and the answer's PATCH."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from airflow_plugin.templating.ids import execution_id_for
from tests.test_gates_cli import noetlc

# The task states each version's API accepts in a ``state`` filter (TaskInstanceState).
_COMMON = {
    "removed", "scheduled", "queued", "running", "success", "restarting", "failed",
    "up_for_retry", "up_for_reschedule", "upstream_failed", "skipped", "deferred",
}  # fmt: skip
STATES = {"3.1.8": _COMMON, "3.2.2": _COMMON, "3.3.2": _COMMON | {"awaiting_input"}}
PARKED = {"3.1.8": "deferred", "3.2.2": "deferred", "3.3.2": "awaiting_input"}


def _detail(task: str, state: str, answered: bool) -> dict:
    return {
        "task_instance": {
            "dag_id": "pay", "dag_run_id": "noetl__r1", "task_id": task, "map_index": -1,
            "state": state,
        },
        "options": ["Approve", "Reject"], "subject": f"{task}?", "body": None,
        "defaults": None, "multiple": False, "params": {}, "assigned_users": [],
        "created_at": "2026-01-01T00:00:00+00:00", "responded_by_user": None,
        "responded_at": None, "chosen_options": None, "params_input": {},
        "response_received": answered,
    }  # fmt: skip


class FakeAirflow(ThreadingHTTPServer):
    def __init__(self, version: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.version = version
        parked = PARKED.get(version, "deferred")
        # The gate waiting, one answered earlier, and a deferred task that waits for a sensor
        # (no hitl_detail row, so never listed: only HITL tasks have one).
        self.details = [_detail("approve_pay", parked, False), _detail("first", "success", True)]
        self.patches: list[tuple[str, dict]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FakeAirflow

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(201, {"access_token": "t"})

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/api/v2/version":
            return self._send(200, {"version": self.server.version, "git_version": None})
        if self.server.version.startswith("3.0."):
            return self._send(404, {"detail": "Not Found"})
        if url.path == "/api/v2/dags/~/dagRuns/~/hitlDetails":
            states = query.get("state", [])
            if set(states) - STATES[self.server.version]:
                return self._send(422, {"detail": "Invalid value for state."})
            rows = [
                d
                for d in self.server.details
                if (not states or d["task_instance"]["state"] in states)
                and ("task_id" not in query or d["task_instance"]["task_id"] in query["task_id"])
                and (
                    "response_received" not in query
                    or str(d["response_received"]).lower() == query["response_received"][0]
                )
            ]
            return self._send(200, {"hitl_details": rows, "total_entries": len(rows)})
        return self._send(404, {"detail": "Not Found"})

    def do_PATCH(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.server.patches.append((urlsplit(self.path).path, body))
        self._send(200, {"chosen_options": body["chosen_options"], "params_input": {}})


@pytest.fixture
def airflow(request: pytest.FixtureRequest) -> Iterator[FakeAirflow]:
    server = FakeAirflow(request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _env(server: FakeAirflow) -> dict[str, str]:
    return {
        "NOETL_AIRFLOW_URL": server.url,
        "NOETL_AIRFLOW_USER": "a",
        "NOETL_AIRFLOW_PASSWORD": "b",
    }


@pytest.mark.parametrize("airflow", ["3.1.8", "3.2.2", "3.3.2"], indirect=True)
def test_the_waiting_gate_is_listed_and_answered(airflow: FakeAirflow) -> None:
    listed = noetlc("gates", "--json", env=_env(airflow))
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["gate"], r["state"]) for r in rows] == [("approve_pay", PARKED[airflow.version])]
    execution = str(execution_id_for("pay", "noetl__r1"))
    assert rows[0]["execution_id"] == execution
    signal = noetlc("signal", execution, "approve_pay", "--approve", env=_env(airflow))
    assert signal.returncode == 0, signal.stderr
    assert airflow.patches == [
        (
            "/api/v2/dags/pay/dagRuns/noetl__r1/taskInstances/approve_pay/-1/hitlDetails",
            {"chosen_options": ["Approve"], "params_input": {}},
        )
    ]


@pytest.mark.parametrize("airflow", ["3.0.6"], indirect=True)
def test_airflow_3_0_is_told_to_have_no_gates(airflow: FakeAirflow) -> None:
    for args in (["gates"], ["signal", "1", "approve_pay", "--approve"]):
        result = noetlc(*args, env=_env(airflow))
        assert result.returncode == 1
        assert result.stderr == (
            f"noetlc: error: Airflow 3.0.6 at {airflow.url} has no approve/input gates (they "
            "need Airflow 3.1 or later)\n"
        )
    assert airflow.patches == []
