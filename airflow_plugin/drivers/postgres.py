"""The built-in ``postgres`` cursor driver.

A claim is one statement (typically ``UPDATE .. WHERE id = (SELECT .. FOR UPDATE SKIP LOCKED
LIMIT 1) RETURNING ..``, with a stale-claim reclaim CTE in front) committed on its own, so a
claimed row is visible as claimed before the item's work starts.

Connections come from one pool per (connection string, process), shared by every slot and every
cursor loop of the process: a pool per slot is what exhausted ``max_connections`` in the seed's
multi-facility run. The pool holds up to ``options.pool_size`` connections (default 8; a later
loop asking for more grows it). A claim holds its connection for one statement only.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ..hooks.connections import ConnectionNotFound
from ..hooks.postgres import ToolConfigError, is_retryable, resolve_target
from ..hooks.values import jsonable_value
from .base import ClaimSpec, CursorDriverError

__all__ = ["DEFAULT_POOL_SIZE", "PostgresCursorDriver", "close_pools", "pool_size"]

DEFAULT_POOL_SIZE = 8
CONNECT_TIMEOUT = 5
POOL_TIMEOUT = 30.0

_POOLS: dict[tuple[str, int], ConnectionPool] = {}
_LOCK = threading.Lock()


def _shared_pool(conninfo: str, size: int) -> ConnectionPool:
    # Keyed by process too: a forked task process must never share its parent's sockets.
    key = (conninfo, os.getpid())
    with _LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = ConnectionPool(
                conninfo,
                min_size=0,
                max_size=size,
                timeout=POOL_TIMEOUT,
                name=f"noetl-cursor-{len(_POOLS)}",  # never the conninfo: it holds the password
                kwargs={
                    "connect_timeout": CONNECT_TIMEOUT,
                    "autocommit": True,
                    "row_factory": dict_row,
                    "fallback_application_name": "noetl-cursor",
                },
                open=True,
            )
            _POOLS[key] = pool
        elif pool.max_size < size:
            pool.resize(min_size=pool.min_size, max_size=size)
        return pool


def pool_size(conninfo: str) -> int | None:
    """Max size of this process's pool for ``conninfo`` (None: no pool yet)."""
    pool = _POOLS.get((conninfo, os.getpid()))
    return None if pool is None else pool.max_size


def close_pools() -> None:
    with _LOCK:
        pools = [p for (_, pid), p in _POOLS.items() if pid == os.getpid()]
        _POOLS.clear()
    for pool in pools:
        pool.close(timeout=1.0)


def _size(options: Mapping[str, Any]) -> int:
    raw = options.get("pool_size", DEFAULT_POOL_SIZE)
    try:
        size = int(raw)
    except (TypeError, ValueError):
        size = 0
    if size < 1 or isinstance(raw, bool):
        raise CursorDriverError(f"postgres cursor: options.pool_size must be >= 1, got {raw!r}")
    return size


class PostgresCursorDriver:
    kind = "postgres"

    def __init__(self, spec: ClaimSpec) -> None:
        if not spec.claim.strip():
            raise CursorDriverError("postgres cursor: the claim statement is empty")
        try:
            self._target = resolve_target({"auth": spec.auth}, kind="postgres cursor")
        except (ToolConfigError, ConnectionNotFound) as exc:
            raise CursorDriverError(f"postgres cursor: {exc}") from exc
        self._claim = spec.claim
        self._pool = _shared_pool(self._target.conninfo, _size(spec.options))

    @property
    def conninfo(self) -> str:
        return self._target.conninfo

    def claim(self) -> dict[str, Any] | None:
        try:
            row = self._claim_once()
        except psycopg.OperationalError as exc:
            if not is_retryable(exc):
                raise self._failure(exc) from exc
            # A pooled connection the server closed meanwhile (a restart, an administrator's
            # terminate): the pool drops it; one more claim on a fresh connection.
            try:
                row = self._claim_once()
            except (psycopg.Error, PoolTimeout) as again:
                raise self._failure(again) from again
        except (psycopg.Error, PoolTimeout) as exc:
            raise self._failure(exc) from exc
        if row is None:
            return None
        return {str(k): jsonable_value(v) for k, v in row.items()}

    def _claim_once(self) -> Any:
        with self._pool.connection() as conn:
            cursor = conn.execute(self._claim)
            return cursor.fetchone() if cursor.description else None

    def _failure(self, exc: BaseException) -> CursorDriverError:
        if isinstance(exc, PoolTimeout):
            return CursorDriverError(
                f"postgres cursor: no connection to {self._target.display} within "
                f"{POOL_TIMEOUT:.0f}s ({exc})",
                retryable=True,
            )
        message = self._target.scrub(str(exc).strip())
        return CursorDriverError(
            f"postgres cursor: the claim failed on {self._target.display}: {message}",
            retryable=is_retryable(exc),
            code=getattr(exc, "sqlstate", None),
        )

    def close(self) -> None:
        # The pool is shared by the process's slots and loops; it closes at exit.
        self._pool = None  # type: ignore[assignment]


atexit.register(close_pools)
