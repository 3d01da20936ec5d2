"""The ``http`` tool against a real HTTP server on 127.0.0.1 (``tests/harness/http_server.py``).

What is pinned here: NoETL's routing of ``params`` / ``data`` / ``payload`` by method and
Content-Type, the step input as overrides, the result and error shapes the runtime and policies
read (``output.http.status``, ``output.error.retryable``), transport errors. Connection
auth is in test_tool_http_auth.py; volume, pagination, the test server's routes, the pooled client
and a run under Airflow in test_tool_http_server.py.
"""

from __future__ import annotations

import json
import socket
import uuid

import pytest

from airflow_plugin.hooks import http as http_hook
from airflow_plugin.tools.http import build_request, run_http
from airflow_plugin.tools.outcome import ToolCall
from airflow_plugin.tools.registry import get_tool
from tests.runtime.http_support import call, echo

# -- request building: methods, params, headers, bodies ------------------------------------------


def test_registry_resolves_http_to_run_http():
    assert get_tool("http") is run_http


def test_get_with_params_and_headers(http_server):
    out = call(
        {
            "url": f"{http_server}/echo/items",
            "params": {"page": 2, "flag": True, "tags": ["a", "b"], "empty": None},
            "headers": {"X-Trace": "t-1", "X-Count": 3, "X-Dropped": None},
        }
    )
    seen = echo(out)
    assert seen["method"] == "GET"
    assert seen["path"] == "/echo/items"
    assert seen["query"] == {"page": "2", "flag": "true", "tags": ["a", "b"], "empty": ""}
    assert seen["headers"]["x-trace"] == "t-1"
    assert seen["headers"]["x-count"] == "3"
    assert "x-dropped" not in seen["headers"]
    assert seen["body"] is None


def test_endpoint_is_an_alias_of_url_and_wins(http_server):
    out = call({"endpoint": f"{http_server}/echo/endpoint", "url": f"{http_server}/echo/url"})
    assert echo(out)["path"] == "/echo/endpoint"


@pytest.mark.parametrize(
    ("config", "query", "body"),
    [
        # data is auto-routed: query string for GET/DELETE/HEAD-like methods...
        ({"method": "GET", "data": {"a": 1, "b": "x"}}, {"a": "1", "b": "x"}, None),
        ({"method": "DELETE", "data": {"id": 7}}, {"id": "7"}, None),
        # ...JSON body for the others
        (
            {"method": "POST", "data": {"a": 1, "nested": {"b": [1, 2]}}},
            {},
            {"a": 1, "nested": {"b": [1, 2]}},
        ),
        ({"method": "PATCH", "data": {"a": 1}}, {}, {"a": 1}),
        # data.query / data.body name the halves explicitly, whatever the method
        ({"method": "PUT", "data": {"query": {"q": 1}, "body": {"b": 2}}}, {"q": "1"}, {"b": 2}),
        ({"method": "GET", "data": {"query": {"q": 1}, "body": {"b": 2}}}, {"q": "1"}, {"b": 2}),
        # params and a data query merge (data wins on a clash)
        (
            {"method": "GET", "params": {"p": 1, "q": 0}, "data": {"q": 2}},
            {"p": "1", "q": "2"},
            None,
        ),
        # params of a POST are sent too (NoETL drops them)
        ({"method": "POST", "params": {"p": 1}, "payload": {"x": 1}}, {"p": "1"}, {"x": 1}),
        # payload | body | json are the same key, payload first
        ({"method": "POST", "body": {"via": "body"}}, {}, {"via": "body"}),
        ({"method": "POST", "json": {"via": "json"}}, {}, {"via": "json"}),
        (
            {"method": "POST", "payload": {"via": "payload"}, "body": {"via": "body"}},
            {},
            {"via": "payload"},
        ),
        ({"method": "POST", "payload": [1, 2, 3]}, {}, [1, 2, 3]),
        # a data mapping wins over payload; a data query alone leaves the body to payload
        ({"method": "POST", "data": {"d": 1}, "payload": {"p": 1}}, {}, {"d": 1}),
        (
            {"method": "POST", "data": {"query": {"q": 1}}, "payload": {"p": 1}},
            {"q": "1"},
            {"p": 1},
        ),
        # an explicit body on a GET is sent, not dropped
        ({"method": "GET", "payload": {"p": 1}}, {}, {"p": 1}),
        # lower-case method names work
        ({"method": "post", "payload": {"p": 1}}, {}, {"p": 1}),
    ],
)
def test_data_routing_by_method(http_server, config, query, body):
    seen = echo(call({"url": f"{http_server}/echo", **config}))
    assert seen["method"] == config["method"].upper()
    assert seen["query"] == query
    assert seen["body"] == body
    if body is not None:
        assert seen["content_type"] == "application/json"


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
def test_a_body_method_without_a_body_sends_json_braces_on_the_python_engines(http_server, method):
    """NoETL's Python http tools send their default payload `{}` as JSON (profile
    `http_empty_body`; recorded: cases/dsl_keys/http_body_absent)."""
    seen = echo(call({"method": method, "url": f"{http_server}/echo"}))
    assert (seen["data"], seen["content_type"]) == ("{}", "application/json")


def test_post_without_a_body_sends_none_on_noetl5(http_server):
    from noetl_compile.engine_profiles import profile_of

    config = {"method": "POST", "url": f"{http_server}/echo"}
    out = run_http(ToolCall(step="s", task="t", config=config, profile=profile_of("noetl5")))
    seen = out.data["data"] if "data" in out.data else out.data["body"]
    assert seen["data"] == ""
    assert seen["headers"].get("content-length") == "0"
    assert seen["content_type"] is None
    # A GET never gets a body.
    assert echo(call({"method": "GET", "url": f"{http_server}/echo"}))["data"] == ""


def test_string_payload_is_sent_raw(http_server):
    text = '{"already": "json text"}'
    seen = echo(
        call(
            {
                "method": "POST",
                "url": f"{http_server}/echo",
                "headers": {"Content-Type": "application/json"},
                "payload": text,
            }
        )
    )
    assert seen["data"] == text
    assert seen["json"] == {"already": "json text"}


def test_form_urlencoded_by_content_type(http_server):
    seen = echo(
        call(
            {
                "method": "POST",
                "url": f"{http_server}/echo",
                "headers": {"content-type": "application/x-www-form-urlencoded"},
                "payload": {"grant_type": "client_credentials", "scope": ["a", "b"], "n": 1},
            }
        )
    )
    assert seen["form"] == {"grant_type": "client_credentials", "scope": ["a", "b"], "n": "1"}
    assert seen["content_type"] == "application/x-www-form-urlencoded"


def test_multipart_by_content_type_with_fields_and_a_file(http_server):
    seen = echo(
        call(
            {
                "method": "POST",
                "url": f"{http_server}/echo",
                # no boundary: the tool must let httpx write its own Content-Type
                "headers": {"Content-Type": "multipart/form-data"},
                "data": {
                    "title": "report",
                    "count": 2,
                    "file": {
                        "filename": "r.csv",
                        "content": "a,b\n1,2\n",
                        "content_type": "text/csv",
                    },
                },
            }
        )
    )
    assert seen["content_type"].startswith("multipart/form-data; boundary=")
    assert seen["form"] == {"title": "report", "count": "2"}
    assert seen["files"]["file"] == {
        "filename": "r.csv",
        "content_type": "text/csv",
        "size": 8,
        "content": "a,b\n1,2\n",
    }


def test_step_input_overrides_the_tool_like_noetl(http_server):
    config = {
        "method": "POST",
        "url": f"{http_server}/echo/from-tool",
        "params": {"keep": 1, "page": 1},
        "headers": {"X-Tool": "tool", "x-shared": "tool"},
        "payload": {"a": 1, "b": 1},
        "timeout": 0.01,  # the step input's timeout replaces it, or this call would time out
    }
    step_input = {
        "url": f"{http_server}/echo/from-input",
        "params": {"page": 2},
        "headers": {"X-Shared": "input"},
        "payload": {"b": 2},
        "timeout": 10,
        "page_size": 99,  # not an http key: ignored, as in NoETL
    }
    seen = echo(call(config, step_input))
    assert seen["path"] == "/echo/from-input"
    assert seen["query"] == {"keep": "1", "page": "2"}
    assert seen["headers"]["x-tool"] == "tool"
    assert seen["headers"]["x-shared"] == "input"
    assert seen["body"] == {"a": 1, "b": 2}
    assert "page_size" not in json.dumps(seen)


def test_step_input_data_merges_into_tool_data(http_server):
    seen = echo(
        call({"url": f"{http_server}/echo", "data": {"a": 1, "b": 1}}, {"data": {"b": 2, "c": 3}})
    )
    assert seen["query"] == {"a": "1", "b": "2", "c": "3"}


def test_build_request_is_pure_and_reports_its_decisions():
    request = build_request(
        {"method": "patch", "url": "/relative", "params": "x=1&x=2", "timeout": {"connect": 2}}
    )
    assert request.method == "PATCH"
    assert request.url == "/relative"
    assert request.params == {"x": ["1", "2"]}
    assert request.timeout.connect == 2
    assert request.timeout.read == http_hook.DEFAULT_TIMEOUT_SECONDS
    assert request.follow_redirects is False and request.verify is True


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "needs `url`"),
        ({"url": "http://127.0.0.1:1/x", "method": "GE T"}, "`method` must be"),
        ({"url": "http://127.0.0.1:1/x", "headers": ["a"]}, "`headers` must be a mapping"),
        ({"url": "http://127.0.0.1:1/x", "params": 5}, "`params` must be a mapping"),
        ({"url": "http://127.0.0.1:1/x", "timeout": "soon"}, "`timeout` must be a number"),
        ({"url": "http://127.0.0.1:1/x", "timeout": 0}, "must be a positive number"),
        ({"url": "http://127.0.0.1:1/x", "follow_redirects": "sometimes"}, "true or false"),
        ({"url": "/no/host"}, "is not absolute and no `auth` connection"),
        ({"url": "http://127.0.0.1:1/x", "auth": {"type": "bearer"}}, "must name an Airflow"),
        (
            {
                "url": "http://127.0.0.1:1/x",
                "method": "POST",
                "headers": {"Content-Type": "application/x-www-form-urlencoded"},
                "payload": [1, 2],
            },
            "form-urlencoded http body must be a mapping",
        ),
    ],
)
def test_config_errors_are_failures_not_raises(config, message):
    out = call(config)
    assert out.status == "error"
    assert out.error["type"] == "ConfigError"
    assert out.error["kind"] == "http"
    assert out.error["retryable"] is False
    assert message in out.error["message"]
    assert out.meta["http"] == {"status": None, "headers": {}}


# -- responses: result shape, JSON vs text -------------------------------------------------------


def test_success_result_shape_and_meta(http_server):
    out = call({"url": f"{http_server}/api/v1/assessments", "params": {"page": 1, "pageSize": 2}})
    assert out.ok
    assert set(out.data) == {"status_code", "headers", "url", "elapsed", "data"}
    assert out.data["status_code"] == 200
    assert out.data["url"] == f"{http_server}/api/v1/assessments?page=1&pageSize=2"
    assert isinstance(out.data["elapsed"], float) and out.data["elapsed"] >= 0
    assert out.data["headers"]["content-type"] == "application/json"  # lower-case names
    assert out.data["data"]["paging"] == {"hasMore": True, "page": 1, "pageSize": 2, "total": 35}
    assert out.meta["http"]["status"] == 200
    assert out.meta["http"]["headers"] == out.data["headers"]
    assert isinstance(out.meta["duration_ms"], int)
    json.dumps(out.data)  # plain data: fit for XCom


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("application/json", '{"a": [1, 2]}', {"a": [1, 2]}),
        ("application/problem+json", '{"title": "x"}', {"title": "x"}),
        ("text/plain", '[{"sniffed": true}]', [{"sniffed": True}]),  # JSON by its body
        ("text/plain", "plain words", "plain words"),
        ("text/html", "<p>{x}</p>", "<p>{x}</p>"),
        ("text/plain", "{not json", "{not json"),
        ("application/json", "{broken", "{broken"),  # says JSON, is not: kept as text
        ("application/json", "", ""),
    ],
)
def test_json_or_text(http_server, content_type, body, expected):
    out = call(
        {"url": f"{http_server}/respond", "params": {"content_type": content_type, "body": body}}
    )
    assert out.ok
    assert out.data["data"] == expected


@pytest.mark.parametrize(
    ("path", "status", "retryable"),
    [
        ("/api/v1/errors?error_type=429&retry_after=7", 429, True),
        ("/api/v1/errors?error_type=500", 500, True),
        ("/api/v1/errors?error_type=503", 503, True),
        ("/status/502", 502, True),
        ("/api/v1/errors?error_type=404", 404, False),
        ("/api/v1/errors?error_type=auth", 401, False),
        ("/status/400", 400, False),
    ],
)
def test_non_2xx_is_a_failure_with_the_response_as_data(http_server, path, status, retryable):
    out = call({"url": f"{http_server}{path}"})
    assert out.status == "error"
    error = out.error
    assert error["kind"] == "http"
    assert error["type"] == "HTTPStatusError"
    assert error["code"] == f"HTTP_{status}"
    assert error["status_code"] == status
    assert error["retryable"] is retryable
    assert error["message"].startswith(f"GET {http_server}{path.split('?')[0]}")
    assert f"returned {status}" in error["message"]
    # the error body stays readable for templates and policies
    assert out.data["status_code"] == status
    assert isinstance(out.data["data"], dict)
    assert out.meta["http"]["status"] == status
    # the step result is NoETL's error document around that response (138c10ed,
    # tests/differential/cases/tools_http/http_500_error_arc.yaml)
    assert set(out.reported) == {"id", "status", "data"}
    assert out.reported["status"] == "error" and out.reported["data"] == out.data
    assert uuid.UUID(out.reported["id"]).version == 4


def test_429_carries_retry_after_and_the_body(http_server):
    out = call(
        {"url": f"{http_server}/api/v1/errors", "params": {"error_type": 429, "retry_after": 7}}
    )
    assert out.error["retry_after"] == 7
    assert out.data["data"] == {"error": "Too Many Requests", "message": "Rate limit exceeded"}
    assert "Rate limit exceeded" in out.error["message"]  # a short excerpt of the body


def test_redirects_are_followed_only_when_asked(http_server):
    stay = call({"url": f"{http_server}/redirect/2"})
    assert stay.status == "error" and stay.error["code"] == "HTTP_302"
    assert stay.error["retryable"] is False
    follow = call({"url": f"{http_server}/redirect/2", "follow_redirects": True})
    assert follow.ok
    assert follow.data["url"] == f"{http_server}/get"


# -- transport errors ------------------------------------------------------------------------------


def test_timeout_against_the_slow_endpoint(http_server):
    out = call({"url": f"{http_server}/api/v1/slow", "params": {"delay": 3}, "timeout": 0.3})
    assert out.status == "error"
    assert out.error["code"] == "HTTP_TIMEOUT"
    assert out.error["type"] == "ReadTimeout"
    assert out.error["retryable"] is True
    assert "timed out (read timeout 0.3 s)" in out.error["message"]
    assert out.meta["duration_ms"] < 2500
    assert out.meta["http"] == {"status": None, "headers": {}}


def test_a_slow_response_within_the_timeout_succeeds(http_server):
    out = call({"url": f"{http_server}/delay/0.2", "timeout": {"read": 5}})
    assert out.ok and out.data["elapsed"] >= 0.2


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_refused_is_a_retryable_failure():
    port = _closed_port()
    out = call({"url": f"http://127.0.0.1:{port}/anything", "method": "POST", "payload": {"a": 1}})
    assert out.status == "error"
    assert out.error["code"] == "HTTP_CONNECT_ERROR"
    assert out.error["type"] == "ConnectError"
    assert out.error["retryable"] is True
    assert out.error["message"].startswith(f"POST http://127.0.0.1:{port}/anything failed:")
    assert out.data is None


def test_unsupported_scheme_is_not_retryable():
    out = call({"url": "ftp://127.0.0.1/file"})
    assert out.status == "error" and out.error["retryable"] is False
    assert out.error["code"] == "HTTP_INVALID_URL"
