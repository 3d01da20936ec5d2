"""HTTP for the tools: the process's pooled ``httpx`` clients (one per TLS verification setting
and process; dropped in a forked child, closed at exit) and what an Airflow Connection named by
``auth`` contributes to a request (base URL, and headers for ``basic``/``bearer``/``api_key``
auth, the credential registered with the log masker).
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import ssl
import threading
from collections.abc import Hashable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from ..errors import NoetlConfigError
from .connections import ConnectionInfo

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "HttpConfigError",
    "auth_hint",
    "close_clients",
    "connection_base",
    "connection_headers",
    "is_absolute",
    "scalar_text",
    "shared_client",
]

DEFAULT_TIMEOUT_SECONDS = 60.0


class HttpConfigError(NoetlConfigError):
    """The tool block cannot make a request (a failure outcome, not retryable)."""


def scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, default=str)
    return str(value)


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


_AUTH_TYPES = ("basic", "bearer", "api_key", "none")


def auth_hint(auth: Any) -> str | None:
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
            raise HttpConfigError(
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


def connection_headers(conn: ConnectionInfo, hint: str | None) -> tuple[dict[str, str], list]:
    """(auth headers, secret values) of a connection."""
    extra = conn.extra or {}
    headers: dict[str, str] = {}
    secrets: list[str] = []
    kind = _auth_type(conn, hint)
    if kind == "bearer":
        token = extra.get("token") or conn.password
        if not token:
            raise HttpConfigError(
                f"connection {conn.conn_id!r} is a bearer credential without a token "
                "(set the `token` extra or the password)"
            )
        headers["Authorization"] = f"Bearer {token}"
        secrets.append(str(token))
    elif kind == "api_key":
        key = extra.get("api_key") or conn.password
        if not key:
            raise HttpConfigError(
                f"connection {conn.conn_id!r} is an api_key credential without a key "
                "(set the `api_key` extra or the password)"
            )
        headers[str(extra.get("api_key_header") or "X-API-Key")] = str(key)
        secrets.append(str(key))
    elif kind == "basic":
        if not conn.login:
            raise HttpConfigError(
                f"connection {conn.conn_id!r} is a basic credential without a login"
            )
        password = conn.password or ""
        token = base64.b64encode(f"{conn.login}:{password}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
        secrets += [password, token] if password else [token]
    extra_headers = extra.get("headers")
    if isinstance(extra_headers, Mapping):
        for name, value in extra_headers.items():
            if value is not None:
                headers[str(name)] = scalar_text(value)
                secrets.append(scalar_text(value))
    return headers, secrets


def connection_base(conn: ConnectionInfo) -> str | None:
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


def is_absolute(url: str) -> bool:
    return bool(urlsplit(url).scheme) and "://" in url
