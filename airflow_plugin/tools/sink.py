"""The writer behind NoETL's ``sink`` (v1 ``save``): persist a step's data after its tool ran.

A sink is written by the step runtime after the tool (step-level ``sink``, case ``then.sink``,
each iteration of a unified retry). The runtime renders the block with the step's context first;
:func:`run_sink` receives it rendered, so the values to write are already data.

Accepted spec shapes (all dialects of the corpus; NoETL ``core/storage/config.py`` and the v1
``plugin/save/config.py``):

* a ``{sink: {...}}`` or ``{save: {...}}`` wrapper is unwrapped;
* destination: ``tool`` (case-v2: a kind string, or a mapping with ``kind``/``type``), else
  ``storage`` (v1: a kind string or a mapping with ``type``), else a top-level ``kind``/``type``/
  ``backend``; no destination at all means ``event_log``;
* every setting is looked up in the destination mapping first, then at the top level: ``auth``
  (postgres: Airflow Connection id; without it, a v1 save's ``dsn`` connection string, built at
  run time), ``database`` (duckdb), ``table`` (``schema.table``; a part in
  double quotes keeps its case), ``mode``, ``key``/``keys`` (a column or a list);
* the data: ``data``, ``args``, ``payload`` or ``from`` (destination mapping first). A mapping is
  one row; a list of mappings is rows; a step result of a SQL tool (a mapping with a ``rows`` list
  and ``columns`` or ``row_count``) or a mapping whose only key is ``rows`` gives its rows; None
  or an empty list writes nothing;
* SQL instead of a table: ``statement``/``sql`` or any SQL tool alias (``command``, ``query``...)
  in the destination (or top level). It runs as written; when the data has rows and a statement
  uses ``:name`` markers for their keys, the statements run once per row with those values as
  parameters (NoETL's sink bound ``:name`` the same way).

Modes (table writes): ``insert`` (default) and ``append`` insert; ``upsert`` inserts with
``ON CONFLICT (key) DO UPDATE`` of the other columns (``DO NOTHING`` when every column is a key);
``replace`` empties the table (DELETE) then inserts. Table and column names are always quoted
identifiers (a plain name is lower-cased as PostgreSQL folds the unquoted names NoETL wrote; any
other name is kept verbatim, so no key or table name can inject SQL); values are always
parameters; dict/list values go to json/jsonb columns as JSON (to text columns as JSON text, to
array columns as arrays). Rows whose key sets differ are inserted with their own column lists, so
a missing key gets the column default. DuckDB creates a missing table (types from the values,
``PRIMARY KEY`` on the upsert keys), as NoETL's duckdb sink did; PostgreSQL reports a missing
table (42P01).

Destinations: ``postgres`` and ``duckdb`` are written here, in one transaction per call (nothing
written when any row fails). ``event``/``event_log`` writes nothing outside the event log: the
result carries the data for the runtime's sink event. Any other kind with an executor in the
registry (``python``, ``http``...) is called as a tool with the data as its ``args``; a python
sink's code sees the data as ``data`` (a mapping, ``{}`` when there is none) and the other
``args`` keys as themselves, as NoETL binds them (its ``script``, when text, is its code, as v1's
save reads it); an http sink POSTs unless it names a ``method``, as NoETL's http save does.

Result: ``{status: "success", kind, table, mode, rows_written}`` (plus ``statement_count`` for SQL
sinks, ``data`` for event_log, ``result`` for delegated tools). Failures are outcomes like the
SQL tools' (``ConfigError`` for a spec that cannot work).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from noetl_compile.runtime_support import SINK_EVENT_KINDS

from ..errors import NoetlConfigError
from ..hooks.connections import ConnectionNotFound
from ..hooks.sqltext import SqlConfigError, bind_named
from ..hooks.tables import TableWriter
from ..hooks.values import jsonable_value
from .outcome import ToolCall, ToolOutcome, tool_error
from .sql import SINK_ALIASES, has_sql, read_sql

__all__ = ["SinkConfigError", "SinkSpec", "run_sink", "sink_rows", "sink_spec"]

_DATA_KEYS = ("data", "args", "payload", "from")
_MODES = frozenset({"insert", "append", "upsert", "replace"})


class SinkConfigError(NoetlConfigError):
    """The sink spec cannot be written as given."""


@dataclass(frozen=True)
class SinkSpec:
    """A sink block reduced to what the writers need (see the module docstring)."""

    kind: str
    config: Mapping[str, Any]  # the destination settings (destination mapping over top level)
    data: Any = None
    table: str | None = None
    mode: str = "insert"
    keys: tuple[str, ...] = ()
    sql_config: Mapping[str, Any] | None = field(default=None, repr=False)


def _unwrap(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    for wrapper in ("sink", "save"):
        inner = spec.get(wrapper)
        if isinstance(inner, Mapping):
            return inner
    return spec


def _first(mappings: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> Any:
    for mapping in mappings:
        for key in keys:
            value = mapping.get(key)
            if value is not None and value != {}:
                return value
    return None


def sink_spec(spec: Mapping[str, Any]) -> SinkSpec:
    """Normalise a rendered sink block; raises SinkConfigError for one that cannot work."""
    if not isinstance(spec, Mapping):
        raise SinkConfigError(f"a sink must be a mapping, got {type(spec).__name__}")
    spec = _unwrap(spec)
    destination = spec.get("tool")
    if destination is None:
        destination = spec.get("storage")
    if isinstance(destination, str):
        kind, dest = destination, {}
    elif isinstance(destination, Mapping):
        kind, dest = destination.get("kind") or destination.get("type") or "", destination
    elif destination is None:
        kind, dest = spec.get("kind") or spec.get("type") or spec.get("backend") or "", {}
    else:
        raise SinkConfigError(
            f"sink `tool` must be a kind or a mapping with `kind`, got {type(destination).__name__}"
        )
    if not isinstance(kind, str):
        raise SinkConfigError(f"sink kind must be a string, got {kind!r}")
    kind = kind.strip().lower()
    top = {key: value for key, value in spec.items() if key not in ("tool", "storage")}
    layers: list[Mapping[str, Any]] = [dest, top]
    config = {**top, **dest}

    data = _first(layers, _DATA_KEYS)
    if data is None:
        # An explicit empty list/dict still means "nothing to write", not "no data given".
        data = next((m[k] for m in layers for k in _DATA_KEYS if k in m), None)

    sql_config = next((m for m in layers if has_sql(m, extra_aliases=SINK_ALIASES)), None)
    table = _first(layers, ("table",))
    if table is not None and not isinstance(table, str):
        raise SinkConfigError(f"sink `table` must be a name, got {type(table).__name__}")
    raw_mode = _first(layers, ("mode",))
    mode = str(raw_mode or "insert").strip().lower()
    raw_keys = _first(layers, ("key", "keys"))
    if raw_keys is None:
        keys: tuple[str, ...] = ()
    elif isinstance(raw_keys, str):
        keys = tuple(part.strip() for part in raw_keys.split(",") if part.strip())
    elif isinstance(raw_keys, Sequence) and all(isinstance(k, str) and k for k in raw_keys):
        keys = tuple(raw_keys)
    else:
        raise SinkConfigError(f"sink `key` must be a column name or a list of them: {raw_keys!r}")

    if kind in ("postgres", "duckdb") and sql_config is None:
        if not table:
            raise SinkConfigError(
                f"a {kind} sink needs `table` (with the data to write) or SQL "
                "(`statement`, `command`, `query`...)"
            )
        if mode not in _MODES:
            raise SinkConfigError(f"sink mode {mode!r} is not one of {', '.join(sorted(_MODES))}")
        if mode == "upsert" and not keys:
            raise SinkConfigError("sink mode `upsert` needs `key`: the conflict column(s)")
    return SinkSpec(
        kind=kind,
        config=config,
        data=data,
        table=table,
        mode="statement" if sql_config is not None and kind in ("postgres", "duckdb") else mode,
        keys=keys,
        sql_config=sql_config,
    )


def sink_rows(data: Any) -> list[Mapping[str, Any]]:
    """The rows ``data`` holds (see the module docstring); SinkConfigError for other shapes."""
    if data is None:
        return []
    if isinstance(data, Mapping):
        rows = data.get("rows")
        if isinstance(rows, list) and (
            set(data) == {"rows"} or "columns" in data or "row_count" in data
        ):
            data = rows
        else:
            return [data]
    if isinstance(data, (list, tuple)):
        for index, row in enumerate(data):
            if not isinstance(row, Mapping):
                raise SinkConfigError(
                    f"sink data row {index} is a {type(row).__name__}, not a mapping of "
                    "column -> value"
                )
            if not row:
                raise SinkConfigError(f"sink data row {index} is empty")
        return list(data)
    raise SinkConfigError(
        f"sink data must be a mapping (one row) or a list of mappings, got {type(data).__name__}"
    )


def _groups(rows: Sequence[Mapping[str, Any]]) -> list[tuple[list[str], list[list[Any]]]]:
    """Rows grouped by their key set (first-seen order), as (columns, value lists)."""
    groups: dict[tuple[str, ...], list[list[Any]]] = {}
    for row in rows:
        columns = tuple(str(key) for key in row)
        groups.setdefault(columns, []).append(list(row.values()))
    return [(list(columns), values) for columns, values in groups.items()]


def _check_keys(spec: SinkSpec, groups: Sequence[tuple[list[str], list[list[Any]]]]) -> None:
    if spec.mode != "upsert":
        return
    for columns, _values in groups:
        missing = [key for key in spec.keys if key not in columns]
        if missing:
            raise SinkConfigError(
                f"upsert key {', '.join(missing)} is not among the data's keys "
                f"({', '.join(columns)})"
            )


def _success(spec: SinkSpec, rows_written: int | None, **extra: Any) -> ToolOutcome:
    return ToolOutcome.success(
        {
            "status": "success",
            "kind": spec.kind,
            "table": spec.table,
            "mode": spec.mode,
            "rows_written": rows_written,
            **extra,
        }
    )


# --------------------------------------------------------------------------------------------
# Destinations
# --------------------------------------------------------------------------------------------


def _statement_runs(
    statements: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    style: Literal["pyformat", "dollar"],
) -> list[tuple[str, Any]]:
    """(sql, params) to execute: per row when a statement binds ``:name`` of the row keys."""
    if rows:
        names = sorted({str(key) for row in rows for key in row})
        bound = [bind_named(statement, names, style) for statement in statements]
        if any(used for _sql, used in bound):
            runs: list[tuple[str, Any]] = []
            for row in rows:
                for (sql, used), original in zip(bound, statements, strict=True):
                    params = {name: _param(row.get(name)) for name in used}
                    runs.append((sql, params) if used else (original, None))
            return runs
    return [(statement, None) for statement in statements]


def _param(value: Any) -> Any:
    """A bound ``:name`` value: dict/list as JSON text (the statement casts it as it needs)."""
    if isinstance(value, (dict, list)):
        return json.dumps(jsonable_value(value), ensure_ascii=False)
    return value


def _write(
    spec: SinkSpec,
    rows: list[Mapping[str, Any]],
    writer: TableWriter,
    statements: list[str] | None,
) -> int:
    """The sink's rows through ``writer``, in the caller's transaction: the sink's own SQL run
    per row when it binds ``:name`` of the row keys, else rows into ``table``."""
    if statements is not None:
        return sum(
            writer.execute(sql, params)
            for sql, params in _statement_runs(statements, rows, writer.param_style)
        )
    table = spec.table or ""
    groups = _groups(rows)
    all_columns = list(dict.fromkeys(c for columns, _ in groups for c in columns))
    types = writer.prepare(
        table,
        all_columns,
        lambda: [[row.get(c) for c in all_columns] for row in rows],
        mode=spec.mode,
        keys=spec.keys,
    )
    return sum(
        writer.write(table, columns, values, mode=spec.mode, keys=spec.keys, column_types=types)
        for columns, values in groups
    )


def _statements(spec: SinkSpec) -> list[str] | None:
    return read_sql(spec.sql_config, extra_aliases=SINK_ALIASES) if spec.sql_config else None


def _pg_sink_target(config: Mapping[str, Any]) -> Any:
    """The database a postgres sink writes to: its `auth` (an Airflow Connection id), else its
    `dsn`, a connection string 58c2a16b's save takes as the postgres call's `db_conn_string`
    (plugin/save/postgres.py:183; recorded: dsl_keys/v1_save_postgres_dsn_present), built at run
    time like the postgres tool's `connection_string` (hooks/pg_inline.py): X601 refuses a literal
    password in it, so a DAG file holds a template (`{{ secret.x }}`) or a passwordless URI."""
    from ..hooks import postgres as pg_hook
    from ..hooks.pg_inline import inline_target

    named = any(
        config.get(key) not in (None, "", {}) for key in ("auth", "credential", "credentials")
    )
    dsn = config.get("dsn")
    if not named and isinstance(dsn, str) and dsn.strip():
        target = inline_target({"connection_string": dsn})
        if target is not None:
            return target
    return pg_hook.resolve_target(config, kind="sink")


def _write_postgres(spec: SinkSpec, rows: list[Mapping[str, Any]]) -> ToolOutcome:
    import psycopg

    from ..hooks import postgres as pg_hook
    from . import postgres as pg

    target = None
    try:
        target = _pg_sink_target(spec.config)
        statements = _statements(spec)
        with (
            pg_hook.connect(target) as conn,
            pg_hook.PostgresTableWriter(conn).transaction() as writer,
        ):
            written = _write(spec, rows, writer, statements)
    except (pg_hook.ToolConfigError, SqlConfigError, ConnectionNotFound, psycopg.Error) as exc:
        return pg.failure(exc, target=target, table=spec.table)
    extra = {"statement_count": len(statements)} if statements is not None else {}
    return _success(spec, written, **extra)


def _write_duckdb(
    spec: SinkSpec, rows: list[Mapping[str, Any]], context: Mapping[str, Any] | None
) -> ToolOutcome:
    import duckdb

    from ..hooks import duckdb as dk_hook
    from . import duckdb as dk

    try:
        database = dk_hook.database_path(spec.config, context)
        statements = _statements(spec)
        with (
            dk_hook.writing(database),
            dk_hook.connect(database) as con,
            dk_hook.DuckDBTableWriter(con).transaction() as writer,
        ):
            written = _write(spec, rows, writer, statements)
    except (SqlConfigError, duckdb.Error) as exc:
        return dk.failure(exc, table=spec.table)
    extra = {"statement_count": len(statements)} if statements is not None else {}
    return _success(spec, written, database=database, **extra)


def _python_sink_args(data: Any, args: Any) -> dict[str, Any]:
    """The names a python sink's code sees, as NoETL binds them (``core/storage/python.py``).

    ``data`` is the sink data when it is a non-empty mapping (for ``tool: {args: {...}}`` that is
    the whole ``args`` mapping), else ``{}``: never None, and an ``args.data`` key does not
    replace it. Every other ``args`` key is bound under its own name.
    """
    bound = (
        {key: value for key, value in args.items() if key != "data"}
        if isinstance(args, Mapping)
        else {}
    )
    bound["data"] = dict(data) if isinstance(data, Mapping) and data else {}
    return bound


def _delegate(spec: SinkSpec, step: str, context: Mapping[str, Any] | None) -> ToolOutcome:
    from ..templating.render import to_jsonable
    from .registry import get_tool

    executor = get_tool(spec.kind)  # ToolNotAvailable: this runtime cannot write that sink
    config = {key: value for key, value in spec.config.items() if key not in ("tool", "storage")}
    config["kind"] = spec.kind
    if spec.kind == "http":
        # An http save posts its data unless told otherwise (58c2a16b save/http.py:50, dc55c492
        # core/storage/http.py:52); the http tool's own default is GET.
        config.setdefault("method", "POST")
    if spec.kind == "python":
        config["args"] = _python_sink_args(spec.data, config.get("args"))
        # v1's python save runs `code`, else `script`: inline source (58c2a16b save/python.py).
        if "code" not in config and isinstance(config.get("script"), str):
            config["code"] = config.pop("script")
    elif "args" not in config and isinstance(spec.data, Mapping):
        config["args"] = spec.data
    elif "args" not in config and spec.data is not None:
        config["args"] = {"data": spec.data}
    outcome = executor(
        ToolCall(step=step, task=f"{step}:sink", config=config, context=context or {})
    )
    if not outcome.ok:
        return outcome
    return _success(spec, None, result=to_jsonable(outcome.data))


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def run_sink(
    spec: Mapping[str, Any], *, step: str, context: Mapping[str, Any] | None = None
) -> ToolOutcome:
    """Write one rendered sink block (see the module docstring for the shapes accepted).

    ``context``: the step's render context; duckdb uses its ``execution_id`` for the default
    database file, delegated tools receive it. Never raises for a failed write; raises
    :class:`~.registry.ToolNotAvailable` for a destination this runtime cannot write at all.
    """
    try:
        normal = sink_spec(spec)
        if normal.kind in SINK_EVENT_KINDS:
            from ..templating.render import to_jsonable

            data = to_jsonable(normal.data)
            count = len(data) if isinstance(data, list) else (0 if data is None else 1)
            return _success(
                SinkSpec(kind="event_log", config={}, table=None, mode="event"), count, data=data
            )
        if normal.kind not in ("postgres", "duckdb"):
            return _delegate(normal, step, context)
        rows = sink_rows(normal.data)
        _check_keys(normal, _groups(rows))
    except (SinkConfigError, SqlConfigError) as exc:
        return ToolOutcome.failure(tool_error("sink", "ConfigError", f"step {step!r}: {exc}"))
    if normal.kind == "postgres":
        return _write_postgres(normal, rows)
    return _write_duckdb(normal, rows, context)
