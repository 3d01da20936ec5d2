"""The built-in ``postgres`` cursor driver.

A claim is one statement (typically ``UPDATE .. WHERE id = (SELECT .. FOR UPDATE SKIP LOCKED
LIMIT 1) RETURNING ..``, with a stale-claim reclaim CTE in front) committed on its own, so a
claimed row is visible as claimed before the item's work starts.

Connections come from one pool per (connection string, process), shared by every slot and every
cursor loop of the process: a pool per slot is what exhausted ``max_connections`` in the seed's
multi-facility run. The pool holds up to ``options.pool_size`` connections (default 8; a later
loop asking for more grows it). A claim holds its connection for one transaction only.

Guarantee (``guarantee``): every claim takes a lease (``postgres_lease.py``: claim id + deadline,
``options.lease_seconds``, default 30) that the slot's heartbeat renews while the item runs. The
item's ``postgres`` calls against the cursor's own database run in one transaction with the
completion, which commits only while the claim's token still holds (``hooks/pg_item.py``): work
in that database is done **exactly once**. Effects outside it (HTTP, other databases, sinks) are
at least once; the completion itself is idempotent by item key (a second completion of an item is
refused and recorded). ``options.lease_seconds: 0`` turns leases off (the plain at-least-once
claim of a driver without leases).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from ..hooks.connections import ConnectionNotFound
from ..hooks.pg_item import ItemTransaction, enlisting
from ..hooks.postgres import ToolConfigError, is_retryable, resolve_target
from ..hooks.values import jsonable_value
from .base import ClaimSpec, CursorDriverError, Lease
from .postgres_lease import DEFAULT_TABLE, LeaseSql

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_POOL_SIZE",
    "GUARANTEE",
    "PostgresCursorDriver",
    "close_pools",
    "pool_size",
]

DEFAULT_POOL_SIZE = 8
DEFAULT_LEASE_SECONDS = 30.0
# Claims in a row that return an item another live claim holds (or one already done) before the
# driver gives up: the claim statement keeps handing out items it should not.
MAX_SKIPPED_CLAIMS = 1000
GUARANTEE = (
    "exactly once for the item's postgres work in the cursor's own database (committed with the "
    "completion, fenced by the claim's lease); at least once for effects outside it, whose "
    "completion is refused and recorded when another claim completed the item"
)
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


def _seconds(options: Mapping[str, Any], name: str, default: float | None) -> float | None:
    raw = options.get(name, default)
    if raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if value < 0 or isinstance(raw, bool):
        raise CursorDriverError(
            f"postgres cursor: options.{name} must be seconds >= 0, got {raw!r}"
        )
    return value


def _key_columns(options: Mapping[str, Any]) -> list[str] | None:
    raw = options.get("key")
    if raw is None:
        return None
    columns = [raw] if isinstance(raw, str) else raw
    if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
        raise CursorDriverError(
            f"postgres cursor: options.key must be a column name or a list of them, got {raw!r}"
        )
    return columns


class PostgresCursorDriver:
    kind = "postgres"
    guarantee = GUARANTEE

    def __init__(self, spec: ClaimSpec) -> None:
        if not spec.claim.strip():
            raise CursorDriverError("postgres cursor: the claim statement is empty")
        try:
            self._target = resolve_target({"auth": spec.auth}, kind="postgres cursor")
        except (ToolConfigError, ConnectionNotFound) as exc:
            raise CursorDriverError(f"postgres cursor: {exc}") from exc
        self._claim = spec.claim
        options = spec.options
        self.lease_seconds = _seconds(options, "lease_seconds", DEFAULT_LEASE_SECONDS) or 0.0
        self.leasing = self.lease_seconds > 0
        self._idle_timeout = _seconds(options, "idle_timeout", None)
        self._key = _key_columns(options)
        self._scope = spec.scope or f"{spec.step}:{uuid.uuid5(uuid.NAMESPACE_OID, spec.claim)}"
        table = options.get("lease_table", DEFAULT_TABLE)
        if not isinstance(table, str) or not table.strip():
            raise CursorDriverError(
                f"postgres cursor: options.lease_table must be a name, got {table!r}"
            )
        self._sql = LeaseSql(table)
        self._items: dict[str, ItemTransaction] = {}
        self.skipped = 0  # claims that returned an item another claim held (or had done)
        self._pool = _shared_pool(self._target.conninfo, _size(options))
        if self.leasing:
            self._with_retry(lambda conn: self._sql.ensure(conn), "creating the lease table")

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

    # Leases --------------------------------------------------------------------------------

    def _with_retry(self, work: Any, doing: str = "the claim") -> Any:
        """``work(conn)`` on a pooled connection, again (up to three times) when the pooled one
        had died meanwhile or the server rolled the transaction back (a deadlock between two
        claims' stale-claim clauses); CursorDriverError otherwise."""
        for attempt in (1, 2, 3):
            try:
                with self._pool.connection() as conn:
                    return work(conn)
            except psycopg.OperationalError as exc:
                if attempt == 3 or not is_retryable(exc):
                    raise self._failure(exc, doing) from exc
            except (psycopg.Error, PoolTimeout) as exc:
                raise self._failure(exc, doing) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _item_key(self, row: Mapping[str, Any]) -> str:
        if self._key is not None:
            missing = [c for c in self._key if c not in row]
            if missing:
                raise CursorDriverError(
                    f"postgres cursor: options.key column(s) {missing} not in the claimed row "
                    f"(it has {sorted(row)})"
                )
            values = [row[c] for c in self._key]
        elif "id" in row:
            values = [row["id"]]
        else:
            values = [[k, row[k]] for k in sorted(row)]  # the whole row
        return json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)

    def _params(self, lease: Lease) -> dict[str, Any]:
        return {
            "scope": self._scope,
            "item": lease.key,
            "token": lease.token,
            "secs": self.lease_seconds,
        }

    def claim_lease(self, slot: int | str = "") -> Lease | None:
        """One item with a fresh lease: an expired lease first, else the claim statement's row."""
        if not self.leasing:
            row = self.claim()
            if row is None:
                return None
            return Lease(
                row=row, key=self._item_key(row), token="", deadline=float("inf"), seconds=0.0
            )
        for _ in range(MAX_SKIPPED_CLAIMS):
            token = str(uuid.uuid4())
            lease = self._with_retry(lambda conn, token=token: self._lease_once(conn, token, slot))
            if lease is not False:
                return lease
            self.skipped += 1
        raise CursorDriverError(
            f"postgres cursor: {MAX_SKIPPED_CLAIMS} claims in a row returned items that another "
            "claim holds or that are done: the claim statement must not return a completed item "
            "(mark it done in the item's own SQL)"
        )

    def _lease_once(self, conn: Any, token: str, slot: int | str) -> Lease | None | bool:
        params = {
            "scope": self._scope,
            "token": token,
            "slot": str(slot),
            "secs": self.lease_seconds,
        }
        with conn.transaction():
            again = conn.execute(self._sql.redeliver, params).fetchone()
            if again is not None:
                return Lease(
                    row=dict(again["row"]),
                    key=again["item"],
                    token=token,
                    deadline=again["until"],
                    seconds=self.lease_seconds,
                    claims=again["claims"],
                )
            cursor = conn.execute(self._claim)
            found = cursor.fetchone() if cursor.description else None
            if found is None:
                return None
            row = {str(k): jsonable_value(v) for k, v in found.items()}
            key = self._item_key(row)
            taken = conn.execute(
                self._sql.acquire, {**params, "item": key, "row": Jsonb(row)}
            ).fetchone()
            if taken is None:
                # Held by a live claim (the claim's stale-claim clause fired on an item a slot
                # still works on), or done: the claim statement's own update stays committed
                # (rolling it back would hand out the same item again), the item is not run.
                return False
            return Lease(
                row=row,
                key=key,
                token=token,
                deadline=taken["until"],
                seconds=self.lease_seconds,
                claims=taken["claims"],
            )

    def renew(self, lease: Lease) -> bool:
        """Push the lease's deadline; False when the token no longer holds (another claim took
        the item, or it is done)."""
        if not self.leasing:
            return True
        found = self._with_retry(
            lambda conn: conn.execute(self._sql.renew, self._params(lease)).fetchone(),
            "renewing a lease",
        )
        if found is None:
            return False
        lease.deadline = found["until"]
        return True

    def held_wait(self) -> float | None:
        """Seconds until the next lease of this loop start that a slot still holds expires
        (<= 0: expired now); None when none is held."""
        if not self.leasing:
            return None
        found = self._with_retry(
            lambda conn: conn.execute(self._sql.next_expiry, {"scope": self._scope}).fetchone(),
            "reading the leases",
        )
        return None if found is None or found["wait"] is None else float(found["wait"])

    def forget(self) -> int:
        """Delete this loop start's lease rows (the loop is over); the number deleted."""
        if not self.leasing:
            return 0
        deleted = self._with_retry(
            lambda conn: conn.execute(self._sql.forget, {"scope": self._scope}).rowcount,
            "deleting the loop's leases",
        )
        return int(deleted or 0)

    @contextmanager
    def item(self, lease: Lease) -> Iterator[_ItemWork]:
        """The item's transaction, enlisted for its task chain (see ``hooks/pg_item.py``)."""
        tx = ItemTransaction(self._target, idle_timeout=self._idle_timeout)
        self._items[lease.token] = tx
        try:
            with enlisting(tx):
                yield _ItemWork(self, lease, tx)
        finally:
            self._items.pop(lease.token, None)
            tx.close()

    def stop(self, lease: Lease, reason: str) -> None:
        """From the heartbeat thread: the lease is lost; cancel the item's SQL."""
        tx = self._items.get(lease.token)
        if tx is not None:
            tx.abandon(reason)

    def _claim_once(self) -> Any:
        with self._pool.connection() as conn:
            cursor = conn.execute(self._claim)
            return cursor.fetchone() if cursor.description else None

    def _failure(self, exc: BaseException, doing: str = "the claim") -> CursorDriverError:
        if isinstance(exc, PoolTimeout):
            return CursorDriverError(
                f"postgres cursor: no connection to {self._target.display} within "
                f"{POOL_TIMEOUT:.0f}s ({exc})",
                retryable=True,
            )
        message = self._target.scrub(str(exc).strip())
        return CursorDriverError(
            f"postgres cursor: {doing} failed on {self._target.display}: {message}",
            retryable=is_retryable(exc),
            code=getattr(exc, "sqlstate", None),
        )

    def close(self) -> None:
        # The pool is shared by the process's slots and loops; it closes at exit.
        self._pool = None  # type: ignore[assignment]


class _ItemWork:
    """What the runtime holds while an item runs: ``complete()`` commits the item's writes in
    the cursor's database with the lease's ``held -> done`` only while its token holds."""

    def __init__(self, driver: PostgresCursorDriver, lease: Lease, tx: ItemTransaction) -> None:
        self._driver, self._lease, self._tx = driver, lease, tx

    def complete(self) -> bool:
        if not self._driver.leasing:
            return self._tx.finish("SELECT 1", {})
        try:
            return self._tx.finish(self._driver._sql.complete, self._driver._params(self._lease))
        except psycopg.Error as exc:
            raise self._driver._failure(exc, "completing an item") from exc

    def fail(self) -> None:
        """The item's chain failed: roll its writes back and mark its lease failed (a claim
        statement that hands it out again may retry it; the lease path does not)."""
        self._tx.close()
        if self._driver.leasing:
            self._driver._with_retry(
                lambda conn: conn.execute(
                    self._driver._sql.fail, self._driver._params(self._lease)
                ),
                "releasing a failed item",
            )


atexit.register(close_pools)
