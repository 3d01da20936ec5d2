"""``kind: duckdb`` — run SQL on an in-process DuckDB database.

NoETL semantics kept (reference/noetl_dsl.md 3.5, NoETL ``tools/duckdb``):

* SQL from the same aliases as postgres (:func:`.sql.read_sql`), split on ``;``.
* ``database``: a file path (parent directories are created, as NoETL does) or ``:memory:``.
  Without ``database`` NoETL gives every execution its own file,
  ``$NOETL_DATA_DIR/noetldb/duckdb_<execution_id>.duckdb``, so that one step can create a table
  and a later step read it (the corpus relies on that); this runtime does the same, with
  ``NOETL_DATA_DIR`` defaulting to ``<tmp>/noetl-data``. The file is local to the worker: steps
  that share it must run on one machine (LocalExecutor, or a shared volume). Without an
  execution id (a bare tool call) the database is ``:memory:``.
* Result: NoETL's duckdb keys — ``executed_commands`` (statement count), ``command_<n>_rows``
  (row count of statement n, 1-based, when it returned rows) and ``command_<n>_sample`` (its
  first 5 rows as lists) — plus the keys the postgres tool gives for the last statement
  (``status``, ``rows`` as dicts, ``row_count``, ``columns``, ``statement_count``) and
  ``database``. A DML statement without RETURNING gives ``rows: []`` and ``row_count`` = rows
  changed, as on postgres.

As for postgres, all statements of a call run in one transaction (committed at the end, rolled
back on error); a script that manages its own transactions (``BEGIN``/``COMMIT``) runs as written.
The connection is closed after every call so another process can open the file.

This runtime never downloads anything at run time: DuckDB's extension autoinstall is off, and an
``INSTALL x`` of an extension that is not already installed fails before any download, like any
use of a missing extension, with an ``ExtensionNotInstalled`` error naming it. Install extensions
into the worker image instead. A database file locked by another process is a retryable
``IOException`` failure (code ``LOCK_CONFLICT``).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from .outcome import ToolCall, ToolOutcome, tool_error
from .sql import (
    ResultLimits,
    SqlConfigError,
    collect_rows,
    first_keyword,
    has_keyword,
    jsonable_row,
    jsonable_value,
    quote_ident,
    quote_table,
    read_sql,
    render_context,
    result_limits,
    split_statements,
    table_parts,
    tokens,
)

__all__ = [
    "ExtensionNotInstalled",
    "PytzMissing",
    "changed_rows",
    "connect",
    "create_table",
    "database_path",
    "delete_all",
    "execute_statements",
    "failure",
    "run_duckdb",
    "stream",
    "table_columns",
    "write_rows",
]

KIND = "duckdb"
logger = logging.getLogger(__name__)

# Never fetch extensions from the network; loading one that is installed is fine.
CONNECT_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": True}

_SAMPLE_ROWS = 5
_INSERT_CHUNK = 500  # rows per multi-row INSERT: ~10x faster than executemany in DuckDB


class ExtensionNotInstalled(RuntimeError):
    """A DuckDB extension the SQL needs is not installed (and will not be downloaded)."""

    def __init__(self, name: str | None, detail: str = ""):
        self.name = name
        what = f"DuckDB extension {name!r}" if name else "a DuckDB extension"
        message = (
            f"{what} is not installed, and this runtime never downloads extensions at run time "
            "(autoinstall is off): install it into the worker image beforehand"
        )
        if name:
            message += f" (python -c \"import duckdb; duckdb.execute('INSTALL {name}')\")"
        if detail:
            message += f"; DuckDB said: {detail.splitlines()[0]}"
        super().__init__(message)


# --------------------------------------------------------------------------------------------
# Database and connection
# --------------------------------------------------------------------------------------------


def _data_dir() -> Path:
    return Path(os.environ.get("NOETL_DATA_DIR") or Path(tempfile.gettempdir()) / "noetl-data")


def database_path(config: Mapping[str, Any], context: Mapping[str, Any] | None = None) -> str:
    """The database a config names (see the module docstring); parent dirs are created."""
    database = config.get("database")
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


def _installed(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    rows = con.execute(
        "SELECT installed OR loaded FROM duckdb_extensions() "
        "WHERE extension_name = ? OR list_contains(aliases, ?)",
        [name.lower(), name.lower()],
    ).fetchall()
    return bool(rows and rows[0][0])


_TRANSACTION_CONTROL = frozenset(
    {("BEGIN",), ("COMMIT",), ("ROLLBACK",), ("START",), ("END",), ("ABORT",)}
)

_INSTALL = re.compile(r"^\s*+(?:FORCE\s++)?+INSTALL\s++['\"]?+([A-Za-z0-9_]++)", re.IGNORECASE)


def _without_leading_comments(text: str) -> str:
    pieces = list(tokens(text))
    while pieces and (pieces[0][0] == "comment" or not pieces[0][1].strip()):
        pieces.pop(0)
    return "".join(value for _, value in pieces)


# --------------------------------------------------------------------------------------------
# Executing statements
# --------------------------------------------------------------------------------------------


class StatementError(Exception):
    def __init__(self, index: int, cause: BaseException):
        self.index = index
        self.cause = cause
        super().__init__(str(cause))


def changed_rows(result: duckdb.DuckDBPyConnection) -> int:
    """Rows a DML statement changed (DuckDB returns them as a one-row ``Count`` result)."""
    description = result.description or []
    if len(description) == 1 and description[0][0] == "Count":
        row = result.fetchone()
        return int(row[0]) if row and row[0] is not None else 0
    return 0


def execute_statements(
    con: duckdb.DuckDBPyConnection,
    statements: Sequence[str],
    *,
    limits: ResultLimits | None = None,
) -> dict[str, Any]:
    """Run ``statements`` in one transaction; NoETL's keys plus the last statement's rows.

    Raises :class:`StatementError` (after rolling back) whose ``cause`` is the DuckDB error,
    an :class:`ExtensionNotInstalled` or a :class:`PytzMissing`.
    """
    limits = limits or result_limits("DUCKDB")
    own_transactions = any(first_keyword(text) in _TRANSACTION_CONTROL for text in statements)
    result: dict[str, Any] = {
        "status": "success",
        "executed_commands": len(statements),
    }
    last: dict[str, Any] = {"rows": [], "row_count": 0, "columns": []}
    index = -1
    if not own_transactions:
        con.begin()
    try:
        for index, text in enumerate(statements):
            install = _INSTALL.match(_without_leading_comments(text))
            if install:
                name = install.group(1)
                if not _installed(con, name):
                    raise ExtensionNotInstalled(name)
                # Installed already: INSTALL would only try to download it again.
                last = {"rows": [], "row_count": 0, "columns": []}
                continue
            last = _execute_one(con, text, index + 1, result, limits, index == len(statements) - 1)
        if not own_transactions:
            con.commit()
    except BaseException as exc:
        if not own_transactions:
            try:
                con.rollback()
            except duckdb.Error as rollback_error:  # the original error is what matters
                logger.debug("rollback failed: %s", rollback_error)
        if isinstance(exc, Exception):
            raise StatementError(max(index, 0), exc) from exc
        raise
    result.update(last)
    result["statement_count"] = len(statements)
    return result


def _execute_one(
    con: duckdb.DuckDBPyConnection,
    text: str,
    number: int,
    result: dict[str, Any],
    limits: ResultLimits,
    is_last: bool,
) -> dict[str, Any]:
    """Execute one statement; record ``command_<number>_*``; return its rows/row_count/columns."""
    parsed = con.extract_statements(text)
    out: dict[str, Any] = {"rows": [], "row_count": 0, "columns": []}
    for statement in parsed:
        expected = list(statement.expected_result_type)
        returns_rows = bool(expected) and (
            expected[0] == duckdb.ExpectedResultType.QUERY_RESULT
            or has_keyword(statement.query, "RETURNING")
        )
        cursor = con.execute(statement)
        if not returns_rows or cursor.description is None:
            out = {"rows": [], "row_count": changed_rows(cursor), "columns": []}
            continue
        columns = [column[0] for column in cursor.description]
        fetch = _Fetcher(con, statement, cursor)
        if is_last:
            rows, truncation = collect_rows(fetch, columns, limits)
            count = len(rows)
            out = {"rows": rows, "row_count": count, "columns": columns}
            if truncation:
                out.update(truncated=True, truncation=truncation)
        else:
            count = 0
            while batch := fetch(1000):
                count += len(batch)
            out = {"rows": [], "row_count": count, "columns": columns}
        if count:
            result[f"command_{number}_rows"] = count
            result[f"command_{number}_sample"] = [jsonable_row(row) for row in fetch.sample]
    return out


def stream(con: duckdb.DuckDBPyConnection, query: str) -> tuple[list[str], Any]:
    """Run one query; its column names and a ``fetchmany(size)`` for its rows (transfer)."""
    parsed = [
        statement for text in split_statements(query) for statement in con.extract_statements(text)
    ]
    if len(parsed) != 1:
        raise SqlConfigError(f"a source query must be one statement, got {len(parsed)}")
    cursor = con.execute(parsed[0])
    columns = [column[0] for column in cursor.description or []]
    return columns, _Fetcher(con, parsed[0], cursor)


class PytzMissing(RuntimeError):
    """DuckDB needs ``pytz`` to hand back TIMESTAMPTZ values and it is not installed."""


class _Fetcher:
    """``fetchmany`` of a statement's result, keeping the first rows as NoETL's sample.

    DuckDB's Python client needs the ``pytz`` package to turn ``TIMESTAMP WITH TIME ZONE``
    values into datetimes (``now()`` is one). Without it, a SELECT is run again inside a query
    that converts those columns to UTC first; the datetimes get their UTC offset back here, so
    the result is the same ISO text. Other statements (``INSERT ... RETURNING``) cannot be run
    twice: they fail with :class:`PytzMissing`, which says what to install.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, statement: Any, cursor: Any):
        self.con = con
        self.statement = statement
        self.fetchmany = cursor.fetchmany
        self.utc_columns: list[int] = []
        self.sample: list[tuple[Any, ...]] = []

    def __call__(self, size: int) -> list[tuple[Any, ...]]:
        try:
            batch = self.fetchmany(size)
        except duckdb.InvalidInputException as exc:
            # Only the first batch of a result falls back, and only once.
            if "pytz" not in str(exc) or self.utc_columns or self.sample:
                raise
            if self.statement.type != duckdb.StatementType.SELECT:
                raise PytzMissing(
                    "DuckDB needs the Python package pytz to return TIMESTAMP WITH TIME ZONE "
                    "values of this statement: install pytz in the worker environment, or cast "
                    "the value (::TIMESTAMP, ::VARCHAR)"
                ) from None
            self._without_time_zones()
            batch = self.fetchmany(size)
        if self.utc_columns:
            batch = [self._with_utc(row) for row in batch]
        if len(self.sample) < _SAMPLE_ROWS:
            self.sample.extend(batch[: _SAMPLE_ROWS - len(self.sample)])
        return batch

    def _without_time_zones(self) -> None:
        relation = self.con.sql(self.statement.query)
        expressions = []
        for index, (name, kind) in enumerate(zip(relation.columns, relation.types, strict=True)):
            column = quote_ident(name, fold=False)
            kind = str(kind)
            if kind == "TIMESTAMP WITH TIME ZONE":
                expressions.append(f"timezone('UTC', {column}) AS {column}")
                self.utc_columns.append(index)
            elif "WITH TIME ZONE" in kind:
                expressions.append(f"CAST({column} AS VARCHAR) AS {column}")
            else:
                expressions.append(column)
        # A newline before the parenthesis: the statement may end in a `--` comment.
        query = f"SELECT {', '.join(expressions)} FROM (\n{self.statement.query}\n) AS noetl_q"
        self.fetchmany = self.con.execute(query).fetchmany

    def _with_utc(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        values = list(row)
        for index in self.utc_columns:
            value = values[index]
            if isinstance(value, _dt.datetime):
                values[index] = value.replace(tzinfo=_dt.UTC)
        return tuple(values)


# --------------------------------------------------------------------------------------------
# Writing rows (sink, transfer)
# --------------------------------------------------------------------------------------------


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


def _folded(name: str) -> str:
    return quote_ident(name)[1:-1].replace('""', '"')


def write_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    mode: str = "insert",
    keys: Sequence[str] = (),
    column_types: Mapping[str, str] | None = None,
) -> int:
    """Insert ``rows`` into ``table`` (multi-row INSERTs); rows written. Caller owns the
    transaction. Upsert = ``ON CONFLICT (keys) DO UPDATE``; within one call the last row of a
    key wins, as if the rows were upserted one by one."""
    if not rows:
        return 0
    types = column_types if column_types is not None else (table_columns(con, table) or {})
    lower_types = {name.lower(): kind for name, kind in types.items()}
    column_kinds = [lower_types.get(_folded(column).lower()) for column in columns]
    quoted = [quote_ident(column) for column in columns]
    if mode == "upsert":
        positions = [columns.index(key) for key in keys]
        unique: dict[tuple[Any, ...], Sequence[Any]] = {}
        for row in rows:
            unique[tuple(json.dumps(row[p], default=str) for p in positions)] = row
        rows = list(unique.values())
    head = f"INSERT INTO {quote_table(table)} ({', '.join(quoted)}) VALUES "
    tail = ""
    if mode == "upsert":
        key_set = {_folded(key) for key in keys}
        conflict = ", ".join(quote_ident(key) for key in keys)
        updates = [
            f"{q} = EXCLUDED.{q}"
            for column, q in zip(columns, quoted, strict=True)
            if _folded(column) not in key_set
        ]
        tail = f" ON CONFLICT ({conflict}) " + (
            f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING"
        )
    placeholder = "(" + ", ".join(["?"] * len(columns)) + ")"
    written = 0
    for start in range(0, len(rows), _INSERT_CHUNK):
        chunk = rows[start : start + _INSERT_CHUNK]
        params = [
            _adapt(value, kind)
            for row in chunk
            for value, kind in zip(row, column_kinds, strict=True)
        ]
        cursor = con.execute(head + ", ".join([placeholder] * len(chunk)) + tail, params)
        written += changed_rows(cursor)
    return written


def delete_all(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Empty ``table`` inside the caller's transaction (``replace`` mode)."""
    return changed_rows(con.execute(f"DELETE FROM {quote_table(table)}"))


# --------------------------------------------------------------------------------------------
# Failures
# --------------------------------------------------------------------------------------------

_EXTENSION_NAME = (
    re.compile(r"Extension \"(\w+)\" is an existing extension"),
    re.compile(r"required extension '(\w+)"),
    re.compile(r"requires the extension (\w+)"),
    re.compile(r"[Ee]xtension \"(\w+)\""),
)


def _missing_extension(message: str) -> str | None | bool:
    """The extension a DuckDB error says is missing; False when it is about something else."""
    if "xtension" not in message or not any(
        marker in message
        for marker in ("not found", "Failed to download", "Install it first", "Missing Extension")
    ):
        return False
    for pattern in _EXTENSION_NAME:
        match = pattern.search(message)
        if match:
            return match.group(1)
    return None


def failure(
    exc: BaseException, *, kind: str = KIND, statement_index: int | None = None, **extra: Any
) -> ToolOutcome:
    """The failure outcome of a DuckDB error (or a config error)."""
    if isinstance(exc, StatementError):
        statement_index = exc.index
        exc = exc.cause
    details: dict[str, Any] = dict(extra)
    if statement_index is not None:
        details["statement_index"] = statement_index
    if isinstance(exc, SqlConfigError):
        return ToolOutcome.failure(tool_error(kind, "ConfigError", str(exc), **details))
    message = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, ExtensionNotInstalled):
        missing = _missing_extension(message)
        if missing is not False:
            exc = ExtensionNotInstalled(missing or None, message)
    if isinstance(exc, ExtensionNotInstalled):
        if exc.name:
            details["extension"] = exc.name
        return ToolOutcome.failure(
            tool_error(
                kind, "ExtensionNotInstalled", str(exc), code="EXTENSION_NOT_INSTALLED", **details
            )
        )
    locked = isinstance(exc, duckdb.IOException) and (
        "Could not set lock" in message or "Conflicting lock" in message
    )
    retryable = locked or isinstance(exc, duckdb.TransactionException)
    code = "LOCK_CONFLICT" if locked else None
    return ToolOutcome.failure(
        tool_error(kind, type(exc).__name__, message, retryable=retryable, code=code, **details)
    )


# --------------------------------------------------------------------------------------------
# The tool
# --------------------------------------------------------------------------------------------


def run_duckdb(call: ToolCall) -> ToolOutcome:
    """Execute the call's SQL (see the module docstring)."""
    config = call.config
    try:
        statements = read_sql(config, context=lambda: render_context(call))
        database = database_path(config, call.context)
    except SqlConfigError as exc:
        return failure(exc)
    try:
        with connect(database) as con:
            if not statements:
                result = {
                    "status": "success",
                    "executed_commands": 0,
                    "rows": [],
                    "row_count": 0,
                    "columns": [],
                    "statement_count": 0,
                }
            else:
                result = execute_statements(con, statements)
    except (duckdb.Error, StatementError, ExtensionNotInstalled) as exc:
        return failure(exc, database=database)
    result["database"] = database
    return ToolOutcome.success(result)
