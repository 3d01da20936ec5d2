"""DuckDB for the tools: which database a config names (``database_path``), a connection with
extension downloads off (``connect``), the rows a statement changed (``changed_rows``), and the
database's ``TableWriter`` (``hooks.tables``) that ``sink`` and ``transfer`` write with.

Without ``database`` every execution gets its own file,
``$NOETL_DATA_DIR/noetldb/duckdb_<execution_id>.duckdb`` (``NOETL_DATA_DIR`` defaults to
``<tmp>/noetl-data``), as NoETL does; without an execution id the database is ``:memory:``.

DuckDB lets one process write a file, with many writer threads under optimistic concurrency:
two transactions that create the same table, or upsert the same key, conflict and one fails
(``TransactionException``), and a second process cannot open the file at all. Parallel loop
items sinking into one table do both. So the writers (``sink``, ``transfer``) take
``writing(database)`` around their connection: one writer transaction per file at a time, the
threads of a process queueing on a lock and processes on an ``flock`` of ``<file>.noetl-lock``,
each for at most ``NOETL_DUCKDB_LOCK_TIMEOUT`` seconds (60), then the retryable lock failure.
Plain ``duckdb`` tool calls take no lock: their SQL is the user's, read concurrently as DuckDB
allows.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from .sqltext import SqlConfigError, positional_markers, quote_ident, quote_table, table_parts
from .tables import TableWriter, folded, upsert_clause
from .values import jsonable_value

__all__ = [
    "CONNECT_CONFIG",
    "DuckDBTableWriter",
    "changed_rows",
    "connect",
    "create_table",
    "database_path",
    "table_columns",
    "writing",
]

logger = logging.getLogger(__name__)

INSERT_CHUNK = 500  # rows per multi-row INSERT: ~10x faster than executemany in DuckDB

# Never fetch extensions from the network; loading one that is installed is fine.
CONNECT_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": True}


def _data_dir() -> Path:
    return Path(os.environ.get("NOETL_DATA_DIR") or Path(tempfile.gettempdir()) / "noetl-data")


def database_path(config: Mapping[str, Any], context: Mapping[str, Any] | None = None) -> str:
    """The database a config names (see the module docstring); parent dirs are created."""
    database = config.get("database")
    if database is None or (isinstance(database, str) and not database.strip()):
        database = config.get("db_path")  # NoETL 5's name (noetl/tools duckdb.rs)
    if database is None or (isinstance(database, str) and not database.strip()):
        execution_id = (context or {}).get("execution_id")
        if execution_id in (None, ""):
            return ":memory:"
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(execution_id))
        database = str(_data_dir() / "noetldb" / f"duckdb_{safe}.duckdb")
    if not isinstance(database, str):
        raise SqlConfigError(f"`database` must be a file path or ':memory:', got {database!r}")
    database = database.strip()
    if database == ":memory:" or database.startswith(":memory:") or ":" in database.split("/")[0]:
        return database  # memory databases and URLs (md:, s3:...) are DuckDB's business
    path = Path(database).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SqlConfigError(
            f"cannot create the directory of database {database!r}: {exc}"
        ) from None
    return str(path)


@contextmanager
def connect(database: str, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection with downloads off; closed on exit (releasing the file lock)."""
    con = duckdb.connect(database, read_only=read_only, config=dict(CONNECT_CONFIG))
    try:
        yield con
    finally:
        con.close()


_WRITE_LOCKS: dict[str, threading.Lock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _lock_timeout() -> float:
    try:
        return max(float(os.environ.get("NOETL_DUCKDB_LOCK_TIMEOUT", "60")), 0.0)
    except ValueError:
        return 60.0


def _lock_failure(database: str, waited: float, holder: str) -> duckdb.IOException:
    # Worded as DuckDB's own lock error, so the tools report it as LOCK_CONFLICT (retryable).
    return duckdb.IOException(
        f'Could not set lock on file "{database}": {holder} still writing it after '
        f"{waited:.0f} s (NOETL_DUCKDB_LOCK_TIMEOUT)"
    )


@contextmanager
def _file_lock(path: str, deadline: float, started: float, database: str) -> Iterator[None]:
    """An exclusive ``flock`` of ``path`` (created), polled until ``deadline``."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        # A folder this process may read the database in but not create files in: the
        # threads of this process still queue; another process meets DuckDB's own lock.
        logger.debug("no inter-process lock %s: %s", path, exc)
        yield
        return
    try:
        pause = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if now >= deadline:
                    raise _lock_failure(database, now - started, "another process is") from None
                time.sleep(min(pause, deadline - now))
                pause = min(pause * 2, 0.2)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def writing(database: str) -> Iterator[None]:
    """Hold ``database`` for one writer transaction (see the module docstring); a memory
    database, new per connection, needs no lock."""
    if database.startswith(":memory:"):
        yield
        return
    is_file = ":" not in database.split("/")[0]
    key = os.path.realpath(database) if is_file else database
    with _WRITE_LOCKS_GUARD:
        lock = _WRITE_LOCKS.setdefault(key, threading.Lock())
    started = time.monotonic()
    timeout = _lock_timeout()
    if not lock.acquire(timeout=timeout):
        raise _lock_failure(
            database, time.monotonic() - started, "another writer of this process is"
        )
    try:
        if is_file:
            with _file_lock(f"{key}.noetl-lock", started + timeout, started, database):
                yield
        else:
            yield
    finally:
        lock.release()


def changed_rows(result: duckdb.DuckDBPyConnection) -> int:
    """Rows a DML statement changed (DuckDB returns them as a one-row ``Count`` result)."""
    description = result.description or []
    if len(description) == 1 and description[0][0] == "Count":
        row = result.fetchone()
        return int(row[0]) if row and row[0] is not None else 0
    return 0


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str] | None:
    """Column name -> upper-case type of ``table``; None when the table does not exist.

    Looked up in ``duckdb_columns()`` rather than with DESCRIBE: a failed statement would abort
    the caller's transaction. Names compare case-insensitively, as DuckDB resolves them.
    """
    parts = [str(part) for part in table_parts(table)]
    if len(parts) == 1:
        where = "database_name = current_database() AND schema_name = current_schema()"
        params: list[Any] = []
    elif len(parts) == 2:
        # `a.t` is schema a of this database, or DuckDB's other reading: database a, schema main
        where = (
            "((database_name = current_database() AND lower(schema_name) = lower(?)) "
            "OR (lower(database_name) = lower(?) AND schema_name = 'main'))"
        )
        params = [parts[0], parts[0]]
    else:
        where = "lower(database_name) = lower(?) AND lower(schema_name) = lower(?)"
        params = parts[:2]
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() "
        f"WHERE {where} AND lower(table_name) = lower(?) ORDER BY column_index",
        [*params, parts[-1]],
    ).fetchall()
    if not rows:
        return None
    return {str(name): str(kind).upper() for name, kind in rows}


def _json_text(value: Any) -> str:
    return json.dumps(jsonable_value(value), ensure_ascii=False)


def _adapt(value: Any, column_type: str | None) -> Any:
    """A Python value DuckDB can bind for a column of ``column_type``."""
    if isinstance(value, (dict, list, tuple)):
        if column_type is None or column_type == "JSON" or column_type.startswith("VARCHAR"):
            return _json_text(value)
        return list(value) if isinstance(value, tuple) else value
    if isinstance(value, memoryview):
        return bytes(value)
    module = type(value).__module__
    if module.startswith(("psycopg", "ipaddress")):
        return jsonable_value(value)  # ranges, inet...: their text
    return value


def _infer_type(values: Sequence[Any]) -> str:
    """A column type for a table the sink creates, from the first non-null value."""
    import datetime as dt
    import decimal

    for value in values:
        if value is None:
            continue
        if isinstance(value, bool):
            return "BOOLEAN"
        if isinstance(value, int):
            return "BIGINT"
        if isinstance(value, float):
            return "DOUBLE"
        if isinstance(value, decimal.Decimal):
            return "DECIMAL(38, 10)"
        if isinstance(value, dt.datetime):
            return "TIMESTAMPTZ" if value.tzinfo else "TIMESTAMP"
        if isinstance(value, dt.date):
            return "DATE"
        if isinstance(value, (dict, list, tuple)):
            return "JSON"
        if isinstance(value, (bytes, bytearray, memoryview)):
            return "BLOB"
        return "VARCHAR"
    return "VARCHAR"


def create_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    keys: Sequence[str] = (),
) -> dict[str, str]:
    """``CREATE TABLE IF NOT EXISTS`` with types inferred from ``rows``; its column types."""
    definitions = [
        f"{quote_ident(column)} {_infer_type([row[i] for row in rows])}"
        for i, column in enumerate(columns)
    ]
    if keys:
        definitions.append(f"PRIMARY KEY ({', '.join(quote_ident(key) for key in keys)})")
    con.execute(f"CREATE TABLE IF NOT EXISTS {quote_table(table)} ({', '.join(definitions)})")
    return table_columns(con, table) or {}


class DuckDBTableWriter(TableWriter):
    """``TableWriter`` on a DuckDB connection: a missing table is created with types inferred
    from the first rows; rows go in multi-row INSERTs of ``INSERT_CHUNK``; within one upsert call
    the last row of a key wins, as if the rows were upserted one by one."""

    kind = "duckdb"
    param_style = "dollar"

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        con.begin()  # DuckDB autocommits each statement otherwise: one transaction per writer

    def columns(self, table: str) -> dict[str, str] | None:
        return table_columns(self.con, table)

    def create(
        self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], keys: Sequence[str]
    ) -> dict[str, str]:
        return create_table(self.con, table, columns, rows, keys)

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
        types = column_types if column_types is not None else (table_columns(self.con, table) or {})
        lower_types = {name.lower(): kind for name, kind in types.items()}
        column_kinds = [lower_types.get(folded(column).lower()) for column in columns]
        quoted = [quote_ident(column) for column in columns]
        if mode == "upsert":
            positions = [columns.index(key) for key in keys]
            unique: dict[tuple[Any, ...], Sequence[Any]] = {}
            for row in rows:
                unique[tuple(json.dumps(row[p], default=str) for p in positions)] = row
            rows = list(unique.values())
        head = f"INSERT INTO {quote_table(table)} ({', '.join(quoted)}) VALUES "
        tail = upsert_clause(columns, keys) if mode == "upsert" else ""
        placeholder = "(" + ", ".join(["?"] * len(columns)) + ")"
        written = 0
        for start in range(0, len(rows), INSERT_CHUNK):
            chunk = rows[start : start + INSERT_CHUNK]
            params = [
                _adapt(value, kind)
                for row in chunk
                for value, kind in zip(row, column_kinds, strict=True)
            ]
            cursor = self.con.execute(head + ", ".join([placeholder] * len(chunk)) + tail, params)
            written += changed_rows(cursor)
        return written

    def delete_all(self, table: str) -> int:
        return changed_rows(self.con.execute(f"DELETE FROM {quote_table(table)}"))

    def execute(self, sql: str, params: Any = None) -> int:
        return changed_rows(self.con.execute(sql, params) if params else self.con.execute(sql))

    def execute_many(self, query: str, rows: Sequence[Sequence[Any]]) -> int:
        self.con.executemany(positional_markers(query, "qmark"), rows)
        return len(rows)

    def custom_param(self, value: Any) -> Any:
        # A mapping goes as JSON text; driver types DuckDB cannot bind go as their text.
        if isinstance(value, Mapping):
            return _json_text(value)
        if type(value).__module__.startswith(("psycopg", "ipaddress")):
            return jsonable_value(value)
        return value

    def commit(self) -> None:
        self.con.commit()

    def rollback(self) -> None:
        try:
            self.con.rollback()
        except duckdb.Error as exc:  # the original error is what matters
            logger.debug("rollback failed: %s", exc)
