"""``kind: http`` — one HTTP request with NoETL's configuration keys and result shape.

Why it looks the way it does (reference/noetl_dsl.md section 3.5; NoETL ``noetl/tools/http/``):

* **Config keys.** ``method`` (GET), ``url`` | ``endpoint`` (``endpoint`` wins, as in NoETL),
  ``params``, ``headers``, body from ``payload`` | ``body`` | ``json`` | ``data``, ``timeout``
  (seconds, or ``{connect, read, write, pool}``; default 60 s), ``verify`` | ``verify_ssl``
  (bool or a CA bundle path), ``follow_redirects`` (default false), ``auth``.
* **The step input.** NoETL hands the step's rendered ``input`` to the http executor as its
  overrides (``task_with``) and reads only these keys from it: ``endpoint``/``url`` replace the
  tool's URL; ``params``, ``headers``, ``payload`` and ``data`` are merged over the tool's own
  (mappings key by key); ``timeout`` replaces; ``auth`` is used when the tool has none. Other
  input keys mean nothing to an HTTP request and are ignored, as in NoETL.
* **Data routing** (NoETL ``request.build_request_args``): ``data.query`` / ``data.body`` name the
  two halves explicitly; otherwise a whole ``data`` mapping goes to the query string for
  GET/DELETE (and HEAD/OPTIONS, which have no body) and to the body for other methods. The body is
  encoded by the request's Content-Type: ``application/x-www-form-urlencoded`` -> form fields,
  ``multipart/form-data`` -> multipart parts (a value ``{filename, content, content_type}`` is a
  file), anything else -> JSON; a string body is sent as it is (a ``| tojson`` template).
  Where NoETL silently drops something we send it instead, because a dropped parameter fails
  nowhere visible: ``params`` / ``data.query`` of POST/PUT/PATCH go to the query string, ``params``
  and a ``data`` query are merged (NoETL uses ``params`` only when ``data`` is empty), an explicit
  body on a GET is sent, a string ``payload`` is sent raw. A POST with no body sends none (NoETL
  sends ``{}``).
* **Auth** names an Airflow Connection (:mod:`.connections`); the extra ``auth_type`` says which
  credential it carries, and without one the extras and fields decide:

  - ``bearer`` (or a ``token`` extra alone): ``Authorization: Bearer <token>``, the token being
    the ``token`` extra or else the password;
  - ``api_key`` (or an ``api_key`` extra alone): ``<api_key_header>: <key>``, the key being the
    ``api_key`` extra or else the password, the header ``X-API-Key`` unless ``api_key_header``
    names another;
  - ``basic`` (also Airflow's ``requests.auth.HTTPBasicAuth``, or just a login/password):
    ``Authorization: Basic ...``;
  - ``none``: no credential, the connection only gives the host;
  - a ``headers`` extra (a mapping) is added as it is, its values treated as secrets.

  A ``type`` in the playbook's auth mapping (``auth: {api: {type: bearer, credential: x}}``)
  overrides ``auth_type``. When the URL is a relative path and the connection has a host, they
  are joined (``schema`` is the protocol, as for Airflow's HttpHook; default http). A connection
  that does not exist, or lacks the secret its type needs, is a ConfigError failure naming it.
* **Result** ``{status_code, headers, url, elapsed, data}``: response headers (lower-case names),
  ``data`` parsed as JSON when the Content-Type says JSON or the body is a JSON object/array,
  else text. Non-2xx is a failure whose ``data`` is that same result (templates can read an error
  body); ``retryable`` for 429 and 5xx. Transport errors (refused, timeout, DNS) are retryable
  failures with codes ``HTTP_TIMEOUT``, ``HTTP_CONNECT_ERROR``, ``HTTP_NETWORK_ERROR``...
  Outcome meta: ``{"http": {"status", "headers"}, "duration_ms"}`` (the runtime's ``output.http``).
* **Secrets.** Credentials and the values of sensitive request headers (Authorization, Cookie,
  API keys, tokens) are registered with Airflow's log masker and scrubbed from every error
  message; URLs in messages and results lose their user-info and the values of query parameters
  named like credentials (``api_key``, ``token``, ``client_secret``...).
* **One pooled client per process** (keep-alive across the calls of a task, a pipeline or a
  loop): created lazily under a lock, keyed by ``os.getpid()`` so a forked worker never shares the
  parent's sockets. TLS verification is a client setting in httpx, so ``verify: false`` (or a CA
  bundle) gets its own pooled client.

NoETL's ``.local`` host mocking (``NOETL_HTTP_MOCK_LOCAL``) is a debugging aid of its worker and
is not reproduced. Tool-level ``retry`` (pagination, polling) belongs to the step runtime
(``runtime/repeat.py``), which calls this tool once per request.
"""

from __future__ import annotations

import atexit
import base64
import json
import logging
import math
import os
import re
import ssl
import threading
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from .connections import ConnectionInfo, ConnectionNotFound, auth_name, get_connection, mask
from .outcome import ToolCall, ToolOutcome, tool_error

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "HttpRequest",
    "build_request",
    "close_clients",
    "run_http",
    "safe_url",
    "shared_client",
]

KIND = "http"
DEFAULT_TIMEOUT_SECONDS = 60.0

log = logging.getLogger(__name__)

# Methods whose ``data`` goes to the query string; they carry no body by convention.
_QUERY_METHODS = frozenset({"GET", "DELETE", "HEAD", "OPTIONS"})
_METHOD = re.compile(r"^[A-Z][A-Z-]*$")
# Request headers whose values are credentials (never logged, scrubbed from messages).
_SECRET_HEADER = re.compile(
    r"authorization|cookie|api[-_]?key|token|secret|password|passwd|signature|credential",
    re.IGNORECASE,
)
# Query parameter names whose values are credentials: whole names or ``_``/``-`` suffixes, so
# ``access_token`` and ``client_secret`` match and ``keyword`` or ``monkey`` do not. Searched in
# ``"_" + name`` so that the pattern starts with a character set (no `^|` branch to try at
# every position of a long name).
_SECRET_PARAM = re.compile(
    r"[_\-.](api[_-]?key|apikey|key|token|secret|password|passwd|pwd|sig|signature"
    r"|auth|authorization|credentials?|session)$",
    re.IGNORECASE,
)
_REDACTED = "***"
_MIN_SECRET = 4
_BODY_EXCERPT = 200
_STEP_INPUT_MERGED = ("params", "headers", "payload", "data")


# --------------------------------------------------------------------------------------------
# Pooled client
# --------------------------------------------------------------------------------------------

_clients: dict[tuple[int, Hashable], httpx.Client] = {}
_clients_lock = threading.Lock()


def _reset_after_fork() -> None:
    # A lock held by another thread at fork time would stay held forever in the child; the
    # parent's clients are dropped without closing (their sockets belong to the parent).
    global _clients_lock
    _clients_lock = threading.Lock()
    _clients.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _verify_key(verify: bool | str) -> Hashable:
    return ("cafile", verify) if isinstance(verify, str) else bool(verify)


def shared_client(verify: bool | str = True) -> httpx.Client:
    """The process's pooled ``httpx.Client`` for this TLS verification setting.

    ``verify``: true/false, or the path of a CA bundle.
    """
    key = (os.getpid(), _verify_key(verify))
    client = _clients.get(key)
    if client is not None and not client.is_closed:
        return client
    with _clients_lock:
        client = _clients.get(key)
        if client is None or client.is_closed:
            # httpx 0.28 deprecates a path string for ``verify``; an SSLContext is the way.
            setting = (
                ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
            )
            client = httpx.Client(
                verify=setting,
                follow_redirects=False,
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
                timeout=DEFAULT_TIMEOUT_SECONDS,
            )
            _clients[key] = client
    return client


def close_clients() -> None:
    """Close this process's pooled clients (at exit; tests that want a fresh pool)."""
    pid = os.getpid()
    with _clients_lock:
        mine = [key for key in _clients if key[0] == pid]
        for key in mine:
            _clients.pop(key).close()


atexit.register(close_clients)


# --------------------------------------------------------------------------------------------
# Request building (pure: no I/O, no connection lookup)
# --------------------------------------------------------------------------------------------


class _ConfigError(ValueError):
    """The tool block cannot make a request (a failure outcome, not retryable)."""


@dataclass
class HttpRequest:
    """Everything one request needs, decided from the tool config and the step input."""

    method: str
    url: str
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    json: Any = None
    has_json: bool = False
    content: bytes | None = None
    form: dict[str, Any] | None = None
    files: dict[str, Any] | None = None
    timeout: httpx.Timeout = field(default_factory=lambda: httpx.Timeout(DEFAULT_TIMEOUT_SECONDS))
    verify: bool | str = True
    follow_redirects: bool = False
    auth: Any = None

    def send_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "params": self.params or None,
            "headers": self.headers,
            "timeout": self.timeout,
            "follow_redirects": self.follow_redirects,
        }
        if self.has_json:
            kwargs["json"] = self.json
        if self.content is not None:
            kwargs["content"] = self.content
        if self.form is not None:
            kwargs["data"] = self.form
        if self.files is not None:
            kwargs["files"] = self.files
        return kwargs


def _merged_config(config: Mapping[str, Any], step_input: Mapping[str, Any]) -> dict[str, Any]:
    """The tool config with NoETL's step-input overrides (``task_with``) applied."""
    merged = dict(config)
    if not isinstance(step_input, Mapping):
        return merged
    url = step_input.get("endpoint") or step_input.get("url")
    if url:
        merged["endpoint"] = url
        merged.pop("url", None)
    for key in _STEP_INPUT_MERGED:
        override = step_input.get(key)
        if not isinstance(override, Mapping):
            continue
        if key == "payload":
            current = _payload(merged)
            merged.pop("body", None)
            merged.pop("json", None)
        else:
            current = merged.get(key)
        if key == "headers" and isinstance(current, Mapping):
            merged[key] = _with_headers(current, override)
        else:
            base = current if isinstance(current, Mapping) else {}
            merged[key] = {**base, **override}
    if "timeout" in step_input and step_input["timeout"] is not None:
        merged["timeout"] = step_input["timeout"]
    if not merged.get("auth") and step_input.get("auth"):
        merged["auth"] = step_input["auth"]
    return merged


def _payload(config: Mapping[str, Any]) -> Any:
    for key in ("payload", "body", "json"):
        value = config.get(key)
        if value is not None:
            return value
    return None


def _method(config: Mapping[str, Any]) -> str:
    method = config.get("method", "GET")
    if method is None:
        method = "GET"
    if not isinstance(method, str) or not _METHOD.match(method.strip().upper()):
        raise _ConfigError(f"http `method` must be an HTTP method name, got {method!r}")
    return method.strip().upper()


def _url(config: Mapping[str, Any]) -> str:
    url = config.get("endpoint") or config.get("url")
    if not isinstance(url, str) or not url.strip():
        raise _ConfigError("the http tool needs `url` (or `endpoint`): the URL to call")
    return url.strip()


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, default=str)
    return str(value)


def _params(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        pairs: dict[str, Any] = {}
        for key, item in parse_qsl(value.lstrip("?"), keep_blank_values=True):
            if key in pairs:
                prior = pairs[key]
                pairs[key] = [*prior, item] if isinstance(prior, list) else [prior, item]
            else:
                pairs[key] = item
        return pairs
    if not isinstance(value, Mapping):
        raise _ConfigError(f"http `{what}` must be a mapping of query parameters, got {value!r}")
    params: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, list | tuple):
            params[str(key)] = [_scalar_text(v) for v in item]
        else:
            params[str(key)] = _scalar_text(item)
    return params


def _headers(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _ConfigError("http `headers` must be a mapping of header names to values")
    # A header rendered to None (``{{ x | default(none) }}``) is left out, not sent as "None".
    return {str(k): _scalar_text(v) for k, v in value.items() if v is not None}


def _with_headers(headers: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """``headers`` updated with ``new``; names compare case-insensitively (one header each)."""
    replaced = {str(name).lower() for name in new}
    kept = {k: v for k, v in headers.items() if str(k).lower() not in replaced}
    return {**kept, **new}


def _header(headers: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None


def _drop_header(headers: dict[str, str], name: str) -> None:
    for key in [k for k in headers if k.lower() == name.lower()]:
        del headers[key]


def _timeout(value: Any) -> httpx.Timeout:
    if value is None or (isinstance(value, str) and not value.strip()):
        return httpx.Timeout(DEFAULT_TIMEOUT_SECONDS)
    if isinstance(value, Mapping):
        parts = {}
        for key in ("connect", "read", "write", "pool"):
            if value.get(key) is not None:
                parts[key] = _seconds(value[key], f"timeout.{key}")
        default = value.get("total", value.get("timeout"))
        base = (
            _seconds(default, "timeout.total") if default is not None else DEFAULT_TIMEOUT_SECONDS
        )
        return httpx.Timeout(base, **parts)
    return httpx.Timeout(_seconds(value, "timeout"))


def _seconds(value: Any, what: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise _ConfigError(f"http `{what}` must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise _ConfigError(f"http `{what}` must be a positive number of seconds, got {value!r}")
    return seconds


def _bool(value: Any, what: str, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
        return value.strip().lower() in ("true", "yes", "1")
    if isinstance(value, int):
        return bool(value)
    raise _ConfigError(f"http `{what}` must be true or false, got {value!r}")


def _verify(config: Mapping[str, Any]) -> bool | str:
    value = config.get("verify_ssl")
    if value is None:
        value = config.get("verify")
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("true", "yes", "1"):
            return True
        if word in ("false", "no", "0", ""):
            return False
        return value.strip()  # the path of a CA bundle
    return _bool(value, "verify", True)


def _route(method: str, params: dict[str, Any], config: Mapping[str, Any]) -> tuple[dict, Any]:
    """(query parameters, body or None) after NoETL's data routing."""
    data = config.get("data")
    payload = _payload(config)
    if data is not None and not isinstance(data, Mapping):
        # A non-mapping ``data`` (a string, a list) can only be a body.
        return params, data
    data_map = dict(data or {})
    if "query" in data_map:
        query = _params(data_map["query"], "data.query")
    elif method in _QUERY_METHODS and "body" not in data_map:
        query = _params(data_map, "data")
    else:
        query = {}
    if "body" in data_map:
        body = data_map["body"]
    elif method not in _QUERY_METHODS and data_map and "query" not in data_map:
        body = data_map
    else:
        body = payload
    return {**params, **query}, body


def _encode_body(request: HttpRequest, body: Any) -> None:
    if body is None:
        return
    content_type = (_header(request.headers, "Content-Type") or "").lower()
    if isinstance(body, bytes):
        request.content = body
    elif "application/x-www-form-urlencoded" in content_type and not isinstance(body, str):
        if not isinstance(body, Mapping):
            raise _ConfigError("a form-urlencoded http body must be a mapping of fields")
        request.form = _params(body, "body")
    elif "multipart/form-data" in content_type:
        if not isinstance(body, Mapping):
            raise _ConfigError("a multipart/form-data http body must be a mapping of parts")
        request.files = _multipart(body)
        if "boundary=" not in content_type:
            # httpx writes the boundary into its own Content-Type; a user header without one
            # would win and make the body unreadable.
            _drop_header(request.headers, "Content-Type")
    elif isinstance(body, str):
        request.content = body.encode("utf-8")
    else:
        request.json = body
        request.has_json = True


def _multipart(body: Mapping[str, Any]) -> dict[str, Any]:
    parts: dict[str, Any] = {}
    for name, value in body.items():
        if isinstance(value, Mapping) and "content" in value:
            content = value["content"]
            if not isinstance(content, bytes | str):
                content = json.dumps(content, default=str)
            filename = value.get("filename") or str(name)
            content_type = value.get("content_type") or "application/octet-stream"
            parts[str(name)] = (str(filename), content, str(content_type))
        else:
            # (None, text): a plain form field, no filename.
            parts[str(name)] = (None, _scalar_text(value))
    return parts


def build_request(
    config: Mapping[str, Any], step_input: Mapping[str, Any] | None = None
) -> HttpRequest:
    """Decide method, URL, query, headers and body; raises ``ValueError`` for a bad config.

    The URL may still be relative here: joining it with a connection's host needs the lookup,
    which :func:`run_http` does.
    """
    merged = _merged_config(config, step_input or {})
    method = _method(merged)
    request = HttpRequest(method=method, url=_url(merged))
    request.headers = _headers(merged.get("headers"))
    request.params, body = _route(method, _params(merged.get("params"), "params"), merged)
    _encode_body(request, body)
    request.timeout = _timeout(merged.get("timeout"))
    request.verify = _verify(merged)
    request.follow_redirects = _bool(merged.get("follow_redirects"), "follow_redirects", False)
    request.auth = merged.get("auth")
    return request


# --------------------------------------------------------------------------------------------
# Auth through Airflow Connections
# --------------------------------------------------------------------------------------------

_AUTH_TYPES = ("basic", "bearer", "api_key", "none")


def _auth_hint(auth: Any) -> str | None:
    """A ``type`` written in the playbook's auth mapping (``{type: bearer, credential: x}``)."""
    if not isinstance(auth, Mapping):
        return None
    candidates = [auth]
    if len(auth) == 1:
        candidates += [v for v in auth.values() if isinstance(v, Mapping)]
    for candidate in candidates:
        hint = candidate.get("type") or candidate.get("auth_type")
        if isinstance(hint, str) and hint.strip().lower().replace("-", "_") in _AUTH_TYPES:
            return hint.strip().lower().replace("-", "_")
    return None


def _auth_type(conn: ConnectionInfo, hint: str | None) -> str:
    extra = conn.extra or {}
    declared = hint or extra.get("auth_type")
    if declared is not None:
        value = str(declared).strip().lower().replace("-", "_")
        if value.endswith("httpbasicauth"):
            # Airflow's HTTP provider names an auth class (requests.auth.HTTPBasicAuth).
            value = "basic"
        if value not in _AUTH_TYPES:
            raise _ConfigError(
                f"connection {conn.conn_id!r} has auth_type {declared!r}; "
                f"supported: {', '.join(_AUTH_TYPES)}"
            )
        return value
    if extra.get("token"):
        return "bearer"
    if extra.get("api_key"):
        return "api_key"
    if conn.login or conn.password:
        return "basic"
    return "none"


def _connection_headers(conn: ConnectionInfo, hint: str | None) -> tuple[dict[str, str], list]:
    """(auth headers, secret values) of a connection."""
    extra = conn.extra or {}
    headers: dict[str, str] = {}
    secrets: list[str] = []
    kind = _auth_type(conn, hint)
    if kind == "bearer":
        token = extra.get("token") or conn.password
        if not token:
            raise _ConfigError(
                f"connection {conn.conn_id!r} is a bearer credential without a token "
                "(set the `token` extra or the password)"
            )
        headers["Authorization"] = f"Bearer {token}"
        secrets.append(str(token))
    elif kind == "api_key":
        key = extra.get("api_key") or conn.password
        if not key:
            raise _ConfigError(
                f"connection {conn.conn_id!r} is an api_key credential without a key "
                "(set the `api_key` extra or the password)"
            )
        headers[str(extra.get("api_key_header") or "X-API-Key")] = str(key)
        secrets.append(str(key))
    elif kind == "basic":
        if not conn.login:
            raise _ConfigError(f"connection {conn.conn_id!r} is a basic credential without a login")
        password = conn.password or ""
        token = base64.b64encode(f"{conn.login}:{password}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
        secrets += [password, token] if password else [token]
    extra_headers = extra.get("headers")
    if isinstance(extra_headers, Mapping):
        for name, value in extra_headers.items():
            if value is not None:
                headers[str(name)] = _scalar_text(value)
                secrets.append(_scalar_text(value))
    return headers, secrets


def _connection_base(conn: ConnectionInfo) -> str | None:
    host = (conn.host or "").strip()
    if not host:
        return None
    if "://" in host:
        parts = urlsplit(host)
        if conn.port and parts.port is None:
            host = urlunsplit(parts._replace(netloc=f"{parts.netloc}:{conn.port}"))
        return host.rstrip("/")
    schema = (conn.schema or "").strip().lower()
    scheme = schema if schema in ("http", "https") else "http"
    port = f":{conn.port}" if conn.port else ""
    return f"{scheme}://{host}{port}"


def _is_absolute(url: str) -> bool:
    return bool(urlsplit(url).scheme) and "://" in url


# --------------------------------------------------------------------------------------------
# Safety: what may appear in messages, logs and results
# --------------------------------------------------------------------------------------------


def safe_url(url: Any) -> str:
    """``url`` without user-info and with credential-like query values replaced by ``***``."""
    text = str(url)
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    netloc = parts.netloc.rsplit("@", 1)[-1] if "@" in parts.netloc else parts.netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_PARAM.search("_" + k) for k, _ in pairs):
            query = urlencode(
                [(k, _REDACTED if _SECRET_PARAM.search("_" + k) else v) for k, v in pairs], safe="*"
            )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _scrub(text: str, secrets: list[str]) -> str:
    # Longest first, so a secret that contains another is replaced whole. Values shorter than
    # _MIN_SECRET are no secrets worth the name and would shred the message.
    for secret in sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, _REDACTED)
    return text


def _header_secrets(headers: Mapping[str, str]) -> list[str]:
    secrets = []
    for name, value in headers.items():
        if _SECRET_HEADER.search(name) and value:
            secrets.append(value)
            # "Bearer xyz" / "Basic xyz": the credential alone may show up elsewhere too.
            scheme, _, credential = value.partition(" ")
            if credential and scheme.isalpha():
                secrets.append(credential)
    return secrets


# --------------------------------------------------------------------------------------------
# Response
# --------------------------------------------------------------------------------------------


def _body(response: httpx.Response) -> Any:
    content_type = response.headers.get("content-type", "").lower()
    if "json" in content_type:
        if not response.content.strip():
            return response.text
        try:
            return json.loads(response.content)
        except ValueError:
            log.warning("http: %s says JSON but its body does not parse", safe_url(response.url))
            return response.text
    text = response.text
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _result(response: httpx.Response, secrets: list[str]) -> dict[str, Any]:
    return {
        "status_code": response.status_code,
        "headers": dict(response.headers),
        "url": _scrub(safe_url(response.url), secrets),
        "elapsed": response.elapsed.total_seconds(),
        "data": _body(response),
    }


def _excerpt(result: Mapping[str, Any], secrets: list[str]) -> str:
    data = result.get("data")
    if data in (None, ""):
        return ""
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    text = " ".join(text.split())
    if len(text) > _BODY_EXCERPT:
        text = text[:_BODY_EXCERPT] + "..."
    return f": {_scrub(text, secrets)}"


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None  # an HTTP date: rare, and the policy's own delay applies


# --------------------------------------------------------------------------------------------
# The executor
# --------------------------------------------------------------------------------------------

_TRANSPORT_CODES: tuple[tuple[type[Exception], str, bool], ...] = (
    (httpx.TimeoutException, "HTTP_TIMEOUT", True),
    (httpx.ConnectError, "HTTP_CONNECT_ERROR", True),
    (httpx.RemoteProtocolError, "HTTP_PROTOCOL_ERROR", True),
    (httpx.NetworkError, "HTTP_NETWORK_ERROR", True),
    (httpx.TooManyRedirects, "HTTP_TOO_MANY_REDIRECTS", False),
    (httpx.UnsupportedProtocol, "HTTP_INVALID_URL", False),
    (httpx.DecodingError, "HTTP_DECODING_ERROR", False),
    (httpx.ProxyError, "HTTP_PROXY_ERROR", True),
)


_TIMEOUT_PHASES: dict[type[Exception], str] = {
    httpx.ConnectTimeout: "connect",
    httpx.ReadTimeout: "read",
    httpx.WriteTimeout: "write",
    httpx.PoolTimeout: "pool",
}


def _config_failure(message: str, started: float) -> ToolOutcome:
    return ToolOutcome.failure(
        tool_error(KIND, "ConfigError", message, retryable=False),
        http={"status": None, "headers": {}},
        duration_ms=_ms(started),
    )


def _ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def run_http(call: ToolCall) -> ToolOutcome:
    """Send one request; a failure of the request itself is a failure outcome, never a raise."""
    started = time.perf_counter()
    try:
        request = build_request(call.config, call.step_input)
    except ValueError as exc:
        return _config_failure(str(exc), started)

    secrets = _header_secrets(request.headers)
    # An empty auth (``auth: {}``, as case-v2 fixtures write it) means none.
    name = auth_name(request.auth) if request.auth else None
    if request.auth and name is None:
        return _config_failure(
            f"http `auth` must name an Airflow Connection, got a {type(request.auth).__name__} "
            "without a name/credential/key",
            started,
        )
    base: str | None = None
    if name is not None:
        try:
            conn = get_connection(name)
            auth_headers, auth_secrets = _connection_headers(conn, _auth_hint(request.auth))
        except ConnectionNotFound as exc:
            return _config_failure(str(exc), started)
        except ValueError as exc:
            return _config_failure(str(exc), started)
        secrets += auth_secrets + _header_secrets(auth_headers)
        request.headers = _with_headers(request.headers, auth_headers)
        base = _connection_base(conn)
    for secret in secrets:
        mask(secret)

    if not _is_absolute(request.url):
        if base is None:
            where = f"connection {name!r} has no host" if name else "no `auth` connection"
            return _config_failure(
                f"http url {safe_url(request.url)!r} is not absolute and {where} to join it to",
                started,
            )
        request.url = f"{base}/{request.url.lstrip('/')}"

    shown = _scrub(safe_url(request.url), secrets)
    try:
        client = shared_client(request.verify)
    except (OSError, ssl.SSLError) as exc:  # an unreadable CA bundle
        return _config_failure(f"http `verify` CA bundle cannot be loaded: {exc}", started)
    try:
        response = client.request(request.method, request.url, **request.send_kwargs())
    except httpx.HTTPError as exc:
        return _transport_failure(request, shown, exc, secrets, started)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        # httpx refuses a value it cannot encode (a header with a newline, a non-JSON body).
        return _config_failure(_scrub(f"http request cannot be built: {exc}", secrets), started)

    result = _result(response, secrets)
    meta = {
        "http": {"status": response.status_code, "headers": dict(result["headers"])},
        "duration_ms": _ms(started),
    }
    if response.is_success:
        log.debug("http %s %s -> %s", request.method, shown, response.status_code)
        return ToolOutcome.success(result, **meta)
    log.info("http %s %s -> %s", request.method, shown, response.status_code)

    status = response.status_code
    message = (
        f"{request.method} {shown} returned {status} {response.reason_phrase}".rstrip()
        + _excerpt(result, secrets)
    )
    extra: dict[str, Any] = {"status_code": status}
    retry_after = _retry_after(response.headers)
    if retry_after is not None:
        extra["retry_after"] = retry_after
    error = tool_error(
        KIND,
        "HTTPStatusError",
        message,
        retryable=status == 429 or status >= 500,
        code=f"HTTP_{status}",
        **extra,
    )
    return ToolOutcome.failure(error, data=result, **meta)


def _transport_failure(
    request: HttpRequest, shown: str, exc: httpx.HTTPError, secrets: list[str], started: float
) -> ToolOutcome:
    code, retryable = "HTTP_ERROR", True
    for kind, kind_code, kind_retryable in _TRANSPORT_CODES:
        if isinstance(exc, kind):
            code, retryable = kind_code, kind_retryable
            break
    if isinstance(exc, httpx.TimeoutException):
        phase = _TIMEOUT_PHASES.get(type(exc), "read")
        seconds = getattr(request.timeout, phase, None)
        limit = f" ({phase} timeout {seconds:g} s)" if seconds else ""
        message = f"{request.method} {shown} timed out{limit}"
    else:
        detail = str(exc) or type(exc).__name__
        message = _scrub(f"{request.method} {shown} failed: {detail}", secrets)
    log.info("http %s %s failed: %s", request.method, shown, code)
    return ToolOutcome.failure(
        tool_error(KIND, type(exc).__name__, message, retryable=retryable, code=code),
        http={"status": None, "headers": {}},
        duration_ms=_ms(started),
    )
