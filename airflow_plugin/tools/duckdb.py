"""``kind: duckdb`` — run SQL on an in-process DuckDB database.

NoETL semantics kept (reference/noetl_dsl.md 3.5, NoETL ``tools/duckdb``):

* SQL from the same aliases as postgres (:func:`.sql.read_sql`), split on ``;``.
* ``params`` (NoETL 5's; :func:`.sql.read_params`): values bound to ``$1..$n`` or ``?`` of a
  single statement as DuckDB's prepared-statement parameters, never interpolated.
* ``database`` (NoETL 5: ``db_path``, read when ``database`` is absent): a file path (parent
  directories are created, as NoETL does) or ``:memory:``. Without ``database`` NoETL gives
  every execution its own file, ``$NOETL_DATA_DIR/noetldb/duckdb_<execution_id>.duckdb``, so
  that one step can create a table and a later step read it (the corpus relies on that); this
  runtime does the same, with
  ``NOETL_DATA_DIR`` defaulting to ``<tmp>/noetl-data``. The file is local to the worker: steps
  that share it must run on one machine (LocalExecutor, or a shared volume). Without an
  execution id (a bare tool call) the database is ``:memory:``.
* Result: NoETL's duckdb keys — ``executed_commands`` (statement count), ``command_<n>_rows``
  (row count of statement n, 1-based, when it returned rows) and ``command_<n>_sample`` (its
  first 5 rows as lists) — plus the keys the postgres tool gives for the last statement
  (``status``, ``rows`` as dicts, ``row_count``, ``columns``, ``statement_count``) and
  ``database``. A DML statement without RETURNING gives ``rows: []`` and ``row_count`` = rows
  changed, as on postgres. NoETL 5 playbooks (``profile.sql_result_shape``) get NoETL 5's
  ``{columns, rows, row_count}`` / ``{affected_rows}`` instead (``sql.columns_and_rows``).

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
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from ..errors import NoetlUnavailable
from ..hooks.duckdb import changed_rows, connect, database_path
from ..hooks.sqltext import (
    SqlConfigError,
    first_keyword,
    has_keyword,
    quote_ident,
    split_statements,
    tokens,
)
from ..hooks.tables import StatementError
from ..hooks.values import jsonable_row
from .outcome import ToolCall, ToolOutcome, tool_error
from .sql import (
    ResultLimits,
    collect_rows,
    columns_and_rows,
    engine_limits,
    read_params,
    read_sql,
    render_context,
    result_limits,
)

__all__ = [
    "ExtensionNotInstalled",
    "PytzMissing",
    "execute_statements",
    "failure",
    "run_duckdb",
    "stream",
]

KIND = "duckdb"
logger = logging.getLogger(__name__)

_SAMPLE_ROWS = 5


class ExtensionNotInstalled(NoetlUnavailable):
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


def execute_statements(
    con: duckdb.DuckDBPyConnection,
    statements: Sequence[str],
    *,
    limits: ResultLimits | None = None,
    params: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Run ``statements`` in one transaction; NoETL's keys plus the last statement's rows.

    ``params``: values bound to ``$1..$n`` (or ``?``) of the one statement (NoETL 5's
    ``params``), as DuckDB's prepared-statement parameters, never written into the SQL.

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
            is_last = index == len(statements) - 1
            last = _execute_one(con, text, index + 1, result, limits, is_last, params)
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
    params: Sequence[Any] | None = None,
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
        cursor = con.execute(statement, params) if params is not None else con.execute(statement)
        if not returns_rows or cursor.description is None:
            out = {"rows": [], "row_count": changed_rows(cursor), "columns": []}
            continue
        columns = [column[0] for column in cursor.description]
        fetch = _Fetcher(con, statement, cursor, params)
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


class PytzMissing(NoetlUnavailable):
    """DuckDB needs ``pytz`` to hand back TIMESTAMPTZ values and it is not installed."""


class _Fetcher:
    """``fetchmany`` of a statement's result, keeping the first rows as NoETL's sample.

    DuckDB's Python client needs the ``pytz`` package to turn ``TIMESTAMP WITH TIME ZONE``
    values into datetimes (``now()`` is one). Without it, a SELECT is run again inside a query
    that converts those columns to UTC first; the datetimes get their UTC offset back here, so
    the result is the same ISO text. Other statements (``INSERT ... RETURNING``) cannot be run
    twice: they fail with :class:`PytzMissing`, which says what to install.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        statement: Any,
        cursor: Any,
        params: Sequence[Any] | None = None,
    ):
        self.con = con
        self.statement = statement
        self.params = params
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
        relation = self.con.sql(self.statement.query, params=self.params)
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
        self.fetchmany = self.con.execute(query, self.params).fetchmany

    def _with_utc(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        values = list(row)
        for index in self.utc_columns:
            value = values[index]
            if isinstance(value, _dt.datetime):
                values[index] = value.replace(tzinfo=_dt.UTC)
        return tuple(values)


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


def _check_cloud_output(call: ToolCall, statements: Sequence[str]) -> None:
    """`require_cloud_output: true` asks that the SQL write to a bucket: NoETL's duckdb tool
    (138c10ed tools/duckdb/cloud/scopes.py validate_cloud_output_requirement, read by every
    Python engine) fails the call, before any statement runs, when no statement is a COPY whose
    text names a gs:// or s3:// URI; noetlc fails it the same way. The flag is read where NoETL
    reads it: the tool's own keys or its `with` (58c2a16b plugin/duckdb/__init__.py:124; a v1
    step's `with` arrives as the call's args or step input)."""
    config = call.config
    places = (config, config.get("with"), config.get("args"), call.step_input)
    if not any(isinstance(p, Mapping) and p.get("require_cloud_output") for p in places):
        return
    if not any("COPY" in s.upper() and ("gs://" in s or "s3://" in s) for s in statements):
        raise SqlConfigError(
            "No cloud COPY targets detected (gs:// or s3://) while require_cloud_output=true: "
            "write the result with COPY ... TO 'gs://...' (or s3://), or drop "
            "`require_cloud_output`"
        )


def run_duckdb(call: ToolCall) -> ToolOutcome:
    """Execute the call's SQL (see the module docstring)."""
    config = call.config
    try:
        statements = read_sql(config, context=lambda: render_context(call))
        params = read_params(config)
        if params is not None and len(statements) > 1:
            raise SqlConfigError(
                f"`params` binds $1..$n of one statement; this SQL has {len(statements)}: run "
                "the others in a step of their own"
            )
        database = database_path(config, call.context)
        _check_cloud_output(call, statements)
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
                limits = engine_limits("DUCKDB", call.profile)
                result = execute_statements(con, statements, limits=limits, params=params)
    except (duckdb.Error, StatementError, ExtensionNotInstalled) as exc:
        return failure(exc, database=database)
    if call.profile.sql_result_shape == "columns and rows":
        # NoETL 5's shape (duckdb.rs:287): an empty SELECT keeps its column names.
        last = statements[-1] if statements else ""
        return ToolOutcome.success(columns_and_rows(result, last, config, empty_columns=False))
    result["database"] = database
    return ToolOutcome.success(result)
