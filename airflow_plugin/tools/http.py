"""``kind: http`` — one HTTP request with NoETL's configuration keys and result shape.

Why it looks the way it does (reference/noetl_dsl.md section 3.5; NoETL ``noetl/tools/http/``):

* **Config keys.** ``method`` (GET), ``url`` | ``endpoint`` (``endpoint`` wins, as in NoETL),
  ``params``, ``headers``, body from ``payload`` | ``body`` | ``json`` (the first given, in the
  engine's order: ``profile.http_body_keys``; NoETL 5's ``json`` first) | ``data``, ``timeout``
  (seconds, or ``{connect, read, write, pool}``; default 60 s), ``verify`` | ``verify_ssl``
  (bool or a CA bundle path), ``follow_redirects`` (default: the engine's,
  ``profile.http_follows_redirects``: false for NoETL's Python engines, true for NoETL 5),
  ``auth``. NoETL 5's
  ``timeout_seconds`` is read when ``timeout`` is absent (a timeout fails the call), its ``form``
  (a mapping) is sent form-urlencoded unless ``json`` is given (it wins over ``body``).
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
* **Result** ``{status_code, headers, url, elapsed, data}`` (NoETL 5: ``{status_code, headers,
  data, body}``, the engine profile's ``http_result_keys``): response headers (lower-case names),
  ``data`` parsed as JSON when the Content-Type says JSON or the body is a JSON object/array,
  else text; NoETL 5's ``response_type`` chooses instead (http.rs:247): ``json`` parses any body
  (text when it does not parse), ``text`` keeps it as text, ``binary`` gives ``{base64, size}``. Non-2xx is a failure whose step result is NoETL's ``{id, status: "error", data:
  <that same result>}`` (templates read an error body as ``{{ s.data.data }}``, and
  ``{{ s.status_code }}`` through the result's ``data`` fallback); ``retryable`` for 429 and 5xx. Transport errors (refused, timeout, DNS) are retryable
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

import base64
import json
import logging
import re
import ssl
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from ..hooks.connections import ConnectionNotFound, auth_name, get_connection, mask
from ..hooks.http import (
    auth_hint,
    connection_base,
    connection_headers,
    is_absolute,
    shared_client,
)
from ..hooks.lineage import note_http
from .http_request import HttpRequest, build_request, with_headers
from .outcome import ToolCall, ToolOutcome, tool_error

__all__ = [
    "HttpRequest",
    "build_request",
    "run_http",
    "safe_url",
]

KIND = "http"

log = logging.getLogger(__name__)

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


def _typed_body(response: httpx.Response, response_type: str | None) -> Any:
    """The body as NoETL 5's ``response_type`` decodes it (http.rs:247): ``json`` parses it
    whatever its Content-Type (text when it does not parse), ``text`` keeps it as text,
    ``binary`` is ``{base64, size}``. Without the key: decoded by its Content-Type."""
    if response_type == "json":
        try:
            return json.loads(response.text)
        except ValueError:
            return response.text
    if response_type == "text":
        return response.text
    if response_type == "binary":
        raw = response.content
        return {"base64": base64.b64encode(raw).decode("ascii"), "size": len(raw)}
    return _body(response)


def _result(
    response: httpx.Response,
    secrets: list[str],
    keys: tuple[str, ...],
    response_type: str | None = None,
) -> dict[str, Any]:
    """The call's result: the engine's keys (``profile.http_result_keys``) of everything this
    tool knows of the response; ``body`` is the parsed body again (NoETL 5's alias of ``data``,
    http.rs:320)."""
    data = _typed_body(response, response_type)
    full: dict[str, Any] = {
        "status_code": response.status_code,
        "headers": dict(response.headers),
        "url": _scrub(safe_url(response.url), secrets),
        "elapsed": response.elapsed.total_seconds(),
        "data": data,
        "body": data,
    }
    return {key: full[key] for key in keys if key in full}


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
        request = build_request(
            call.config,
            call.step_input,
            empty_body=call.profile.http_empty_body,
            follows_redirects=call.profile.http_follows_redirects,
            body_keys=call.profile.http_body_keys,
        )
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
            auth_headers, auth_secrets = connection_headers(conn, auth_hint(request.auth))
        except ConnectionNotFound as exc:
            return _config_failure(str(exc), started)
        except ValueError as exc:
            return _config_failure(str(exc), started)
        secrets += auth_secrets + _header_secrets(auth_headers)
        request.headers = with_headers(request.headers, auth_headers)
        base = connection_base(conn)
    for secret in secrets:
        mask(secret)

    if not is_absolute(request.url):
        if base is None:
            where = f"connection {name!r} has no host" if name else "no `auth` connection"
            return _config_failure(
                f"http url {safe_url(request.url)!r} is not absolute and {where} to join it to",
                started,
            )
        request.url = f"{base}/{request.url.lstrip('/')}"

    shown = _scrub(safe_url(request.url), secrets)
    # The URL an OpenLineage event names (host and path only) when the operator collects.
    note_http(request.method, request.url)
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

    result = _result(response, secrets, call.profile.http_result_keys, request.response_type)
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
    # The step result is NoETL's for a non-2xx response (recorded at 138c10ed,
    # tests/differential/cases/tools_http): a fresh id, status error, the response under `data`;
    # `{{ s.status_code }}` still reads through the result's `data` fallback.
    reported = {"id": str(uuid.uuid4()), "status": "error", "data": result}
    return ToolOutcome.failure(error, data=result, reported=reported, **meta)


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
