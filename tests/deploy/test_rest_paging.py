"""``AirflowClient`` reads every row of a list, however the server caps its pages.

A local HTTP server on 127.0.0.1 speaks the contract of Airflow 3's list endpoints (``limit``
capped at ``maximum_page_limit`` = 100, ``offset``, ``total_entries``) for a run of 1,029 task
instances: one request for 1,000 rows got 100 of them, and the client said nothing. A server
that ignores ``offset`` (stops giving rows before the total it announced) is an error, never a
short list. The real API server's paging is exercised by test_resume_deployed.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from airflow_plugin.deploy.rest import AirflowApiError, AirflowClient

TOTAL = 1029
CAP = 100


class Api(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[int, int]]] = []
    cleared: ClassVar[list[dict]] = []

    def log_message(self, *args) -> None:  # quiet test output
        pass

    def _answer(self, body: dict, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/auth/token":
            self._answer({"access_token": "t"}, 201)
        elif self.path.endswith("/clearTaskInstances"):
            Api.cleared.append(body)
            self._answer({"task_instances": [{"task_id": t} for t in body["task_ids"]]})
        else:
            self._answer({"detail": "no such route"}, 404)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        limit = min(int(query.get("limit", ["50"])[0]), CAP)
        offset = int(query.get("offset", ["0"])[0])
        Api.seen.append((limit, offset))
        if url.path.endswith("/ignores-offset/taskInstances"):
            offset = 0 if offset < CAP else TOTAL  # gives one page, then nothing
        rows = [
            {"task_id": "measure.body", "map_index": i, "state": "success"}
            for i in range(offset, min(offset + limit, TOTAL))
        ]
        self._answer({"task_instances": rows, "total_entries": TOTAL})


@pytest.fixture
def api() -> Iterator[AirflowClient]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Api.seen, Api.cleared = [], []
    client = AirflowClient(f"http://127.0.0.1:{server.server_port}", "admin", "pw")
    yield client
    client.close()
    server.shutdown()
    server.server_close()


def test_task_instances_follow_total_entries_past_the_page_cap(api):
    rows = api.task_instances("loop", "noetl__r1")
    assert len(rows) == TOTAL
    assert [r["map_index"] for r in rows] == list(range(TOTAL))
    assert [offset for _, offset in Api.seen] == list(range(0, TOTAL, CAP))  # 11 pages


def test_a_server_that_stops_short_of_its_total_is_an_error(api):
    with pytest.raises(AirflowApiError, match="announced 1029 task_instances but stopped"):
        api.task_instances("loop", "ignores-offset")


def test_clear_names_the_run_not_dates(api):
    cleared = api.clear_task_instances("etl", "manual__no_logical_date", ["transform"])
    assert cleared == [{"task_id": "transform"}]
    (body,) = Api.cleared
    assert body["dag_run_id"] == "manual__no_logical_date"
    assert "start_date" not in body and "end_date" not in body
    assert body["include_downstream"] is True and body["only_failed"] is False
    assert body["dry_run"] is False and body["reset_dag_runs"] is True
