"""``kind: transfer`` — copy the rows of a query (or an HTTP response) into a table, in chunks.

Config (NoETL ``tools/transfer/executor.py``; corpus ``data_transfer/*``):

* ``source``: ``{tool | kind | type: postgres | duckdb | http, ...}``; postgres needs ``auth`` (an
  Airflow Connection id; else NoETL 5's ``connection``, a postgresql:// URL or libpq text) and
  ``query``; duckdb takes ``database`` (as the duckdb tool: a path, ``:memory:``, or the
  execution's file) and ``query``; http takes ``url`` (or ``endpoint``), ``method`` (GET),
  ``headers``, ``params``, ``body``/``payload`` and ``data_path`` (dotted path to the list of
  records in the JSON response).
* ``target``: ``{tool | kind | type: postgres | duckdb, auth? | connection?, database?,
  table | query, mapping?}``. ``mapping`` is ``{target_column: source_field}`` (a dotted field
  reaches into nested objects); without it the target columns are the source columns. ``query``
  is a custom statement run once per row with ``%s`` (or ``?``) markers in column order.
* ``chunk_size`` (default 1000): rows per fetch and per insert batch.
* ``mode``: ``append`` (default; ``insert`` is the same), ``replace`` (empty the table, DELETE,
  then insert) or ``upsert`` (``key``, at the top level or in ``target``: the conflict columns).

Unlike NoETL (which committed each chunk), the whole target write is **one transaction**: a
failure anywhere (source query, HTTP, a bad row) rolls the target back, so nothing is half
copied. Rows stream: a postgres source is read through a server-side cursor, chunk by chunk,
while the target inserts each chunk as it arrives.

Result, NoETL's per source (recorded at 138c10ed, tests/differential/cases/tools_transfer):
``{direction, source_type, target_type, mode, status: "success", rows_transferred,
chunks_processed, target_table, columns}``; from an http source NoETL's shorter ``{direction,
source_type, target_type, mode, rows_transferred, chunks_processed, records_fetched}``. A failed
transfer's step result is NoETL's ``{direction, source_type, target_type, mode, status: "error",
rows_transferred: 0, chunks_processed: 0, target_table, error: <text>}`` (nothing was committed);
for a case-v2 playbook (profile field ``transfer_failure_result``) dc55c492's worker's
``{error: "Transfer failed: <text>", status: "failed", error_type: "ValueError"}``; the structured
error stays the call's error. Snowflake and other ends have no executor here:
:class:`~.registry.ToolNotAvailable`.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from typing import Any

from ..errors import NoetlConfigError, NoetlFailure
from ..hooks.connections import ConnectionNotFound
from ..hooks.sqltext import SqlConfigError
from ..hooks.tables import TableWriter
from .outcome import ToolCall, ToolOutcome, tool_error
from .registry import ToolNotAvailable

__all__ = ["run_transfer"]

KIND = "transfer"
logger = logging.getLogger(__name__)
SOURCES = ("postgres", "duckdb", "http")
TARGETS = ("postgres", "duckdb")
_MODES = {"append": "append", "insert": "append", "replace": "replace", "upsert": "upsert"}


class TransferConfigError(NoetlConfigError):
    """The transfer config cannot work as given."""


class _SideError(NoetlFailure):
    """An error of one end of the transfer (``source`` or ``target``)."""

    def __init__(self, side: str, cause: BaseException):
        self.side = side
        self.cause = cause
        super().__init__(str(cause))


def _end_type(end: Mapping[str, Any], side: str) -> str:
    kind = end.get("tool") or end.get("kind") or end.get("type")
    if isinstance(kind, Mapping):  # `tool: {kind: postgres}`
        kind = kind.get("kind") or kind.get("type")
    if not isinstance(kind, str) or not kind.strip():
        raise TransferConfigError(f"`{side}` needs `tool`, `kind` or `type` (postgres, duckdb...)")
    return kind.strip().lower()


def _keys(value: Any) -> tuple[str, ...]:
    if value in (None, "", []):
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, Sequence) and all(isinstance(item, str) and item for item in value):
        return tuple(value)
    raise TransferConfigError(f"`key` must be a column name or a list of them, got {value!r}")


def _field(record: Mapping[str, Any], path: str) -> Any:
    """``record[path]``, or a dotted walk into nested mappings (None when absent)."""
    if path in record:
        return record[path]
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


# --------------------------------------------------------------------------------------------
# Sources: each yields (columns, rows) chunks
# --------------------------------------------------------------------------------------------


def _pg_target(end: Mapping[str, Any], kind: str) -> Any:
    """The database a postgres end names: its `auth` (an Airflow Connection id), else NoETL 5's
    `connection` (a postgresql:// URL or libpq text, transfer.rs SourceConfig/TargetConfig),
    built at run time like the postgres tool's `connection_string` (hooks/pg_inline.py)."""
    from ..hooks import postgres as pg_hook
    from ..hooks.pg_inline import inline_target

    named = any(end.get(key) not in (None, "", {}) for key in ("auth", "credential", "credentials"))
    connection = end.get("connection")
    if not named and isinstance(connection, str) and connection.strip():
        target = inline_target({"connection_string": connection})
        if target is not None:
            return target
    return pg_hook.resolve_target(end, kind=kind)


def _postgres_source(
    source: Mapping[str, Any], chunk_size: int, stack: ExitStack
) -> Iterator[tuple[list[str], list[tuple[Any, ...]]]]:
    from ..hooks import postgres as pg_hook

    query = source.get("query")
    if not isinstance(query, str) or not query.strip():
        raise TransferConfigError("a postgres `source` needs `query`")
    target = _pg_target(source, "transfer source")
    conn = stack.enter_context(pg_hook.connect(target))
    stack.callback(pg_hook.rollback_quietly, conn)  # read only: end the cursor's transaction
    # A named cursor is a server-side cursor: rows come chunk by chunk, not all at once.
    cursor = stack.enter_context(conn.cursor(name=f"noetl_transfer_{uuid.uuid4().hex[:12]}"))
    cursor.execute(query)
    first = True
    while True:
        rows = cursor.fetchmany(chunk_size)
        if rows or first:  # an empty result still tells the target its columns
            yield [column.name for column in cursor.description or []], [tuple(r) for r in rows]
        if not rows:
            return
        first = False


def _duckdb_source(
    source: Mapping[str, Any], chunk_size: int, stack: ExitStack, context: Mapping[str, Any]
) -> Iterator[tuple[list[str], list[tuple[Any, ...]]]]:
    from ..hooks import duckdb as dk_hook
    from . import duckdb as dk

    query = source.get("query")
    if not isinstance(query, str) or not query.strip():
        raise TransferConfigError("a duckdb `source` needs `query`")
    con = stack.enter_context(dk_hook.connect(dk_hook.database_path(source, context)))
    columns, fetchmany = dk.stream(con, query)
    first = True
    while True:
        rows = fetchmany(chunk_size)
        if rows or first:  # an empty result still tells the target its columns
            yield columns, [tuple(row) for row in rows]
        if not rows:
            return
        first = False


def _http_records(source: Mapping[str, Any]) -> list[Any]:
    import httpx

    url = source.get("url") or source.get("endpoint")
    if not isinstance(url, str) or not url.strip():
        raise TransferConfigError("an http `source` needs `url`")
    method = str(source.get("method") or "GET").upper()
    body = source.get("body", source.get("payload"))
    timeout = float(source.get("timeout") or 30)
    with httpx.Client(timeout=timeout, follow_redirects=True) as client:
        response = client.request(
            method,
            url,
            headers=source.get("headers") or None,
            params=source.get("params") or None,
            json=body if body is not None and method not in ("GET", "DELETE") else None,
        )
        response.raise_for_status()
        data: Any = response.json()
    path = source.get("data_path")
    if isinstance(path, str) and path:
        for part in path.split("."):
            if isinstance(data, Mapping):
                data = data.get(part, [])
    return data if isinstance(data, list) else [data]


def _http_source(
    records: list[Any], mapping: Mapping[str, str] | None, chunk_size: int
) -> Iterator[tuple[list[str], list[tuple[Any, ...]]]]:
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise TransferConfigError(
                f"http record {index} is a {type(record).__name__}, not an object"
            )
    if mapping:
        columns = list(mapping.values())
    else:
        columns = list(dict.fromkeys(str(key) for record in records for key in record))
    if not records:
        yield columns, []
    for start in range(0, len(records), chunk_size):
        chunk = records[start : start + chunk_size]
        yield columns, [tuple(_field(record, column) for column in columns) for record in chunk]


def _tagged(side: str, chunks: Iterator[Any]) -> Iterator[Any]:
    """Re-raise errors of ``chunks`` as errors of ``side``."""
    try:
        yield from chunks
    except ToolNotAvailable:
        raise
    except Exception as exc:  # attributed here, turned into an outcome by run_transfer
        raise _SideError(side, exc) from exc


# --------------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------------


def _mapped(
    columns: list[str], rows: list[tuple[Any, ...]], mapping: Mapping[str, str] | None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Source rows -> target columns and rows, through ``mapping`` when there is one."""
    if not mapping:
        return columns, rows
    records = [dict(zip(columns, row, strict=True)) for row in rows]
    return list(mapping), [tuple(_field(r, str(f)) for f in mapping.values()) for r in records]


class _Writer:
    """Writes chunks into one target inside one transaction."""

    def __init__(
        self,
        kind: str,
        target: Mapping[str, Any],
        mode: str,
        keys: tuple[str, ...],
        stack: ExitStack,
        context: Mapping[str, Any],
    ):
        self.kind = kind
        self.mode = mode
        self.keys = keys
        self.table = target.get("table")
        self.query = target.get("query")
        if self.query is not None and not isinstance(self.query, str):
            raise TransferConfigError("`target.query` must be SQL text")
        if not self.query and not (isinstance(self.table, str) and self.table.strip()):
            raise TransferConfigError("`target` needs `table` or `query`")
        if mode == "upsert" and not keys and not self.query:
            raise TransferConfigError("mode `upsert` needs `key`: the conflict column(s)")
        self.types: Mapping[str, str] | None = None
        self.prepared = False
        self.writer: TableWriter
        if kind == "postgres":
            from ..hooks import postgres as pg_hook

            conn = stack.enter_context(pg_hook.connect(_pg_target(target, "transfer target")))
            self.writer = pg_hook.PostgresTableWriter(conn)
        else:
            from ..hooks import duckdb as dk_hook

            database = dk_hook.database_path(target, context)
            stack.enter_context(dk_hook.writing(database))
            con = stack.enter_context(dk_hook.connect(database))
            self.writer = dk_hook.DuckDBTableWriter(con)

    def _prepare(self, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        missing = [key for key in self.keys if key not in columns]
        if self.mode == "upsert" and missing and not self.query:
            raise TransferConfigError(
                f"upsert key {', '.join(missing)} is not a target column ({', '.join(columns)})"
            )
        if self.query:
            return
        self.types = self.writer.prepare(
            self.table, columns, lambda: rows, mode=self.mode, keys=self.keys
        )

    def write(self, columns: list[str], rows: list[tuple[Any, ...]]) -> int:
        if not self.prepared:
            self._prepare(columns, rows)
            self.prepared = True
        if self.query:
            params = [tuple(self.writer.custom_param(value) for value in row) for row in rows]
            return self.writer.execute_many(self.query, params)
        return self.writer.write(
            self.table,
            columns,
            rows,
            mode="upsert" if self.mode == "upsert" else "insert",
            keys=self.keys,
            column_types=self.types,
        )

    def finish(self, columns: list[str] | None) -> None:
        if not self.prepared and columns is not None:
            self._prepare(columns, [])  # replace mode empties the table even for no rows
            self.prepared = True
        self.writer.commit()

    def abort(self) -> None:
        # Quiet: the original error is what gets reported.
        self.writer.rollback()


# --------------------------------------------------------------------------------------------
# The tool
# --------------------------------------------------------------------------------------------


def _failed_work(
    exc: BaseException, side: str | None, head: dict[str, Any], table: Any
) -> ToolOutcome:
    """A failure of the copy itself, with NoETL's failed-transfer document as the step result
    (nothing was committed: the target write is one transaction)."""
    outcome = _failure(exc, side)
    message = (outcome.error or {}).get("message") or str(exc)
    outcome.reported = {
        **head,
        "status": "error",
        "rows_transferred": 0,
        "chunks_processed": 0,
        "target_table": table,
        "error": message,
    }
    return outcome


def _failure(exc: BaseException, side: str | None) -> ToolOutcome:
    extra = {"side": side} if side else {}
    if isinstance(exc, (TransferConfigError, SqlConfigError)):
        return ToolOutcome.failure(tool_error(KIND, "ConfigError", str(exc), **extra))
    if isinstance(exc, ConnectionNotFound):
        return ToolOutcome.failure(tool_error(KIND, "ConnectionNotFound", str(exc), **extra))
    # The drivers are imported only if that end was used: look them up, never import here.
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.Error):
        from . import postgres as pg

        return pg.failure(exc, kind=KIND, **extra)
    duckdb = sys.modules.get("duckdb")
    dk = sys.modules.get(f"{__package__}.duckdb")
    if (duckdb is not None and isinstance(exc, duckdb.Error)) or (
        dk is not None and isinstance(exc, dk.ExtensionNotInstalled)
    ):
        return dk.failure(exc, kind=KIND, **extra)
    if type(exc).__module__.startswith("httpx"):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        retryable = status is None or status == 429 or status >= 500
        code = f"HTTP_{status}" if status else None
        return ToolOutcome.failure(
            tool_error(KIND, type(exc).__name__, str(exc), retryable=retryable, code=code, **extra)
        )
    return ToolOutcome.failure(tool_error(KIND, type(exc).__name__, str(exc), **extra))


def run_transfer(call: ToolCall) -> ToolOutcome:
    """Copy source rows into the target (see the module docstring)."""
    outcome = _transfer(call)
    if not outcome.ok and call.profile.transfer_failure_result == "worker exception":
        # dc55c492's tool re-raises every failure as `ValueError("Transfer failed: ...")` and
        # its worker stores that exception as the step's result: a case-v2 playbook reads
        # `{{ copy.status }}` as `failed` and `{{ copy.error }}` as text.
        message = (outcome.error or {}).get("message") or "transfer failed"
        outcome.reported = {
            "error": f"Transfer failed: {message}",
            "status": "failed",
            "error_type": "ValueError",
        }
    return outcome


def _transfer(call: ToolCall) -> ToolOutcome:
    config = call.config
    context = call.context
    try:
        source = config.get("source")
        target = config.get("target")
        if not isinstance(source, Mapping) or not isinstance(target, Mapping):
            raise TransferConfigError("transfer needs `source` and `target` mappings")
        source_type = _end_type(source, "source")
        target_type = _end_type(target, "target")
        for side, kind, supported in (
            ("source", source_type, SOURCES),
            ("target", target_type, TARGETS),
        ):
            if kind not in supported:
                raise ToolNotAvailable(
                    KIND,
                    f"this runtime cannot transfer with {side} {kind!r} "
                    f"(supported {side}s: {', '.join(supported)})",
                )
        raw_chunk = config.get("chunk_size")
        try:
            chunk_size = 1000 if raw_chunk in (None, "") else int(raw_chunk)
        except (TypeError, ValueError):
            raise TransferConfigError(
                f"`chunk_size` must be an integer, got {raw_chunk!r}"
            ) from None
        if chunk_size < 1:
            raise TransferConfigError(f"`chunk_size` must be at least 1, got {chunk_size}")
        raw_mode = str(config.get("mode") or "append").strip().lower()
        if raw_mode not in _MODES:
            raise TransferConfigError(
                f"transfer mode {raw_mode!r} is not one of append, insert, replace, upsert"
            )
        mode = _MODES[raw_mode]
        keys = _keys(config.get("key", target.get("key")))
        mapping = target.get("mapping") or None
        if mapping is not None and not (
            isinstance(mapping, Mapping) and all(isinstance(v, str) for v in mapping.values())
        ):
            raise TransferConfigError("`target.mapping` must map target columns to source fields")
    except TransferConfigError as exc:
        return _failure(exc, None)

    head = {
        "direction": f"{source_type}_to_{target_type}",
        "source_type": source_type,
        "target_type": target_type,
        "mode": "custom" if target.get("query") else mode,
    }
    side = "source"
    records_fetched: int | None = None
    rows_transferred = 0
    chunks = 0
    columns: list[str] | None = None
    writer: _Writer | None = None
    with ExitStack() as stack:
        try:
            if source_type == "postgres":
                reader = _postgres_source(source, chunk_size, stack)
            elif source_type == "duckdb":
                reader = _duckdb_source(source, chunk_size, stack, context)
            else:
                records = _http_records(source)
                records_fetched = len(records)
                reader = _http_source(records, None, chunk_size)
            side = "target"
            writer = _Writer(target_type, target, mode, keys, stack, context)
            for source_columns, rows in _tagged("source", reader):
                columns, mapped = _mapped(source_columns, rows, mapping)
                if mapped:
                    writer.write(columns, mapped)
                    rows_transferred += len(mapped)
                    chunks += 1
            writer.finish(columns)
        except _SideError as exc:
            if writer is not None:
                writer.abort()
            return _failed_work(exc.cause, exc.side, head, target.get("table"))
        except ToolNotAvailable:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of the work is an outcome
            if writer is not None:
                writer.abort()
            return _failed_work(exc, side, head, target.get("table"))
    if records_fetched is not None:
        result: dict[str, Any] = {
            **head,
            "rows_transferred": rows_transferred,
            "chunks_processed": chunks,
            "records_fetched": records_fetched,
        }
    else:
        result = {
            **head,
            "status": "success",
            "rows_transferred": rows_transferred,
            "chunks_processed": chunks,
            "target_table": target.get("table"),
            "columns": columns or [],
        }
    return ToolOutcome.success(result)
