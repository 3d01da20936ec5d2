"""``auth: <name>``: credentials resolved through Airflow's secrets backends.

A playbook names a credential (``auth: pg_local``); the runtime looks it up as an Airflow
Connection, so everything Airflow users already configure works: connections in the metadata DB,
``AIRFLOW_CONN_<ID>`` environment variables (URI or JSON, usable with no Airflow DB at all) and
any secrets backend (Vault, AWS, GCP...). Airflow's own lookup also registers the password and
secret extras with its log masker, so they never reach a task log.

NoETL writes ``auth`` as a name, as ``{name: ...}``/``{credential: ...}``/``{key: ...}``, or as a
dict of aliases (``{pg: {type: postgres, credential: pg_local}}``); :func:`auth_name` reads all of
them. A missing connection is a :class:`ConnectionNotFound` that names the connection, the ways to
define it, and never the value of anything.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import NoetlNotFound

__all__ = [
    "ConnectionInfo",
    "ConnectionNotFound",
    "auth_name",
    "clear_cache",
    "get_connection",
    "mask",
]

_NAME_KEYS = ("name", "credential", "key", "conn_id", "connection")


class ConnectionNotFound(NoetlNotFound):
    def __init__(self, name: str, cause: BaseException | None = None):
        self.name = name
        env = _env_name(name)
        detail = f" ({type(cause).__name__})" if cause is not None else ""
        super().__init__(
            f"connection {name!r} is not defined{detail}: define it as an Airflow Connection "
            f"(UI, `airflow connections add`, a secrets backend) or the environment variable {env}"
        )


@dataclass(frozen=True)
class ConnectionInfo:
    """The fields of an Airflow Connection the tools use (a plain, picklable snapshot)."""

    conn_id: str
    conn_type: str | None = None
    host: str | None = None
    port: int | None = None
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    schema: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)


def auth_name(auth: Any) -> str | None:
    """The connection name an ``auth`` value refers to, or None when it names none."""
    if isinstance(auth, str):
        return auth.strip() or None
    if isinstance(auth, Mapping):
        for key in _NAME_KEYS:
            value = auth.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        # A dict of aliases with exactly one entry: ``{pg: {type: postgres, credential: x}}``.
        nested = [v for v in auth.values() if isinstance(v, Mapping)]
        if len(nested) == 1 and len(auth) == 1:
            return auth_name(nested[0])
    return None


# Airflow's lookup initialises the secrets backends on every call (~0.35 ms): a step that runs
# thousands of queries would spend more time finding its credentials than using them. Lookups are
# kept briefly; the key includes the AIRFLOW_CONN_<ID> value, so a changed env definition is seen
# at once, and a rotated secret in a backend within CACHE_SECONDS.
CACHE_SECONDS = 30.0
_cache: dict[tuple[str, str | None], tuple[float, ConnectionInfo]] = {}
_cache_lock = threading.Lock()


@functools.lru_cache(maxsize=256)  # looked up on every call of a SQL tool
def _env_name(name: str) -> str:
    return "AIRFLOW_CONN_" + "".join(c if c.isalnum() else "_" for c in name).upper()


def get_connection(name: str) -> ConnectionInfo:
    """Look ``name`` up through Airflow (env vars, secrets backends, the metadata DB via the API)."""
    key = (name, os.environ.get(_env_name(name)))
    now = time.monotonic()
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and now - cached[0] < CACHE_SECONDS:
        return cached[1]
    info = _lookup(name)
    with _cache_lock:
        _cache[key] = (now, info)
    return info


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def _lookup(name: str) -> ConnectionInfo:
    from ..compat import get_connection as airflow_connection

    try:
        conn = airflow_connection(name)
    except Exception as exc:  # noqa: BLE001 - AirflowNotFoundException, or a backend that is down
        raise ConnectionNotFound(name, exc) from None
    try:
        extra = conn.extra_dejson
    except Exception:  # noqa: BLE001 - a malformed extra is treated as none
        extra = {}
    return ConnectionInfo(
        conn_id=name,
        conn_type=conn.conn_type,
        host=conn.host,
        port=conn.port,
        login=conn.login,
        password=conn.password,
        schema=conn.schema,
        extra=dict(extra or {}),
    )


def mask(value: Any) -> None:
    """Register a secret with Airflow's log masker (a no-op outside Airflow)."""
    if not value or not isinstance(value, str):
        return
    from ..compat import mask_secret

    mask_secret(value)
