"""SQL text shared by the ``postgres``, ``duckdb``, ``transfer`` and ``sink`` tools.

Why one module: the SQL tools must read their statements exactly the way NoETL's workers do
(reference/noetl_dsl.md 3.5), split them the same way, and hand back rows that survive XCom and
the event log. Doing that once keeps the tools consistent with each other.

* :func:`read_sql` — where a tool config keeps its SQL. NoETL's order: ``script`` (an external
  file), then base64 (``command_b64``, ``commands_b64``, ``query_b64``), then inline (``query``,
  ``queries``, ``command``, ``commands``, ``cmd``, ``cmds``); each value a string or a list of
  strings. Sinks add ``statement`` and ``sql``. Inline SQL arrives already rendered by the runtime;
  base64 and file SQL are opaque to the runtime's renderer, so they are rendered here (leniently,
  as text) when a context is given — NoETL renders them too.
* :func:`split_statements` — split on ``;`` outside single-quoted strings (``''`` escapes;
  ``E'...'`` with backslash escapes), double-quoted identifiers, dollar quoting (``$$``,
  ``$tag$``), ``--`` and nested ``/* */`` comments. Statements that hold only whitespace and
  comments are dropped; comments inside a statement are kept (hints, error line numbers). A list
  value is split item by item (NoETL joins list items with newlines first; splitting each item is
  the same for complete statements and does not glue an item without ``;`` to the next).
* Statement text (splitting, keywords, markers, identifiers): ``hooks.sqltext``; database values
  as JSON: ``hooks.values``.

Also the small pieces of SQL text the writers need: identifier quoting and table-name parsing
(:func:`quote_ident`, :func:`table_parts`), statement classification (:func:`first_keyword`,
:func:`has_keyword`) and parameter markers (:func:`bind_named`, :func:`positional_markers`). All
of them walk the same tokenizer, so a ``;``, ``:name`` or ``%s`` inside a string is never touched.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..hooks.sqltext import SqlConfigError, first_keyword, split_statements
from ..hooks.values import jsonable_value

__all__ = [
    "B64_ALIASES",
    "INLINE_ALIASES",
    "SINK_ALIASES",
    "ResultLimits",
    "collect_rows",
    "columns_and_rows",
    "engine_limits",
    "has_sql",
    "read_params",
    "read_sql",
    "render_context",
    "result_limits",
]

B64_ALIASES = ("command_b64", "commands_b64", "query_b64")
INLINE_ALIASES = ("query", "queries", "command", "commands", "cmd", "cmds")
# NoETL's sink reads its SQL from these too (``statement`` is what the corpus sinks use).
SINK_ALIASES = ("statement", "sql")


# --------------------------------------------------------------------------------------------
# Reading SQL from a tool config
# --------------------------------------------------------------------------------------------


def has_sql(config: Mapping[str, Any], *, extra_aliases: Sequence[str] = ()) -> bool:
    """Whether ``config`` names SQL under any alias :func:`read_sql` reads."""
    keys = ("script", *B64_ALIASES, *INLINE_ALIASES, *extra_aliases)
    return any(config.get(key) not in (None, "", []) for key in keys)


def _texts(alias: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        texts = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise SqlConfigError(
                    f"`{alias}[{index}]` must be SQL text, got {type(item).__name__}"
                )
            texts.append(item)
        return texts
    raise SqlConfigError(
        f"`{alias}` must be SQL text or a list of SQL texts, got {type(value).__name__}"
    )


def _decode_b64(alias: str, value: Any) -> list[str]:
    texts = []
    for index, item in enumerate(_texts(alias, value)):
        try:
            # Whitespace is ignored (a YAML literal block ends with a newline; NoETL's plain
            # b64decode ignores it too); any other non-alphabet character is still an error.
            compact = "".join(item.split())
            texts.append(base64.b64decode(compact.encode("ascii"), validate=True).decode("utf-8"))
        except (binascii.Error, UnicodeError, ValueError) as exc:
            where = alias if isinstance(value, str) else f"{alias}[{index}]"
            raise SqlConfigError(f"`{where}` is not valid base64 of UTF-8 text ({exc})") from None
    return texts


def _read_script(script: Any) -> str:
    """SQL from NoETL's ``script: {uri, source: {type: file}, encoding?}``."""
    if isinstance(script, str):
        # A bare string is taken as a file path (NoETL validates a mapping; be kind here).
        script = {"uri": script, "source": {"type": "file"}}
    if not isinstance(script, Mapping):
        raise SqlConfigError("`script` must be a mapping {uri, source: {type}}")
    source = script.get("source") or {}
    source_type = source.get("type") if isinstance(source, Mapping) else source
    source_type = str(source_type or "file").lower()
    if source_type != "file":
        from .registry import ToolNotAvailable

        raise ToolNotAvailable(
            "script",
            f"SQL `script` from source type {source_type!r} cannot be fetched by this runtime "
            "(only `source: {type: file}`); put the SQL inline or in a file on the worker",
        )
    uri = script.get("uri") or script.get("path")
    if not isinstance(uri, str) or not uri.strip():
        raise SqlConfigError("`script.uri` must name the SQL file")
    path = Path(uri.removeprefix("file://"))
    encoding = script.get("encoding") or "utf-8"
    try:
        return path.read_text(encoding=encoding)
    except (OSError, UnicodeError, LookupError) as exc:
        raise SqlConfigError(
            f"cannot read SQL script {uri!r}: {type(exc).__name__}: {exc}"
        ) from None


def read_sql(
    config: Mapping[str, Any],
    *,
    context: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
    extra_aliases: Sequence[str] = (),
) -> list[str]:
    """The statements of ``config`` in NoETL's alias order (see the module docstring).

    ``extra_aliases`` are read after the inline aliases (sinks pass :data:`SINK_ALIASES`).
    ``context``: when given, base64 and script SQL is rendered with it (lenient, kept as text);
    a zero-argument callable is called only then (building the context costs more than reading
    inline SQL, which the runtime has already rendered).
    Raises :class:`SqlConfigError` when no alias holds SQL. The list may be empty (a script of
    comments only): running nothing is the caller's decision.
    """
    texts: list[str] | None = None
    rendered_here = False
    if config.get("script") not in (None, "", {}):
        texts = [_read_script(config["script"])]
        rendered_here = True
    else:
        for alias in B64_ALIASES:
            if config.get(alias) not in (None, "", []):
                texts = _decode_b64(alias, config[alias])
                rendered_here = True
                break
    if texts is None:
        for alias in (*INLINE_ALIASES, *extra_aliases):
            if config.get(alias) not in (None, "", []):
                texts = _texts(alias, config[alias])
                break
    if texts is None:
        aliases = ", ".join(("script", *B64_ALIASES, *INLINE_ALIASES, *extra_aliases))
        raise SqlConfigError(f"no SQL given: expected one of {aliases}")
    if rendered_here and context is not None:
        from ..templating.render import render_value

        if callable(context):
            context = context()

        texts = [
            render_value(text, context, strict=False, coerce=False, field="sql") for text in texts
        ]
    statements: list[str] = []
    for text in texts:
        statements.extend(split_statements(str(text)))
    return statements


_POSITION = re.compile(r"\$?([1-9][0-9]{0,4})")


def read_params(config: Mapping[str, Any]) -> list[Any] | None:
    """The values NoETL 5's ``params`` binds to ``$1..$n`` (noetl/tools ``postgres.rs``/
    ``duckdb.rs``), or None when there are none (an empty list binds nothing, as there).

    A list binds in order. NoETL 5's server types ``params`` as a mapping (noetl/server
    d9ec700c): one keyed by position (``1``, ``"2"``, ``"$3"``) binds by those positions, which
    must be 1..n. A list or mapping value is bound as its JSON text (compact, as serde writes
    it); other values as they are. Raises :class:`SqlConfigError` for any other shape.
    """
    raw = config.get("params")
    if raw is None:
        return None
    if isinstance(raw, Mapping):
        by_position: dict[int, Any] = {}
        for key, value in raw.items():
            match = _POSITION.fullmatch(str(key).strip())
            if match is None:
                raise SqlConfigError(
                    f"`params` as a mapping is keyed by position (1, 2, ... or $1, $2, ...), "
                    f"got the key {key!r}; or write `params` as a list"
                )
            by_position[int(match.group(1))] = value
        if sorted(by_position) != list(range(1, len(by_position) + 1)):
            raise SqlConfigError(
                f"`params` positions must be 1..{len(by_position)} without gaps, got "
                f"{sorted(by_position)}"
            )
        values = [by_position[position] for position in sorted(by_position)]
    elif isinstance(raw, (list, tuple)):
        values = list(raw)
    else:
        raise SqlConfigError(
            f"`params` must be a list of values bound to $1..$n, got {type(raw).__name__}"
        )
    if not values:
        return None
    return [
        json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        if isinstance(value, (Mapping, list, tuple))
        else value
        for value in values
    ]


def render_context(call: Any) -> dict[str, Any]:
    """Context for SQL the runtime could not render (base64, script files) of a ToolCall.

    NoETL's worker renders such SQL with the execution context and the step's inputs on top.
    """
    from .python import merged_inputs

    return {**dict(call.context), **merged_inputs(call.config, call.step_input)}


# --------------------------------------------------------------------------------------------
# Result rows
# --------------------------------------------------------------------------------------------

logger = logging.getLogger(__name__)

_FETCH_BATCH = 500


@dataclass(frozen=True)
class ResultLimits:
    """How much of a result set a tool returns (0 = no limit).

    A step result travels through XCom and the event log: NoETL's workers cap it the same way
    (1,000 rows, 1 MiB by default) and say so in the result instead of failing.
    """

    max_rows: int = 1000
    max_bytes: int = 1024 * 1024
    # Numeric values as exact decimal text (NoETL 5's tools), not JSON numbers.
    exact_decimals: bool = False


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return max(0, int(raw))
    except ValueError:
        logger.warning("ignoring %s=%r: not an integer (using %d)", name, raw, default)
        return default


# (prefix, raw rows value, raw bytes value) -> limits: read on every call (a changed variable is
# seen at once), parsed once per distinct value.
_LIMITS: dict[tuple[str, str | None, str | None], ResultLimits] = {}


def result_limits(prefix: str) -> ResultLimits:
    """Limits from ``NOETL_<PREFIX>_MAX_RESULT_ROWS`` / ``..._BYTES`` (NoETL's variable names)."""
    rows_name, bytes_name = f"NOETL_{prefix}_MAX_RESULT_ROWS", f"NOETL_{prefix}_MAX_RESULT_BYTES"
    key = (prefix, os.environ.get(rows_name), os.environ.get(bytes_name))
    limits = _LIMITS.get(key)
    if limits is None:
        defaults = ResultLimits()
        limits = ResultLimits(
            max_rows=_env_int(rows_name, defaults.max_rows),
            max_bytes=_env_int(bytes_name, defaults.max_bytes),
        )
        _LIMITS[key] = limits
    return limits


def collect_rows(
    fetchmany: Callable[[int], Sequence[Sequence[Any]]],
    columns: Sequence[str],
    limits: ResultLimits,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Fetch rows as JSON-safe dicts until the result or a limit ends.

    Returns the rows and, when a limit cut the result short, ``{reason, max_rows, max_bytes}``
    (the caller puts it in the result as ``truncation`` with ``truncated: true``).
    """
    rows: list[dict[str, Any]] = []
    size = 0
    names = [str(column) for column in columns]
    while True:
        batch = fetchmany(_FETCH_BATCH)
        if not batch:
            return rows, None
        for position, values in enumerate(batch):
            row = {
                name: jsonable_value(value, limits.exact_decimals)
                for name, value in zip(names, values, strict=False)
            }
            if limits.max_bytes:
                size += len(json.dumps(row, ensure_ascii=False, default=str))
                if size > limits.max_bytes:
                    return rows, _truncation("max_bytes", limits)
            rows.append(row)
            if limits.max_rows and len(rows) >= limits.max_rows:
                if position + 1 < len(batch) or fetchmany(1):
                    return rows, _truncation("max_rows", limits)
                return rows, None


def _truncation(reason: str, limits: ResultLimits) -> dict[str, Any]:
    logger.warning(
        "SQL result truncated (%s; max_rows=%s, max_bytes=%s)",
        reason,
        limits.max_rows,
        limits.max_bytes,
    )
    return {"reason": reason, "max_rows": limits.max_rows, "max_bytes": limits.max_bytes}


def engine_limits(prefix: str, profile: Any) -> ResultLimits:
    """:func:`result_limits` with the engine's way of writing numeric values: exact decimal
    text where its SQL results are NoETL 5's ``columns and rows`` (``profile.sql_result_shape``)."""
    limits = result_limits(prefix)
    if profile.sql_result_shape == "columns and rows":
        return replace(limits, exact_decimals=True)
    return limits


# NoETL 5 asks the statement's first word whether it reads rows (postgres.rs:327, duckdb.rs:227).
_READS = frozenset({"SELECT", "WITH"})


def columns_and_rows(
    record: Mapping[str, Any],
    statement: str,
    config: Mapping[str, Any],
    *,
    empty_columns: bool,
) -> dict[str, Any]:
    """NoETL 5's SQL result (noetl/tools ded94546 postgres.rs:336, duckdb.rs:287) made of the
    tools' record of the last statement: a SELECT/WITH gives ``{columns, rows, row_count}``
    (``empty_columns``: postgres's empty result is ``{columns: [], rows: [], row_count: 0}``;
    duckdb keeps the names), any other statement ``{affected_rows}``. A statement of another
    kind that returned rows (``INSERT ... RETURNING``) keeps them beside ``affected_rows``
    (NoETL 5 drops them: docs/semantics.md). ``as_objects: false`` gives rows as lists in
    column order. A truncation note stays."""
    columns = [str(c) for c in record.get("columns") or []]
    rows = list(record.get("rows") or [])
    if str(config.get("as_objects", True)).strip().lower() in ("false", "0", "no"):
        rows = [[row.get(c) for c in columns] if isinstance(row, Mapping) else row for row in rows]
    words = first_keyword(statement, 1) if statement else ()
    reads = bool(words) and words[0] in _READS
    returned = bool(columns) and "message" not in record
    shaped: dict[str, Any]
    if reads:
        if not rows and empty_columns:
            columns = []
        shaped = {"columns": columns, "rows": rows, "row_count": len(rows)}
    elif returned:
        shaped = {
            "columns": columns,
            "rows": rows,
            "row_count": len(rows),
            "affected_rows": len(rows),
        }
    else:
        # psycopg counts -1 for DDL; NoETL 5's client.execute answers 0.
        shaped = {"affected_rows": max(int(record.get("row_count") or 0), 0)}
    if record.get("truncated"):
        shaped.update(truncated=True, truncation=record.get("truncation"))
    return shaped
