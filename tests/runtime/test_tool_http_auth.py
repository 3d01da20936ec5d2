"""The ``http`` tool's auth through Airflow connections (``AIRFLOW_CONN_*`` variables: URI and JSON
forms, basic, bearer, API key), against the HTTP server on 127.0.0.1, without a secret ever
reaching a result or a message."""

from __future__ import annotations

import base64
import json
from typing import Any

from airflow_plugin.tools.http import safe_url
from tests.harness.http_server import (
    API_KEY,
    API_KEY_HEADER,
    BASIC_PASSWORD,
    BASIC_USER,
    BEARER_TOKEN,
)
from tests.runtime.http_support import call, echo, everything

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
