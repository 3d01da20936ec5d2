"""The ``http`` tool against a real HTTP server on 127.0.0.1 (``tests/harness/http_server.py``).

What is pinned here: NoETL's routing of ``params`` / ``data`` / ``payload`` by method and
Content-Type, the step input as overrides, the result and error shapes the runtime and policies
read (``output.http.status``, ``output.error.retryable``), connection auth through
``AIRFLOW_CONN_*`` variables without a secret ever reaching a result or a message, and the pooled
client (one per process, keep-alive, a fresh one after fork).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import uuid
from typing import Any

import pytest

from airflow_plugin.hooks import http as http_hook
from airflow_plugin.hooks.http import shared_client
from airflow_plugin.tools.http import build_request, run_http, safe_url
from airflow_plugin.tools.outcome import ToolCall, ToolOutcome
from airflow_plugin.tools.registry import get_tool
from tests.harness.http_server import (
    API_KEY,
    API_KEY_HEADER,
    BASIC_PASSWORD,
    BASIC_USER,
    BEARER_TOKEN,
    TOTAL_ITEMS,
)


def call(config: dict[str, Any], step_input: dict[str, Any] | None = None) -> ToolOutcome:
    return run_http(ToolCall(step="s", task="t", config=config, step_input=step_input or {}))


def echo(outcome: ToolOutcome) -> dict[str, Any]:
    """What the echo endpoint saw."""
    assert outcome.ok, outcome.error
    return outcome.data["data"]


def everything(outcome: ToolOutcome) -> str:
    """All an outcome exposes (result, error, meta), as text to search for secrets."""
    return json.dumps([outcome.data, outcome.error, outcome.meta], default=str)


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


def test_post_without_a_body_sends_none(http_server):
    seen = echo(call({"method": "POST", "url": f"{http_server}/echo"}))
    assert seen["data"] == ""
    assert seen["headers"].get("content-length") == "0"
    assert seen["content_type"] is None


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


# -- auth through Airflow connections --------------------------------------------------------------


def _host_port(base_url: str) -> tuple[str, int]:
    host, port = base_url.removeprefix("http://").split(":")
    return host, int(port)


def _conn_json(monkeypatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "http", **fields})
    )


def test_basic_auth_from_a_uri_connection_and_a_relative_url(http_server, monkeypatch):
    host, port = _host_port(http_server)
    monkeypatch.setenv(
        "AIRFLOW_CONN_TEST_HTTP_BASIC", f"http://{BASIC_USER}:{BASIC_PASSWORD}@{host}:{port}/http"
    )
    out = call(
        {"url": "/api/v1/protected", "params": {"scheme": "basic"}, "auth": "test_http_basic"}
    )
    assert out.ok, out.error
    assert out.data["data"] == {"authenticated": True, "scheme": "basic", "user": BASIC_USER}
    assert out.data["url"] == f"{http_server}/api/v1/protected?scheme=basic"
    encoded = base64.b64encode(f"{BASIC_USER}:{BASIC_PASSWORD}".encode()).decode()
    assert BASIC_PASSWORD not in everything(out) and encoded not in everything(out)


def test_bearer_token_from_the_password_of_a_json_connection(http_server, monkeypatch):
    host, port = _host_port(http_server)
    _conn_json(
        monkeypatch,
        "test_http_bearer",
        host=host,
        port=port,
        password=BEARER_TOKEN,
        extra={"auth_type": "bearer"},
    )
    # the auth value as NoETL writes it: a dict of aliases
    auth = {"api": {"type": "bearer", "credential": "test_http_bearer"}}
    out = call({"url": "api/v1/protected?scheme=bearer", "auth": auth})
    assert out.ok, out.error
    assert out.data["data"]["scheme"] == "bearer"
    assert BEARER_TOKEN not in everything(out)


def test_bearer_token_extra_alone_implies_bearer(http_server, monkeypatch):
    _conn_json(monkeypatch, "test_http_token", extra={"token": BEARER_TOKEN})
    out = call(
        {
            "url": f"{http_server}/api/v1/protected?scheme=bearer",
            "auth": {"name": "test_http_token"},
        }
    )
    assert out.ok, out.error
    assert BEARER_TOKEN not in everything(out)


def test_api_key_header_from_extras(http_server, monkeypatch):
    _conn_json(
        monkeypatch,
        "test_http_key",
        extra={"auth_type": "api_key", "api_key": API_KEY, "api_key_header": API_KEY_HEADER},
    )
    out = call(
        {
            "url": f"{http_server}/api/v1/protected",
            "params": {"scheme": "api_key"},
            "auth": "test_http_key",
        }
    )
    assert out.ok, out.error
    assert out.data["data"]["scheme"] == "api_key"
    assert API_KEY not in everything(out)


def test_the_auth_of_the_step_input_is_used_when_the_tool_has_none(http_server, monkeypatch):
    _conn_json(monkeypatch, "test_http_input", extra={"token": BEARER_TOKEN})
    out = call({"url": f"{http_server}/api/v1/protected"}, {"auth": "test_http_input"})
    assert out.ok, out.error


def test_airflow_basic_auth_class_extra_headers_and_one_authorization(http_server, monkeypatch):
    host, port = _host_port(http_server)
    _conn_json(
        monkeypatch,
        "test_http_airflow_style",
        host=host,
        port=port,
        login=BASIC_USER,
        password=BASIC_PASSWORD,
        extra={"auth_type": "requests.auth.HTTPBasicAuth", "headers": {"X-Tenant": "tenant-1"}},
    )
    # the connection's credential replaces a tool header of any case: one Authorization is sent
    config = {
        "headers": {"authorization": "Bearer not-this-one"},
        "auth": "test_http_airflow_style",
    }
    protected = call({**config, "url": "/api/v1/protected", "params": {"scheme": "basic"}})
    assert protected.ok, protected.error
    seen = echo(call({**config, "url": "/echo", "verify_ssl": False}))
    assert seen["headers"]["x-tenant"] == "tenant-1"
    assert seen["headers"]["authorization"].startswith("Basic ")


def test_a_rejected_credential_never_shows_in_the_error(http_server, monkeypatch):
    wrong = "wrong-token-value-77"
    _conn_json(monkeypatch, "test_http_wrong", extra={"token": wrong})
    out = call({"url": f"{http_server}/api/v1/protected", "auth": "test_http_wrong"})
    assert out.status == "error" and out.error["code"] == "HTTP_401"
    assert out.error["retryable"] is False
    assert wrong not in everything(out)


def test_secrets_are_scrubbed_from_messages_even_when_the_server_echoes_them(http_server):
    token = "template-token-4242"
    out = call(
        {
            "url": f"{http_server}/respond",
            "params": {"status": 401, "body": f"token {token} is not valid", "api_key": "k-9999"},
            "headers": {"Authorization": f"Bearer {token}"},
        }
    )
    assert out.status == "error"
    assert token not in out.error["message"]
    assert "token *** is not valid" in out.error["message"]
    # a credential-like query parameter is redacted in the message and in the result url
    assert "k-9999" not in out.error["message"] and "k-9999" not in out.data["url"]
    assert "api_key=***" in out.data["url"]


def test_safe_url_drops_userinfo_and_credential_params_only():
    url = "https://u:pw@h.test/p?api_key=1&keyword=SFO&access_token=2&client_secret=3&page=4"
    assert (
        safe_url(url)
        == "https://h.test/p?api_key=***&keyword=SFO&access_token=***&client_secret=***&page=4"
    )


def test_missing_connection_is_a_config_error_naming_it(http_server):
    out = call({"url": f"{http_server}/get", "auth": "no_such_http_conn"})
    assert out.status == "error"
    assert out.error["type"] == "ConfigError"
    assert out.error["retryable"] is False
    assert "'no_such_http_conn'" in out.error["message"]
    assert "AIRFLOW_CONN_NO_SUCH_HTTP_CONN" in out.error["message"]


def test_a_connection_without_its_secret_is_a_config_error(http_server, monkeypatch):
    _conn_json(monkeypatch, "test_http_empty", extra={"auth_type": "bearer"})
    out = call({"url": f"{http_server}/get", "auth": "test_http_empty"})
    assert out.error["type"] == "ConfigError"
    assert "bearer credential without a token" in out.error["message"]


def test_relative_url_needs_a_connection_host(monkeypatch):
    _conn_json(monkeypatch, "test_http_nohost", extra={"token": BEARER_TOKEN})
    out = call({"url": "/x", "auth": "test_http_nohost"})
    assert out.error["type"] == "ConfigError"
    assert "connection 'test_http_nohost' has no host" in out.error["message"]


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
