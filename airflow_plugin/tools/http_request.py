"""The request a ``kind: http`` block describes, built without I/O or connection lookup: method,
URL, params, headers and body from the tool config with the step input merged over it as NoETL
merges it (``tools/http.py``'s docstring has the keys), timeout and TLS settings.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import httpx

from ..hooks.http import DEFAULT_TIMEOUT_SECONDS, HttpConfigError, scalar_text

__all__ = ["HttpRequest", "build_request"]

# Methods whose ``data`` goes to the query string; they carry no body by convention.
_QUERY_METHODS = frozenset({"GET", "DELETE", "HEAD", "OPTIONS"})
_METHOD = re.compile(r"^[A-Z][A-Z-]*$")
_STEP_INPUT_MERGED = ("params", "headers", "payload", "data")


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
    # NoETL 5's `response_type` (http.rs:89): how the body becomes `data`; None decodes it by
    # its Content-Type (the engines before NoETL 5 read no such key).
    response_type: str | None = None

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


def _merged_config(
    config: Mapping[str, Any], step_input: Mapping[str, Any], body_keys: tuple[str, ...]
) -> dict[str, Any]:
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
            current = _payload(merged, body_keys)
            merged.pop("body", None)
            merged.pop("json", None)
        else:
            current = merged.get(key)
        if key == "headers" and isinstance(current, Mapping):
            merged[key] = with_headers(current, override)
        else:
            base = current if isinstance(current, Mapping) else {}
            merged[key] = {**base, **override}
    if "timeout" in step_input and step_input["timeout"] is not None:
        merged["timeout"] = step_input["timeout"]
    if not merged.get("auth") and step_input.get("auth"):
        merged["auth"] = step_input["auth"]
    return merged


def _payload(config: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = config.get(key)
        if value is not None:
            return value
    return None


def _method(config: Mapping[str, Any]) -> str:
    method = config.get("method", "GET")
    if method is None:
        method = "GET"
    if not isinstance(method, str) or not _METHOD.match(method.strip().upper()):
        raise HttpConfigError(f"http `method` must be an HTTP method name, got {method!r}")
    return method.strip().upper()


def _url(config: Mapping[str, Any]) -> str:
    url = config.get("endpoint") or config.get("url")
    if not isinstance(url, str) or not url.strip():
        raise HttpConfigError("the http tool needs `url` (or `endpoint`): the URL to call")
    return url.strip()


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
        raise HttpConfigError(f"http `{what}` must be a mapping of query parameters, got {value!r}")
    params: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, list | tuple):
            params[str(key)] = [scalar_text(v) for v in item]
        else:
            params[str(key)] = scalar_text(item)
    return params


def _headers(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise HttpConfigError("http `headers` must be a mapping of header names to values")
    # A header rendered to None (``{{ x | default(none) }}``) is left out, not sent as "None".
    return {str(k): scalar_text(v) for k, v in value.items() if v is not None}


def with_headers(headers: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
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
        raise HttpConfigError(f"http `{what}` must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise HttpConfigError(f"http `{what}` must be a positive number of seconds, got {value!r}")
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
    raise HttpConfigError(f"http `{what}` must be true or false, got {value!r}")


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


def _route(
    method: str, params: dict[str, Any], config: Mapping[str, Any], body_keys: tuple[str, ...]
) -> tuple[dict, Any]:
    """(query parameters, body or None) after NoETL's data routing."""
    data = config.get("data")
    payload = _payload(config, body_keys)
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
            raise HttpConfigError("a form-urlencoded http body must be a mapping of fields")
        request.form = _params(body, "body")
    elif "multipart/form-data" in content_type:
        if not isinstance(body, Mapping):
            raise HttpConfigError("a multipart/form-data http body must be a mapping of parts")
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
            parts[str(name)] = (None, scalar_text(value))
    return parts


def build_request(
    config: Mapping[str, Any],
    step_input: Mapping[str, Any] | None = None,
    *,
    empty_body: bool = False,
    follows_redirects: bool = False,
    body_keys: tuple[str, ...] = ("payload", "body", "json"),
) -> HttpRequest:
    """Decide method, URL, query, headers and body; raises ``ValueError`` for a bad config.

    The URL may still be relative here: joining it with a connection's host needs the lookup,
    which :func:`run_http` does. ``empty_body`` (the engine profile's ``http_empty_body``): a
    POST/PUT/PATCH with no body sends the JSON body ``{}``, as NoETL's Python http tools do.
    """
    merged = _merged_config(config, step_input or {}, body_keys)
    method = _method(merged)
    request = HttpRequest(method=method, url=_url(merged))
    request.headers = _headers(merged.get("headers"))
    request.params, body = _route(
        method, _params(merged.get("params"), "params"), merged, body_keys
    )
    if body is None and empty_body and method in ("POST", "PUT", "PATCH"):
        body = {}
    form = merged.get("form")
    if form is not None and merged.get("json") is None:
        # NoETL 5's `form` (noetl/tools http.rs): form-urlencoded fields; `json` wins over it,
        # it wins over `body`. A field rendered to null is left out, as there.
        if not isinstance(form, Mapping):
            raise HttpConfigError("http `form` must be a mapping of form fields")
        request.form = _params({k: v for k, v in form.items() if v is not None}, "form")
    else:
        _encode_body(request, body)
    timeout = merged.get("timeout")
    if timeout is None:
        timeout = merged.get("timeout_seconds")  # NoETL 5's name for it (http.rs)
    request.timeout = _timeout(timeout)
    request.verify = _verify(merged)
    # Without the key, the engine's default (profile.http_follows_redirects: NoETL 5's client
    # follows, the Python engines' httpx does not); a value the call gives wins.
    request.follow_redirects = _bool(
        merged.get("follow_redirects"), "follow_redirects", follows_redirects
    )
    request.auth = merged.get("auth")
    request.response_type = _response_type(merged.get("response_type"))
    return request


RESPONSE_TYPES = ("json", "text", "binary")  # http.rs:147, serde lowercase


def _response_type(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if text not in RESPONSE_TYPES:
        # serde refuses any other value: the call fails with "Invalid http config" there too.
        raise HttpConfigError(
            f"http `response_type` must be one of {', '.join(RESPONSE_TYPES)}, got {text!r}"
        )
    return text
