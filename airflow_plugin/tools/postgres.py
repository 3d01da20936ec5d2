"""``kind: postgres`` — run SQL on a PostgreSQL server named by an Airflow Connection.

NoETL semantics kept (reference/noetl_dsl.md 3.5):

* ``auth`` is required and names the credential; here it is an Airflow Connection id (host, port,
  login, password, schema = database, libpq extras such as ``sslmode``). Inline ``db_host``,
  ``db_port``, ``db_user``, ``db_password``, ``db_name``, ``db_conn_string`` are refused, as
  NoETL's server and worker refuse them.
  Without ``auth``, NoETL 5's own keys (``connection_string``, or ``host``/``port``/``database``/
  ``user``/``password``) name the server: a connection built at run time
  (``hooks/pg_inline.py``), never written into the DAG file.
* SQL from every alias NoETL reads (:func:`.sql.read_sql`), split on ``;``.
* ``schema`` (NoETL 5's, postgres.rs:285): the call's session runs with that search_path (a
  connection of its own, not the pool's, so the setting never reaches another call).
* ``params`` (NoETL 5's; :func:`.sql.read_params`): values bound to ``$1..$n`` of a single
  statement as real parameters (psycopg's raw cursor), never interpolated.
* The step result is the last statement's: ``{status: "success", rows, row_count, columns,
  statement_count}``; rows are dicts of JSON-safe values (``hooks.values.jsonable_value``); a
  last statement without a result set (DML without RETURNING, DDL) gives NoETL's shape for it,
  ``{status, row_count, message: "Command executed. N rows affected.", statement_count}``, with
  ``row_count`` the server's count of rows affected (-1 for DDL, as psycopg reports it; recorded
  from NoETL 138c10ed, tests/differential/cases/tools_postgres). Results are capped like NoETL's
  (``NOETL_POSTGRES_MAX_RESULT_ROWS``/``_BYTES``, 1,000 rows / 1 MiB), with ``truncated: true``.
* NoETL 5 playbooks (``call.profile.sql_result_shape``) get NoETL 5's shape (noetl/tools
  ded94546 postgres.rs:336): ``{columns, rows, row_count}`` for a SELECT/WITH (``{columns: [],
  rows: [], row_count: 0}`` when empty), ``{affected_rows}`` otherwise, numeric values as exact
  decimal text, rows as lists under ``as_objects: false`` (``sql.columns_and_rows``).
* case-v2 playbooks (``call.profile.postgres_result_per_statement``) get dc55c492's shape, one
  entry per statement: ``{command_0: {status, rows, row_count, columns} | {status, row_count,
  message}, command_1: ...}`` (each entry capped as above); a failed statement's step result is
  ``{id, status: "error", error: "command_N: <message>;", data: {command_N: {status: "error",
  message}}}`` (recorded from dc55c492, tests/differential/cases/tools_case_v2).

Where this runtime is stricter than NoETL (which committed statement by statement): all
statements of one call run in **one transaction**, committed at the end and rolled back on any
error, so a failed call leaves no half-written data (a call of a single INSERT/UPDATE/DELETE/
MERGE/SELECT/WITH statement gets that from PostgreSQL's implicit per-statement transaction, in
one round trip). Statements PostgreSQL refuses inside a
transaction block (``CREATE/DROP DATABASE``, ``CREATE/DROP TABLESPACE``, ``VACUUM``, ``ALTER
SYSTEM``, ``CALL``, ``... CONCURRENTLY``) make the whole call run in autocommit mode, statement by
statement, as NoETL ran them.

A ``CREATE ... IF NOT EXISTS`` means "make sure it exists", so it also succeeds when another
session creates the object at the same moment (parallel loop items do): PostgreSQL lets the loser
of that race fail on the catalog's unique index (23505, ``pg_type_typname_nsp_index``), and the
statement then runs again, in a savepoint of the call's transaction, and finds the object.

Inside a cursor item over postgres, a call against the cursor's own database runs in a savepoint
of the item's transaction and commits with the item's completion (``hooks/pg_item.py``).

Connections come from one ``psycopg_pool.ConnectionPool`` per (connection string, process): small
(``NOETL_POSTGRES_POOL_MAX_SIZE``, 4), created on first use, checked before use when idle (a server
restarted between calls costs nothing), thrown away whole when a connection fails (the next call
starts afresh instead of waiting out the pool's reconnect backoff). A server that cannot be
reached fails the call within ``NOETL_POSTGRES_CONNECT_TIMEOUT`` seconds (5) with the connection
error itself, not after the pool's wait. ``pool: false`` in the tool config uses a direct
connection for that call.

Failures are outcomes, never exceptions: ``tool_error("postgres", <psycopg exception class>,
message, retryable, code=<SQLSTATE>)`` plus ``meta.pg = {code, sqlstate}``. Retryable: connection
failures (class 08, a server that went away, a pool timeout), serialization failure 40001,
deadlock 40P01, shutdown/cannot-connect-now 57P01-57P03, too many connections 53300. The password
is registered with Airflow's log masker and scrubbed from every message.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import psycopg

from ..hooks.connections import ConnectionNotFound
from ..hooks.pg_inline import inline_target
from ..hooks.pg_item import enlisted
from ..hooks.postgres import (
    PgTarget,
    ToolConfigError,
    connect,
    is_retryable,
    resolve_target,
    rollback_quietly,
)
from ..hooks.sqltext import (
    SqlConfigError,
    first_keyword,
    has_keyword,
    leading_keyword,
)
from ..hooks.tables import StatementError
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
    "execute_statements",
    "failure",
    "needs_autocommit",
    "run_postgres",
]

KIND = "postgres"
logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Executing statements
# --------------------------------------------------------------------------------------------


_AUTOCOMMIT_HEADS = frozenset({"VACUUM", "CALL", "CREATE", "DROP", "ALTER", "REINDEX"})


def needs_autocommit(statement: str) -> bool:
    """Whether PostgreSQL refuses ``statement`` inside a transaction block."""
    head = leading_keyword(statement)
    if head is not None and head not in _AUTOCOMMIT_HEADS:
        return False  # INSERT, SELECT...: no need to tokenize the whole statement
    words = first_keyword(statement, 3)
    if not words:
        return False
    head = words[0]
    if head in {"VACUUM", "CALL"}:
        return True
    if head in {"CREATE", "DROP"} and len(words) > 1 and words[1] in {"DATABASE", "TABLESPACE"}:
        return True
    if head == "ALTER" and len(words) > 1 and words[1] == "SYSTEM":
        return True
    return head in {"CREATE", "DROP", "REINDEX"} and has_keyword(statement, "CONCURRENTLY")


# A call of one plain statement runs in autocommit mode: PostgreSQL then runs the statement in an
# implicit transaction of its own (all or nothing, committed when it ends), so the call keeps its
# one-transaction guarantee in one round trip instead of three (BEGIN, the statement, COMMIT).
# Only statement kinds that mean the same in that implicit transaction (not DECLARE or LOCK, which
# need a transaction block).
_IMPLICIT_TRANSACTION = frozenset(
    {"INSERT", "UPDATE", "DELETE", "MERGE", "SELECT", "WITH", "VALUES", "TABLE"}
)


def execute_statements(
    conn: psycopg.Connection[Any],
    statements: Sequence[str],
    *,
    limits: ResultLimits | None = None,
    savepoint: bool = False,
    per_statement: bool = False,
    params: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Run ``statements`` in one transaction (see the module docstring); the last one's result.

    ``params``: values bound to ``$1..$n`` of the one statement (NoETL 5's ``params``), sent as
    real parameters of PostgreSQL's extended protocol, never written into the SQL.
    ``savepoint``: ``conn`` is a cursor item's open transaction (``hooks.pg_item``); the call
    runs in a savepoint of it and commits nothing (the item's completion commits).
    ``per_statement``: the case-v2 shape instead, one entry per statement
    (``{command_0: {status, ...}, command_1: ...}``).
    Raises :class:`StatementError` (after rolling back) when a statement fails.
    """
    limits = limits or result_limits("POSTGRES")
    if savepoint:
        return _execute_in_savepoint(conn, statements, limits, per_statement, params)
    implicit = len(statements) == 1 and leading_keyword(statements[0]) in _IMPLICIT_TRANSACTION
    autocommit = implicit or any(needs_autocommit(statement) for statement in statements)
    result: dict[str, Any] = {"status": "success"}
    index = -1
    previous_autocommit = conn.autocommit
    try:
        if autocommit:
            conn.autocommit = True
        with _cursor(conn, params) as cur:
            commands = _run_each(cur, statements, limits, per_statement, params)
            index = len(statements) - 1
            if not per_statement:
                _read_last(cur, result, limits)
        if not autocommit:
            conn.commit()
    except BaseException as exc:
        if not autocommit:
            rollback_quietly(conn)
        if isinstance(exc, StatementError):
            raise
        if isinstance(exc, Exception):
            raise StatementError(max(index, 0), exc, len(statements)) from exc
        raise
    finally:
        if autocommit and not conn.closed:
            try:
                conn.autocommit = previous_autocommit
            except psycopg.Error as exc:
                logger.debug("restoring autocommit: %s", exc)
    if per_statement:
        return commands
    result["statement_count"] = len(statements)
    if autocommit and not implicit:
        result["transaction"] = "autocommit"
    return result


def _cursor(conn: psycopg.Connection[Any], params: Sequence[Any] | None) -> Any:
    """A cursor; with ``params`` psycopg's raw cursor, whose placeholders are PostgreSQL's own
    ``$1..$n`` (NoETL 5's SQL), so a ``%`` in the SQL stays text."""
    return psycopg.RawCursor(conn) if params is not None else conn.cursor()


def _run_each(
    cur: psycopg.Cursor[Any],
    statements: Sequence[str],
    limits: ResultLimits,
    per_statement: bool,
    params: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Execute ``statements`` in order; with ``per_statement`` each one's result, keyed
    ``command_N`` as NoETL's case-v2 postgres tool keys them. A failure raises
    :class:`StatementError` naming the statement."""
    commands: dict[str, Any] = {}
    for index, statement in enumerate(statements):
        try:
            if params is not None:
                cur.execute(statement, params)
            elif creates_if_missing(statement):
                _create_if_missing(cur, statement)
            else:
                cur.execute(statement)
            if per_statement:
                entry: dict[str, Any] = {"status": "success"}
                _read_last(cur, entry, limits)
                commands[f"command_{index}"] = entry
        except Exception as exc:
            raise StatementError(index, exc, len(statements)) from exc
    return commands


# A lost race of two sessions creating one object: the unique index of the catalog
# (pg_type_typname_nsp_index...), or the existence check itself.
_CONCURRENT_CREATE = frozenset({"23505", "42P07", "42710"})


def creates_if_missing(statement: str) -> bool:
    """Whether ``statement`` is a ``CREATE ... IF NOT EXISTS``."""
    words = first_keyword(statement, 8)
    if not words or words[0] != "CREATE":
        return False
    return any(words[i : i + 3] == ("IF", "NOT", "EXISTS") for i in range(len(words) - 2))


def _create_if_missing(cur: psycopg.Cursor[Any], statement: str, tries: int = 3) -> None:
    """``CREATE ... IF NOT EXISTS`` that tolerates a concurrent create of the same object.

    PostgreSQL checks existence before it inserts the catalog rows; two sessions past the check
    together collide on the catalog's unique index, and the loser fails (23505 on
    pg_type_typname_nsp_index) although it asked only for the object to exist. The loser's
    insert waited for the winner to commit, so the statement run again finds the object and does
    nothing. In a transaction the statement runs in a savepoint, so only it is rolled back."""
    in_transaction = not cur.connection.autocommit
    for attempt in range(1, tries + 1):
        if in_transaction:
            cur.execute("SAVEPOINT noetl_create_if_missing")
        try:
            cur.execute(statement)
        except psycopg.Error as exc:
            if attempt == tries or exc.sqlstate not in _CONCURRENT_CREATE:
                raise
            if in_transaction:
                cur.execute("ROLLBACK TO SAVEPOINT noetl_create_if_missing")
            logger.info("concurrent create, statement run again: %s", exc.sqlstate)
            continue
        if in_transaction:
            cur.execute("RELEASE SAVEPOINT noetl_create_if_missing")
        return


def _read_last(cur: psycopg.Cursor[Any], result: dict[str, Any], limits: ResultLimits) -> None:
    """The last statement's rows (bounded by ``limits``) or its row count, into ``result``."""
    if cur.description is not None:
        columns = [column.name for column in cur.description]
        rows, truncation = collect_rows(cur.fetchmany, columns, limits)
        result.update(rows=rows, row_count=len(rows), columns=columns)
        if truncation:
            result.update(truncated=True, truncation=truncation)
    else:
        result["row_count"] = cur.rowcount
        result["message"] = f"Command executed. {cur.rowcount} rows affected."


def _execute_in_savepoint(
    conn: psycopg.Connection[Any],
    statements: Sequence[str],
    limits: ResultLimits,
    per_statement: bool,
    params: Sequence[Any] | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {"status": "success"}
    try:
        with conn.transaction(), _cursor(conn, params) as cur:
            commands = _run_each(cur, statements, limits, per_statement, params)
            if not per_statement:
                _read_last(cur, result, limits)
    except StatementError:
        raise
    except Exception as exc:  # the savepoint's release
        raise StatementError(len(statements) - 1, exc, len(statements)) from exc
    if per_statement:
        return commands
    result["statement_count"] = len(statements)
    result["transaction"] = "cursor item"
    return result


# --------------------------------------------------------------------------------------------
# Failures
# --------------------------------------------------------------------------------------------


def failure(
    exc: BaseException,
    *,
    target: PgTarget | None = None,
    kind: str = KIND,
    statement_index: int | None = None,
    per_statement: bool = False,
    **extra: Any,
) -> ToolOutcome:
    """The failure outcome of ``exc`` (a psycopg/pool error, a config or lookup error)."""
    count = None
    if isinstance(exc, StatementError):
        statement_index, count = exc.index, exc.count
        exc = exc.cause
    message = str(exc).strip() or type(exc).__name__
    if target is not None:
        message = target.scrub(message)
    if isinstance(exc, (ToolConfigError, SqlConfigError)):
        return ToolOutcome.failure(tool_error(kind, "ConfigError", message, **extra))
    if isinstance(exc, ConnectionNotFound):
        return ToolOutcome.failure(tool_error(kind, "ConnectionNotFound", message, **extra))
    sqlstate = getattr(exc, "sqlstate", None)
    details: dict[str, Any] = dict(extra)
    if statement_index is not None:
        details["statement_index"] = statement_index
    diag = getattr(exc, "diag", None)
    if diag is not None and sqlstate:
        for attribute, key in (("message_detail", "detail"), ("message_hint", "hint")):
            text = getattr(diag, attribute, None)
            if text:
                details[key] = target.scrub(text) if target is not None else text
    if target is not None:
        details.setdefault("connection", target.conn_id)
    error = tool_error(
        kind, type(exc).__name__, message, retryable=is_retryable(exc), code=sqlstate, **details
    )
    reported = None
    if kind == KIND and statement_index is not None and sqlstate:
        reported = _reported(statement_index, count, message, per_statement)
    return ToolOutcome.failure(
        error, reported=reported, pg={"code": sqlstate, "sqlstate": sqlstate}
    )


def _reported(
    index: int, count: int | None, message: str, per_statement: bool = False
) -> dict[str, Any]:
    """The step result NoETL's postgres tool gives a failed statement (recorded at 138c10ed,
    tests/differential/cases/tools_postgres): a fresh id, the error as text, the collapsed
    statement results under ``data``; with ``per_statement`` (case-v2, recorded at dc55c492,
    tests/differential/cases/tools_case_v2) ``data`` is the failed statement's own entry,
    ``{command_N: {status: error, message}}`` (the statements before it were rolled back, so
    no entry claims their success). The structured error stays the call's error (retry
    policies, events)."""
    if per_statement:
        return {
            "id": str(uuid.uuid4()),
            "status": "error",
            "error": f"command_{index}: {message};",
            "data": {f"command_{index}": {"status": "error", "message": message}},
        }
    return {
        "id": str(uuid.uuid4()),
        "status": "error",
        "error": f"command_{index}: {message};",
        "data": {
            "status": "error",
            "message": f"statement_{index}: {message}",
            "statement_count": count if count is not None else index + 1,
            "errors": [{"statement_index": index, "message": message}],
        },
    }


# --------------------------------------------------------------------------------------------
# The tool
# --------------------------------------------------------------------------------------------


def run_postgres(call: ToolCall) -> ToolOutcome:
    """Execute the call's SQL (see the module docstring)."""
    config = call.config
    target: PgTarget | None = None
    try:
        target = _target(config, call.step_input)
        statements = read_sql(config, context=lambda: render_context(call))
        params = read_params(config)
        if params is not None and len(statements) > 1:
            raise SqlConfigError(
                f"`params` binds $1..$n of one statement; this SQL has {len(statements)} (a "
                "prepared statement holds one): run the others in a step of their own"
            )
    except (ToolConfigError, SqlConfigError, ConnectionNotFound) as exc:
        return failure(exc, target=target)
    # case-v2 playbooks read NoETL dc55c492's per-statement result (see the module docstring).
    per_statement = call.profile.postgres_result_per_statement
    if not statements:
        return ToolOutcome.success(
            {}
            if per_statement
            else _shaped(
                call,
                statements,
                {
                    "status": "success",
                    "rows": [],
                    "row_count": 0,
                    "columns": [],
                    "statement_count": 0,
                },
            )
        )
    limits = engine_limits("POSTGRES", call.profile)
    schema = _schema(config)
    # A search_path set on a pooled connection would outlive the call into the next one that
    # borrows it: a call with `schema` gets a connection of its own, closed when it ends.
    pooled = config.get("pool", True) is not False and schema is None
    item = enlisted(target)
    if item is not None and not any(needs_autocommit(statement) for statement in statements):
        # A cursor item's write to the cursor's own database: it commits with the item's
        # completion, or not at all (hooks/pg_item.py).
        try:
            with search_path(item.connection(), schema, restore=True) as conn:
                result = execute_statements(
                    conn,
                    statements,
                    limits=limits,
                    savepoint=True,
                    per_statement=per_statement,
                    params=params,
                )
            return ToolOutcome.success(_shaped(call, statements, result))
        except (psycopg.Error, StatementError) as exc:
            return failure(exc, target=target, per_statement=per_statement)
    for attempt in (1, 2):
        try:
            with connect(target, pooled=pooled) as raw, search_path(raw, schema) as conn:
                result = execute_statements(
                    conn, statements, limits=limits, per_statement=per_statement, params=params
                )
        except (psycopg.Error, StatementError) as exc:
            if attempt == 1 and pooled and _dead_before_first_statement(exc):
                # A pooled connection the server dropped while it sat in the pool (a restart,
                # an idle timeout): the first statement never ran, nothing was committed, and the
                # pool was discarded with the connection. Once more on a fresh connection.
                continue
            return failure(exc, target=target, per_statement=per_statement)
        return ToolOutcome.success(_shaped(call, statements, result))
    raise AssertionError("unreachable")  # pragma: no cover


def _shaped(call: ToolCall, statements: Sequence[str], result: dict[str, Any]) -> dict[str, Any]:
    """The call's result in its engine's shape (``profile.sql_result_shape``): the record
    above, or NoETL 5's ``{columns, rows, row_count}`` / ``{affected_rows}``."""
    if (
        call.profile.sql_result_shape != "columns and rows"
        or call.profile.postgres_result_per_statement
    ):
        return result
    last = statements[-1] if statements else ""
    return columns_and_rows(result, last, call.config, empty_columns=True)


def _schema(config: Any) -> str | None:
    """NoETL 5's ``schema`` (postgres.rs:57): the search_path of the call's session."""
    value = config.get("schema") if isinstance(config, Mapping) else None
    text = "" if value is None else str(value).strip()
    return text or None


@contextlib.contextmanager
def search_path(
    conn: psycopg.Connection[Any], schema: str | None, *, restore: bool = False
) -> Iterator[psycopg.Connection[Any]]:
    """``conn`` with its session's search_path set to ``schema`` first, as NoETL 5's
    ``SET search_path TO <schema>`` (postgres.rs:285) does; the value is bound
    (``set_config``), never written into SQL. ``restore``: ``conn`` is shared (a cursor item's
    transaction), so the previous search_path comes back when the call ends; otherwise the
    setting is committed and dies with the call's own connection."""
    if schema is None:
        yield conn
        return
    previous = None
    try:
        if restore:
            previous = conn.execute("SELECT current_setting('search_path')").fetchone()[0]
        conn.execute("SELECT set_config('search_path', %s, false)", [schema])
        if not restore:
            conn.commit()
    except psycopg.Error as exc:
        raise StatementError(0, exc, 1) from exc
    try:
        yield conn
    finally:
        if previous is not None and not conn.closed:
            try:
                conn.execute("SELECT set_config('search_path', %s, false)", [previous])
            except psycopg.Error as exc:
                logger.warning("postgres: restoring the search_path after `schema`: %s", exc)


def _target(config: Any, step_input: Any) -> PgTarget:
    """The Airflow connection ``auth`` names (on the tool or in the step input); without one, the
    server NoETL 5's own keys (``connection_string``, ``host``...) describe, a connection built at
    run time (``hooks/pg_inline.py``)."""
    named = any(
        isinstance(source, Mapping) and source.get(key) not in (None, "", {})
        for source in (config, step_input)
        for key in ("auth", "credential", "credentials")
    )
    inline = None if named else inline_target(config)
    return inline if inline is not None else resolve_target(config, step_input)


def _dead_before_first_statement(exc: BaseException) -> bool:
    if not isinstance(exc, StatementError) or exc.index != 0:
        return False
    cause = exc.cause
    return isinstance(cause, psycopg.OperationalError) and (
        isinstance(cause, psycopg.errors.AdminShutdown)
        or getattr(cause, "sqlstate", None) is None  # the socket went away: no server answer
    )
