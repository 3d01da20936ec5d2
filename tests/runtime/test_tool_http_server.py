"""The ``http`` tool at volume (5 MB, pagination, flaky endpoints), the routes of the test HTTP
server the corpus playbooks read, the pooled client (one per process, keep-alive, a fresh one
after fork), and an http step with a retry policy in a real Airflow run."""

from __future__ import annotations

import base64
import os
import threading
import uuid
from typing import Any

import pytest

from airflow_plugin.hooks import http as http_hook
from airflow_plugin.hooks.http import shared_client
from airflow_plugin.tools.outcome import ToolOutcome
from tests.harness.http_server import (
    TOTAL_ITEMS,
)
from tests.runtime.http_support import call, echo

# -- volume, pagination, flakiness -----------------------------------------------------------------


def test_heavy_payload_of_5_mb(http_server):
    size = 5 * 1024 * 1024
    out = call({"url": f"{http_server}/api/v1/payload", "params": {"size": size}})
    assert out.ok
    assert out.data["data"]["size"] == size
    assert len(out.data["data"]["data"]) == size


def test_page_number_pagination_returns_35_items(http_server):
    items, page = [], 1
    while True:
        out = call(
            {"url": f"{http_server}/api/v1/assessments", "params": {"page": page, "pageSize": 10}}
        )
        body = out.data["data"]
        items += body["data"]
        if not body["paging"]["hasMore"]:
            break
        page = body["paging"]["page"] + 1
    assert page == 4
    assert [item["id"] for item in items] == list(range(1, TOTAL_ITEMS + 1))


def test_cursor_pagination_returns_35_items(http_server):
    events, cursor, calls = [], "", 0
    while True:
        # the first call sends an empty cursor, as the corpus playbook's ctx.cursor starts ""
        out = call(
            {"url": f"{http_server}/api/v1/events", "params": {"cursor": cursor, "limit": 10}}
        )
        calls += 1
        body = out.data["data"]
        events += body["events"]
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert calls == 4
    assert [event["id"] for event in events] == list(range(1, TOTAL_ITEMS + 1))


def test_offset_pagination_returns_35_items(http_server):
    users, offset = [], 0
    while True:
        out = call({"url": f"{http_server}/api/v1/users", "data": {"offset": offset, "limit": 10}})
        body = out.data["data"]
        users += body["users"]
        if not body["has_more"]:
            break
        offset = body["offset"] + body["limit"]
    assert len(users) == TOTAL_ITEMS == body["total"]
    assert len({user["id"] for user in users}) == TOTAL_ITEMS


def test_flaky_endpoint_fails_n_times_then_succeeds(http_server):
    config = {
        "url": f"{http_server}/api/v1/flaky",
        "params": {"page": 1, "fails": 2, "status": 503, "key": uuid.uuid4().hex},
    }
    first, second, third = call(config), call(config), call(config)
    assert [o.status for o in (first, second, third)] == ["error", "error", "ok"]
    assert first.error["code"] == "HTTP_503" and first.error["retryable"] is True
    assert third.data["data"]["attempt"] == 3
    assert len(third.data["data"]["data"]) == 10


def test_flaky_endpoint_keeps_noetl_fail_on_semantics(http_server):
    key = uuid.uuid4().hex
    url = f"{http_server}/api/v1/flaky"
    page1 = {"url": url, "params": {"page": 1, "fail_on": "1", "key": key}}
    page2 = {"url": url, "params": {"page": 2, "fail_on": "1", "key": key}}
    assert call(page1).error["code"] == "HTTP_500"  # first call of a listed page fails
    assert call(page1).ok
    assert call(page2).ok  # a page not listed never fails


# -- the routes the corpus playbooks read ---------------------------------------------------------


def _get(base: str, path: str, **params: Any) -> Any:
    out = call({"url": f"{base}{path}", "params": params})
    assert out.ok, out.error
    return out.data["data"]


@pytest.mark.parametrize(
    ("path", "params", "check"),
    [
        # pagination/pipeline*, loop_with_pagination: {data, paging.{hasMore, page}}
        (
            "/api/v1/heavy",
            {"page": 10, "pageSize": 10, "payload_kb": 1},
            lambda b: (
                len(b["data"]) == 10
                and len(b["data"][0]["payload"]) == 1024
                and b["paging"]["hasMore"] is False
            ),
        ),
        # pft_flow_test: output.data.data.paging.hasMore; demographics; MDS ids and details
        (
            "/api/v1/patient/assessments",
            {"patientId": "7", "pageSize": 3},
            lambda b: (
                len(b["data"]) == 3 and set(b["paging"]) == {"hasMore", "page", "pageSize", "total"}
            ),
        ),
        (
            "/api/v1/patient/vital_signs",
            {"patientId": "7"},
            lambda b: b["paging"]["hasMore"] is False,
        ),
        ("/api/v1/patient/demographics", {"patientId": "7"}, lambda b: b["patientId"] == "7"),
        (
            "/api/v1/mds/assessment_ids",
            {"patientId": "7"},
            lambda b: len(b["assessmentIds"]) == b["count"] >= 2,
        ),
        ("/api/v1/mds/assessment/MDS-7-001", {}, lambda b: len(b["sections"]) == 3),
        # fetch_load_test: output.data.meta.{page, totalPages}, entry list
        (
            "/api/v1/patient-records",
            {"patientId": "p1", "pageSize": 2, "min_delay": 0, "max_delay": 0, "payload_kb": 1},
            lambda b: (
                len(b["entry"]) == 2 and b["meta"]["page"] == 1 and b["meta"]["totalPages"] >= 2
            ),
        ),
        # data_transfer/*: JSONPlaceholder posts and users
        ("/posts", {}, lambda b: len(b) == 100 and {"userId", "id", "title", "body"} == set(b[0])),
        (
            "/users",
            {},
            lambda b: len(b) == 10 and b[0]["company"]["name"] and b[0]["address"]["city"],
        ),
        # seeds: spec_case_sink, spec_unified_retry, whitepaper_minimal, cursor_work_queue
        ("/users/1", {}, lambda b: b["id"] == 1 and "@" in b["email"]),
        (
            "/events",
            {"page": 4},
            lambda b: b["page"] == 4 and b["has_more"] is False and len(b["items"]) == 5,
        ),
        ("/status", {}, lambda b: b["status"] == "ok"),
        (
            "/patients/3/assessments",
            {"page": 1},
            lambda b: "has_more" in b and len(b["items"]) == 3,
        ),
        # examples/http_pagination_v2, v10_canonical_example; v2_http_test
        ("/data", {"page": 2}, lambda b: b["paging"]["page"] == 2 and len(b["items"]) == 10),
        ("/api/health", {}, lambda b: b == {"status": "ok"}),
        # httpbin-style: retry_test (test_url), simple_http_v2, batch_execution (/anything/...)
        ("/get", {"test": "hello"}, lambda b: b["args"] == {"test": "hello"}),
        ("/anything/heavy-item-detail", {}, lambda b: b["path"] == "/anything/heavy-item-detail"),
        # examples/weather (v1, base_url), weather_loop_v2: Open-Meteo's /v1/forecast fields
        (
            "/v1/forecast",
            {
                "latitude": 40.71,
                "longitude": -74.01,
                "hourly": "temperature_2m",
                "forecast_days": 1,
            },
            lambda b: (
                len(b["hourly"]["time"]) == len(b["hourly"]["temperature_2m"]) == 24
                and max(b["hourly"]["temperature_2m"]) == 22.8
                and b["hourly_units"]["temperature_2m"] == "°C"
            ),
        ),
        (
            "/forecast",
            {"latitude": 51.5, "longitude": 0, "current_weather": "true", "forecast_days": 2},
            lambda b: (
                set(b["current_weather"]) >= {"temperature", "windspeed", "time"}
                and "hourly" not in b
            ),
        ),
        # api_integration/github_metrics: GitHub's repository fields
        (
            "/repos/microsoft/vscode",
            {},
            lambda b: (
                b["full_name"] == "microsoft/vscode"
                and b["stargazers_count"] == 175000
                and b["forks_count"] == 34000
                and b["owner"]["login"] == "microsoft"
            ),
        ),
        # examples/variable_lifecycle_example: the record the playbook reads
        (
            "/example-api/users/2",
            {},
            lambda b: b["email"] == "user2@example.com" and b["status"] == "inactive",
        ),
    ],
)
def test_server_routes_serve_the_shapes_the_corpus_reads(http_server, path, params, check):
    assert check(_get(http_server, path, **params))


def test_new_api_shapes_refuse_what_the_real_apis_refuse(http_server):
    forecast = call({"url": f"{http_server}/v1/forecast", "params": {"latitude": 1}})
    assert not forecast.ok and forecast.error["code"] == "HTTP_400"
    unknown = call(
        {
            "url": f"{http_server}/v1/forecast",
            "params": {"latitude": 1, "longitude": 2, "hourly": "snow_depth_cm"},
        }
    )
    assert not unknown.ok and unknown.data["data"]["error"] is True
    repo = call({"url": f"{http_server}/repos/no/such-repo"})
    assert not repo.ok and repo.data["data"]["message"] == "Not Found"


def test_probes_overlap_and_are_counted(http_server):
    """pagination/basic and load_test/tooling_non_blocking assert max_active >= 2."""
    assert call({"method": "POST", "url": f"{http_server}/api/v1/concurrency/reset"}).ok
    outcomes: list[ToolOutcome] = []
    probe = {"url": f"{http_server}/api/v1/concurrency/probe", "params": {"delay_seconds": 0.3}}
    threads = [threading.Thread(target=lambda: outcomes.append(call(probe))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(o.ok for o in outcomes)
    stats = _get(http_server, "/api/v1/concurrency/stats")
    assert stats["started"] == stats["completed"] == 3
    assert stats["active"] == 0 and stats["max_active"] >= 2


def test_rate_limited_endpoint_answers_429_with_retry_after(http_server):
    config = {
        "url": f"{http_server}/api/v1/rate-limited",
        "params": {"requests_per_second": 1, "key": uuid.uuid4().hex},
    }
    assert call(config).ok
    limited = call(config)
    assert limited.error["code"] == "HTTP_429" and limited.error["retryable"] is True
    assert limited.error["retry_after"] >= 1


def test_httpbin_style_auth_endpoints(http_server):
    ok = call(
        {
            "url": f"{http_server}/basic-auth/ann/pw-1234",
            "headers": {"Authorization": "Basic " + base64.b64encode(b"ann:pw-1234").decode()},
        }
    )
    assert ok.data["data"] == {"authenticated": True, "user": "ann"}
    denied = call({"url": f"{http_server}/bearer"})
    assert denied.error["code"] == "HTTP_401"
    assert denied.data["headers"]["www-authenticate"].startswith("Bearer")


# -- the pooled client ---------------------------------------------------------------------------


def test_one_pooled_client_per_process_reused_across_calls(http_server):
    before = shared_client()
    first = echo(call({"url": f"{http_server}/echo"}))
    second = echo(call({"url": f"{http_server}/echo"}))
    assert shared_client() is before
    # keep-alive: the second request came over the same TCP connection
    assert first["client_port"] == second["client_port"]
    # TLS verification is a client setting in httpx, so ``verify: false`` has its own pool
    assert shared_client(False) is not before
    assert shared_client(False) is shared_client(False)


def test_concurrent_first_use_creates_one_client():
    http_hook.close_clients()
    barrier = threading.Barrier(8)
    seen: list[Any] = []

    def first_use() -> None:
        barrier.wait()
        seen.append(shared_client())

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and all(client is seen[0] for client in seen)
    assert not seen[0].is_closed


def test_a_forked_child_gets_its_own_client(http_server):
    parent = shared_client()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        ok = False
        try:
            child = shared_client()
            ok = child is not parent and call({"url": f"{http_server}/echo"}).ok
        finally:
            os.write(write_end, b"1" if ok else b"0")
            os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 1)
    os.close(read_end)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert shared_client() is parent


# -- in a real Airflow run ------------------------------------------------------------------------


def test_http_step_with_a_retry_policy_in_a_dag_run(http_server, run_dag):
    """retry_test/retry_simple_config in miniature: the flaky page fails once (500), the step's
    policy reads ``output.http.status`` and retries, the next step reads the response from the
    pipeline record NoETL leaves (``_prev`` and ``results.<step>_task``; no merge)."""
    fetch = {
        "step": "fetch",
        "dialect": "canonical",
        "tool": {
            "kind": "http",
            "method": "GET",
            "url": "{{ workload.api_url }}/api/v1/flaky",
            "params": {"page": 1, "fail_on": "1", "key": "{{ workload.key }}"},
            "spec": {
                "policy": {
                    "rules": [
                        {
                            "when": "{{ output.http.status in [500, 502, 503] }}",
                            "then": {"do": "retry", "attempts": 3, "delay": 0.01},
                        },
                        {"when": "{{ output.status == 'error' }}", "then": {"do": "fail"}},
                        {"else": {"then": {"do": "continue"}}},
                    ]
                }
            },
        },
    }
    use = {
        "step": "use",
        "dialect": "canonical",
        "input": {
            "status": "{{ fetch._prev.status_code }}",
            "ids": "{{ fetch._prev.data.data | map(attribute='id') | list }}",
            "attempt": "{{ fetch.results.fetch_task.data.attempt }}",
        },
        "tool": {"kind": "python", "code": "result = {'status': status, 'ids': ids, 'n': attempt}"},
    }
    params = {"api_url": http_server, "key": uuid.uuid4().hex}
    source = "\n".join(
        [
            "from airflow.sdk import DAG",
            "from airflow_plugin import NoetlStepOperator",
            "",
            f"with DAG(dag_id='noetl_http_retry', schedule=None, params={params!r}) as dag:",
            f"    fetch = NoetlStepOperator(task_id='fetch', payload={fetch!r}, reads={{}})",
            f"    use = NoetlStepOperator(task_id='use', payload={use!r}, "
            "reads={'results': {'fetch': 'fetch'}})",
            "    fetch >> use",
            "",
        ]
    )
    run = run_dag(source, "noetl_http_retry")
    assert run.states == {"fetch": "success", "use": "success"}
    assert run.xcom["fetch"]["result"]["status"] == "ok"
    assert run.xcom["fetch"]["result"]["_prev"]["status_code"] == 200
    assert run.xcom["use"]["result"] == {"status": 200, "ids": list(range(1, 11)), "n": 2}


def test_v1_retry_when_sees_status_code_of_a_failed_call(http_server):
    # NoETL's retry_test: retry conditions see status_code, error, success, data, attempt.
    from airflow_plugin.runtime.step import StepFailed, execute_step

    payload = {
        "step": "start",
        "dialect": "v1",
        "tool": {"kind": "http", "method": "GET", "url": f"{http_server}/status/503"},
        "retry": {
            "max_attempts": 3,
            "initial_delay": 0.01,
            "retry_when": "{{ status_code >= 500 and status_code < 600 }}",
        },
    }
    inputs = {"workload": {}, "results": {}, "ctx": {}, "vars": {}, "execution_id": 1}
    from airflow_plugin.events import MemoryRecorder, recording

    recorder = MemoryRecorder()
    with recording(recorder), pytest.raises(StepFailed, match="HTTP|503"):
        execute_step(payload, inputs, sleep=lambda s: None)
    assert len(recorder.named("ToolStarted")) == 3
    assert not recorder.named("TemplateWarning")  # the guard evaluated; nothing swallowed
