"""PostgreSQL connections for the tools and the cursor driver: the target an Airflow Connection
names (``resolve_target``), one small ``psycopg_pool`` pool per target and process
(``connect``), and which failures are worth retrying (``is_retryable``).

``auth`` names the connection (host, port, login, password, schema = database, libpq extras);
inline ``db_*`` credentials are refused, as NoETL's server and worker refuse them. Pools are
small (``NOETL_POSTGRES_POOL_MAX_SIZE``, 4), created on first use, checked before use when idle,
thrown away whole when a connection fails; a server that cannot be reached fails within
``NOETL_POSTGRES_CONNECT_TIMEOUT`` seconds (5) with the connection error itself. The password is
registered with Airflow's log masker and scrubbed from every message.

``PostgresTableWriter`` is the database's ``TableWriter`` (``hooks.tables``): what ``sink`` and
``transfer`` write with.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq
from psycopg.conninfo import make_conninfo
from psycopg.types.datetime import DateLoader, TimestampLoader, TimestamptzLoader
from psycopg.types.json import Json, Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import NoetlConfigError
from .connections import auth_name, get_connection, mask
from .sqltext import positional_markers, quote_ident, quote_table
from .tables import TableWriter, folded, upsert_clause
from .values import jsonable_value

__all__ = [
    "CONNECT_TIMEOUT",
    "INLINE_CONNECTION_KEYS",
    "KIND",
    "PgTarget",
    "PostgresTableWriter",
    "ToolConfigError",
    "close_pools",
    "connect",
    "is_retryable",
    "pool_stats",
    "resolve_target",
    "rollback_quietly",
    "table_columns",
]

KIND = "postgres"
logger = logging.getLogger(__name__)

INLINE_CONNECTION_KEYS = (
    "db_host",
    "db_port",
    "db_user",
    "db_password",
    "db_name",
    "db_conn_string",
)

_RETRYABLE_SQLSTATES = frozenset({"40001", "40P01", "57P01", "57P02", "57P03", "53300"})
_CONNECTION_FIELDS = frozenset({"host", "port", "user", "password", "dbname"})


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return float(raw) if raw and raw.strip() else default
    except ValueError:
        logger.warning("ignoring %s=%r: not a number (using %s)", name, raw, default)
        return default


CONNECT_TIMEOUT = max(2, int(_env_number("NOETL_POSTGRES_CONNECT_TIMEOUT", 5)))
POOL_MAX_SIZE = max(1, int(_env_number("NOETL_POSTGRES_POOL_MAX_SIZE", 4)))
POOL_TIMEOUT = max(1.0, _env_number("NOETL_POSTGRES_POOL_TIMEOUT_SECONDS", 30.0))
APPLICATION_NAME = "noetl-airflow"


class ToolConfigError(NoetlConfigError):
    """The tool config cannot work (no auth, inline credentials...): a ``ConfigError`` outcome."""


# --------------------------------------------------------------------------------------------
# Connection target
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PgTarget:
    """Where to connect: a libpq connection string built from an Airflow Connection."""

    conn_id: str
    conninfo: str = field(repr=False)  # holds the password: never log or show it
    display: str = ""  # user@host:port/dbname, for messages
    password: str | None = field(default=None, repr=False)

    def scrub(self, text: str) -> str:
        """``text`` with the password replaced (defence in depth: libpq never prints it)."""
        if self.password and len(self.password) >= 3:
            text = text.replace(self.password, "***")
        return text


_LIBPQ_KEYWORDS: frozenset[str] | None = None


def _libpq_keywords() -> frozenset[str]:
    global _LIBPQ_KEYWORDS
    if _LIBPQ_KEYWORDS is None:
        _LIBPQ_KEYWORDS = frozenset(opt.keyword.decode() for opt in pq.Conninfo.get_defaults())
    return _LIBPQ_KEYWORDS


def _auth_value(config: Mapping[str, Any], step_input: Mapping[str, Any]) -> Any:
    for source in (config, step_input):
        for key in ("auth", "credential", "credentials"):
            value = source.get(key)
            if value not in (None, "", {}):
                return value
    return None


def resolve_target(
    config: Mapping[str, Any], step_input: Mapping[str, Any] | None = None, *, kind: str = KIND
) -> PgTarget:
    """The connection ``config`` names with ``auth`` (raises ToolConfigError/ConnectionNotFound)."""
    step_input = step_input or {}
    inline = [key for key in INLINE_CONNECTION_KEYS if key in config or key in step_input]
    if inline:
        raise ToolConfigError(
            f"{kind} does not accept inline connection fields ({', '.join(inline)}): "
            "name an Airflow Connection with `auth: <conn_id>`"
        )
    auth = _auth_value(config, step_input)
    if auth is None:
        raise ToolConfigError(
            f"{kind} needs `auth`: the id of an Airflow Connection to the database "
            "(NoETL refuses a postgres call without it)"
        )
    name = auth_name(auth)
    if name is None:
        raise ToolConfigError(
            f"`auth` of {kind} names no connection (expected a name, or a mapping with "
            "`credential`/`key`/`name`)"
        )
    info = get_connection(name)
    cached = _TARGETS.get(name)
    if cached is not None and cached[0] is info:
        return cached[1]  # the same lookup (connections caches it briefly): the same target
    mask(info.password)
    params: dict[str, Any] = {
        "host": info.host or None,
        "port": info.port or None,
        "user": info.login or None,
        "password": info.password or None,
        "dbname": info.schema or None,
    }
    keywords = _libpq_keywords()
    for key, value in (info.extra or {}).items():
        # Airflow extras also hold hook options (cursor, iam, ...): libpq keywords only.
        if key in keywords and key not in _CONNECTION_FIELDS and value not in (None, ""):
            params[key] = str(value).lower() if isinstance(value, bool) else str(value)
    conninfo = make_conninfo("", **{k: v for k, v in params.items() if v is not None})
    display = (
        f"{info.login or ''}@{info.host or 'localhost'}:{info.port or 5432}/{info.schema or ''}"
    )
    target = PgTarget(conn_id=name, conninfo=conninfo, display=display, password=info.password)
    _TARGETS[name] = (info, target)
    return target


# conn id -> (the ConnectionInfo it was built from, the target): building conninfo is a third of a
# small statement's cost.
_TARGETS: dict[str, tuple[Any, PgTarget]] = {}


# --------------------------------------------------------------------------------------------
# Connections and pools
# --------------------------------------------------------------------------------------------


class _LenientMixin:
    """Dates PostgreSQL has and Python has not (``infinity``, year 10000+, BC) load as text."""

    def load(self, data: Any) -> Any:
        try:
            return super().load(data)  # type: ignore[misc]
        except (psycopg.DataError, ValueError, OverflowError):
            return bytes(data).decode("utf-8", "replace")


class _LenientDateLoader(_LenientMixin, DateLoader):
    pass


class _LenientTimestampLoader(_LenientMixin, TimestampLoader):
    pass


class _LenientTimestamptzLoader(_LenientMixin, TimestamptzLoader):
    pass


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.adapters.register_loader("date", _LenientDateLoader)
    conn.adapters.register_loader("timestamp", _LenientTimestampLoader)
    conn.adapters.register_loader("timestamptz", _LenientTimestamptzLoader)


class _ConnectErrors:
    """The last connection error of a pool's background connects, with its time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[float, BaseException] | None = None

    def record(self, exc: BaseException) -> None:
        with self._lock:
            self._last = (time.monotonic(), exc)

    def since(self, started: float) -> BaseException | None:
        with self._lock:
            if self._last is not None and self._last[0] >= started:
                return self._last[1]
            return None


def _recording_connection_class(errors: _ConnectErrors) -> type[psycopg.Connection[Any]]:
    """A Connection class that reports failed connects to ``errors``.

    The pool connects in its own threads and, on failure, only retries with backoff; the caller
    would wait the whole pool timeout and then learn nothing. Recording the error lets the
    caller fail at once with the real reason (refused, unknown host, bad password...).
    """

    class _RecordingConnection(psycopg.Connection):  # type: ignore[type-arg]
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:  # type: ignore[override]
            try:
                return super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                errors.record(exc)
                raise

    return _RecordingConnection


@dataclass
class _PoolEntry:
    key: tuple[str, int]
    pool: ConnectionPool
    errors: _ConnectErrors


# A health check is one more round trip per checkout; a connection returned moments ago is
# almost surely alive (and if not, the failure is a retryable error and the pool drops it).
CHECK_AFTER_IDLE_SECONDS = 1.0
_last_used: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def _mark_used(conn: Any) -> None:
    _last_used[conn] = time.monotonic()


def _check_if_idle(conn: Any) -> None:
    last = _last_used.get(conn)
    if last is not None and time.monotonic() - last < CHECK_AFTER_IDLE_SECONDS:
        return
    ConnectionPool.check_connection(conn)


_POOLS: dict[tuple[str, int], _PoolEntry] = {}
_POOLS_LOCK = threading.Lock()


def _pool_entry(target: PgTarget) -> _PoolEntry:
    # Keyed by process too: a forked worker must never share its parent's sockets.
    key = (target.conninfo, os.getpid())
    with _POOLS_LOCK:
        entry = _POOLS.get(key)
        if entry is not None:
            return entry
        errors = _ConnectErrors()
        digest = hashlib.sha256(target.conninfo.encode()).hexdigest()[:10]
        pool = ConnectionPool(
            target.conninfo,
            min_size=0,  # connect on demand: no background reconnect loop for an idle DSN
            max_size=POOL_MAX_SIZE,
            timeout=POOL_TIMEOUT,
            max_idle=300.0,
            reconnect_timeout=float(CONNECT_TIMEOUT * 2),
            num_workers=2,
            name=f"noetl-pg-{digest}",  # never the conninfo: it holds the password
            kwargs={
                "connect_timeout": CONNECT_TIMEOUT,
                "fallback_application_name": APPLICATION_NAME,
            },
            connection_class=_recording_connection_class(errors),
            configure=_configure,
            check=_check_if_idle,
            open=True,
        )
        entry = _PoolEntry(key=key, pool=pool, errors=errors)
        _POOLS[key] = entry
        return entry


def _discard(entry: _PoolEntry) -> None:
    """Forget a pool whose server failed; close it in the background (workers may be busy)."""
    with _POOLS_LOCK:
        if _POOLS.get(entry.key) is entry:
            del _POOLS[entry.key]
        else:
            return
    threading.Thread(
        target=_close_quietly, args=(entry.pool,), name="noetl-pg-pool-close", daemon=True
    ).start()


def _close_quietly(pool: ConnectionPool, timeout: float = CONNECT_TIMEOUT) -> None:
    try:
        pool.close(timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - closing a dead pool must not fail anything
        logger.debug("closing pool %s: %s", pool.name, exc)


def close_pools() -> None:
    """Close every pool of this process (tests, shutdown)."""
    with _POOLS_LOCK:
        entries = [entry for key, entry in _POOLS.items() if key[1] == os.getpid()]
        for entry in entries:
            del _POOLS[entry.key]
    for entry in entries:
        _close_quietly(entry.pool, timeout=1.0)


atexit.register(close_pools)


def pool_stats(target: PgTarget) -> dict[str, int] | None:
    """The pool statistics for ``target`` in this process (None when it has no pool)."""
    with _POOLS_LOCK:
        entry = _POOLS.get((target.conninfo, os.getpid()))
    return None if entry is None else dict(entry.pool.get_stats())


def _getconn(entry: _PoolEntry, target: PgTarget) -> psycopg.Connection[Any]:
    started = time.monotonic()
    deadline = started + POOL_TIMEOUT
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PoolTimeout(
                f"no connection to {target.display} within {POOL_TIMEOUT:g} s "
                f"(all {POOL_MAX_SIZE} pooled connections of this process are busy)"
            )
        try:
            return entry.pool.getconn(timeout=min(0.25, remaining))
        except PoolTimeout:
            failed = entry.errors.since(started)
            if failed is not None:
                _discard(entry)
                raise failed.with_traceback(None) from None


def _is_connection_failure(conn: psycopg.Connection[Any] | None, exc: BaseException) -> bool:
    if conn is not None and (conn.closed or conn.broken):
        return True
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        return sqlstate.startswith("08") or sqlstate in {"57P01", "57P02", "57P03"}
    return isinstance(exc, psycopg.OperationalError)


@contextmanager
def connect(target: PgTarget, *, pooled: bool = True) -> Iterator[psycopg.Connection[Any]]:
    """A connection to ``target`` (from this process's pool unless ``pooled`` is false).

    The connection is not in autocommit mode; the caller commits. A connection that broke is
    dropped and, pooled, its whole pool with it (its other connections went with the server).
    """
    if not pooled:
        conn = psycopg.connect(
            target.conninfo,
            connect_timeout=CONNECT_TIMEOUT,
            fallback_application_name=APPLICATION_NAME,
        )
        _configure(conn)
        try:
            yield conn
        finally:
            conn.close()
        return
    entry = _pool_entry(target)
    conn = _getconn(entry, target)
    try:
        yield conn
    except BaseException as exc:
        if _is_connection_failure(conn, exc):
            _discard(entry)
        raise
    finally:
        try:
            # Not a pool `reset` callback: that runs in a pool worker, and the connection would
            # come back too late for the next checkout, which would then open another one.
            _mark_used(conn)
            entry.pool.putconn(conn)  # rolls back an open transaction, drops a broken conn
        except Exception as exc:  # noqa: BLE001 - a pool closed meanwhile closes the conn itself
            logger.debug("returning a connection to %s: %s", entry.pool.name, exc)


def is_retryable(exc: BaseException) -> bool:
    """Whether trying again may help (see the module docstring)."""
    if isinstance(exc, PoolTimeout):
        return True
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        return sqlstate.startswith("08") or sqlstate in _RETRYABLE_SQLSTATES
    return isinstance(exc, psycopg.OperationalError)


def rollback_quietly(conn: psycopg.Connection[Any]) -> None:
    """Roll back if the connection still works; a failed rollback is logged, not raised (the
    error that led here is the one worth reporting)."""
    if conn.closed or conn.broken:
        return
    try:
        conn.rollback()
    except psycopg.Error as exc:  # the original error is what matters
        logger.debug("rollback failed: %s", exc)


# Writing rows (sink, transfer)
# --------------------------------------------------------------------------------------------

_COLUMNS_SQL = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), t.typcategory
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""


def table_columns(conn: psycopg.Connection[Any], table: str) -> dict[str, str]:
    """Column name -> type of ``table`` (``schema.table``); 42P01 when it does not exist."""
    with conn.cursor() as cur:
        cur.execute(_COLUMNS_SQL, [quote_table(table)])
        return {
            name: ("array" if category == "A" else type_name)
            for name, type_name, category in cur.fetchall()
        }


def _adapter(column_type: str | None) -> Any:
    """How a dict/list value is sent to a column of ``column_type``."""
    if column_type == "jsonb":
        return Jsonb
    if column_type == "json":
        return Json
    if column_type == "array":
        return None  # a Python list is a PostgreSQL array
    # text and anything else: the JSON text, as NoETL's sink wrote it
    return lambda value: json.dumps(value, default=str)


def _adapt(value: Any, adapter: Any) -> Any:
    if adapter is not None and isinstance(value, (dict, list, tuple)):
        return adapter(list(value) if isinstance(value, tuple) else value)
    return value


def insert_sql(
    table: str,
    columns: Sequence[str],
    *,
    mode: str = "insert",
    keys: Sequence[str] = (),
) -> str:
    """``INSERT INTO "t" ("a", "b") VALUES (%s, %s)`` with ``ON CONFLICT`` for upsert."""
    quoted = [quote_ident(column) for column in columns]
    sql = (
        f"INSERT INTO {quote_table(table)} ({', '.join(quoted)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))})"
    )
    return sql + upsert_clause(columns, keys) if mode == "upsert" else sql


class PostgresTableWriter(TableWriter):
    """``TableWriter`` on a psycopg connection: the table must exist (42P01 otherwise); dict/list
    values go to json/jsonb columns as JSON, to array columns as arrays, to other columns as
    JSON text; rows go in one ``executemany``."""

    kind = "postgres"
    param_style = "pyformat"

    def __init__(self, conn: psycopg.Connection[Any]):
        self.conn = conn

    def columns(self, table: str) -> dict[str, str]:
        return table_columns(self.conn, table)

    def write(
        self,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        *,
        mode: str = "insert",
        keys: Sequence[str] = (),
        column_types: Mapping[str, str] | None = None,
    ) -> int:
        if not rows:
            return 0
        types = column_types if column_types is not None else self.columns(table)
        adapters = [_adapter(types.get(folded(column))) for column in columns]
        sql = insert_sql(table, columns, mode=mode, keys=keys)
        params = [
            [_adapt(value, adapter) for value, adapter in zip(row, adapters, strict=True)]
            for row in rows
        ]
        with self.conn.cursor() as cur:
            cur.executemany(sql, params)
            return max(cur.rowcount, 0)

    def delete_all(self, table: str) -> int:
        with self.conn.cursor() as cur:
            cur.execute(f"DELETE FROM {quote_table(table)}")
            return max(cur.rowcount, 0)

    def execute(self, sql: str, params: Any = None) -> int:
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return max(cur.rowcount, 0) if cur.description is None else 0

    def execute_many(self, query: str, rows: Sequence[Sequence[Any]]) -> int:
        # `?` markers become `%s` only when the query has none of psycopg's own (a `?` may be
        # the jsonb key operator).
        if "%s" not in query:
            query = positional_markers(query, "format")
        with self.conn.cursor() as cur:
            cur.executemany(query, rows)
            return max(cur.rowcount, 0)

    def custom_param(self, value: Any) -> Any:
        # A mapping goes as JSON text (json/jsonb/text columns accept it).
        if isinstance(value, Mapping):
            return json.dumps(jsonable_value(value), ensure_ascii=False)
        return value

    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        rollback_quietly(self.conn)
