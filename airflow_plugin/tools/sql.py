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
* :func:`jsonable_value` / :func:`jsonable_row` — JSON-safe values. The rule: a value JSON has no
  type for becomes the text PostgreSQL itself accepts back for it, so a row read by one step can
  be written by a sink of the next without loss:

  ====================  ===========================================================
  Decimal               int when it has no fractional digits (``12``), else float
                        (``12.30`` -> 12.3, as NoETL); NaN/±Infinity -> ``"NaN"``...
  float NaN/±inf        ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
  datetime/date/time    ISO 8601 (``2024-01-02T03:04:05+00:00``; offset kept when aware)
  timedelta (interval)  ``"32 days 03:04:05.5"``, ``"-00:00:01"`` (PostgreSQL/DuckDB input)
  UUID, IP addresses    their text
  bytes/memoryview      PostgreSQL hex bytea text ``"\\xdeadbeef"``
  ranges/multiranges    range literal text ``"[1,5)"``, ``"empty"``, ``"{[1,2),[5,6)}"``
  dict/list/tuple/set   recursively (keys as text)
  anything else         ``str(value)``
  ====================  ===========================================================

Also the small pieces of SQL text the writers need: identifier quoting and table-name parsing
(:func:`quote_ident`, :func:`table_parts`), statement classification (:func:`first_keyword`,
:func:`has_keyword`) and parameter markers (:func:`bind_named`, :func:`positional_markers`). All
of them walk the same tokenizer, so a ``;``, ``:name`` or ``%s`` inside a string is never touched.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import decimal
import ipaddress
import json
import logging
import math
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "B64_ALIASES",
    "INLINE_ALIASES",
    "SINK_ALIASES",
    "ResultLimits",
    "SqlConfigError",
    "bind_named",
    "collect_rows",
    "first_keyword",
    "has_keyword",
    "has_sql",
    "jsonable_row",
    "jsonable_value",
    "leading_keyword",
    "positional_markers",
    "quote_ident",
    "quote_table",
    "read_sql",
    "render_context",
    "result_limits",
    "split_statements",
    "table_parts",
    "tokens",
]

B64_ALIASES = ("command_b64", "commands_b64", "query_b64")
INLINE_ALIASES = ("query", "queries", "command", "commands", "cmd", "cmds")
# NoETL's sink reads its SQL from these too (``statement`` is what the corpus sinks use).
SINK_ALIASES = ("statement", "sql")


class SqlConfigError(ValueError):
    """The tool config holds no usable SQL (no alias, bad base64, unreadable script file)."""


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

TokenKind = Literal["code", "string", "ident", "dollar", "comment", "semicolon"]

_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")


def _string_end(text: str, start: int, backslash: bool) -> int:
    """Index after the single-quoted string whose opening quote is at ``start``."""
    i = start + 1
    n = len(text)
    while i < n:
        c = text[i]
        if backslash and c == "\\":
            i += 2
            continue
        if c == "'":
            if i + 1 < n and text[i + 1] == "'":
                i += 2
                continue
            return i + 1
        i += 1
    return n  # unterminated: the server reports it


def _block_comment_end(text: str, start: int) -> int:
    """Index after the (possibly nested) ``/* */`` comment opened at ``start``."""
    depth = 0
    i = start
    n = len(text)
    while i < n:
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def tokens(text: str) -> Iterator[tuple[TokenKind, str]]:
    """Split SQL text into runs of code, strings, identifiers, dollar strings, comments, ``;``.

    Concatenating the pieces gives ``text`` back unchanged.
    """
    n = len(text)
    i = 0
    code_start = 0

    def flush(upto: int) -> Iterator[tuple[TokenKind, str]]:
        if upto > code_start:
            yield "code", text[code_start:upto]

    while i < n:
        c = text[i]
        prev_ident = i > 0 and text[i - 1] in _IDENT_CHARS
        kind: TokenKind | None = None
        end = i
        if c == "'":
            # E'...' / e'...' strings take backslash escapes; the prefix must be a lone letter.
            backslash = (
                i > 0 and text[i - 1] in "eE" and not (i > 1 and text[i - 2] in _IDENT_CHARS)
            )
            kind, end = "string", _string_end(text, i, backslash)
        elif c == '"':
            j = i + 1
            while j < n:
                if text[j] == '"':
                    if j + 1 < n and text[j + 1] == '"':
                        j += 2
                        continue
                    break
                j += 1
            kind, end = "ident", min(j + 1, n)
        elif c == "$" and not prev_ident:
            match = _DOLLAR_TAG.match(text, i)
            if match:
                tag = match.group(0)
                close = text.find(tag, match.end())
                kind, end = "dollar", (n if close < 0 else close + len(tag))
        elif c == "-" and text.startswith("--", i):
            newline = text.find("\n", i)
            kind, end = "comment", (n if newline < 0 else newline)
        elif c == "/" and text.startswith("/*", i):
            kind, end = "comment", _block_comment_end(text, i)
        elif c == ";":
            kind, end = "semicolon", i + 1
        if kind is None:
            i += 1
            continue
        yield from flush(i)
        yield kind, text[i:end]
        i = end
        code_start = end
    yield from flush(n)


def _is_blank(pieces: Sequence[tuple[TokenKind, str]]) -> bool:
    return all(kind == "comment" or not value.strip() for kind, value in pieces)


# SQL without any of these has no strings, identifiers, dollar quotes or comments: every ``;`` is
# a separator and no piece is comment-only, so a plain split gives what the tokenizer gives.
_QUOTING = ("'", '"', "$", "--", "/*")


def split_statements(text: str) -> list[str]:
    """Statements of ``text``, split on top-level ``;``, without empty/comment-only ones."""
    if not any(marker in text for marker in _QUOTING):
        # The common case (one generated INSERT per call): the tokenizer would cost more than the
        # round trip's Python side.
        return [piece for piece in (part.strip() for part in text.split(";")) if piece]
    statements: list[str] = []
    current: list[tuple[TokenKind, str]] = []
    for kind, value in tokens(text):
        if kind == "semicolon":
            if not _is_blank(current):
                statements.append("".join(v for _, v in current).strip())
            current = []
        else:
            current.append((kind, value))
    if not _is_blank(current):
        statements.append("".join(v for _, v in current).strip())
    return statements


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _code_words(statement: str) -> Iterator[str]:
    for kind, value in tokens(statement):
        if kind == "code":
            for match in _WORD.finditer(value):
                yield match.group(0).upper()


_LEADING_WORD = re.compile(r"\s*+([A-Za-z_][A-Za-z0-9_]*+)")


def leading_keyword(statement: str) -> str | None:
    """The first word of ``statement`` upper-cased, when the statement starts with it (after
    whitespace); None when it starts with anything else (a comment, a parenthesis...), where
    :func:`first_keyword` must walk the tokens."""
    match = _LEADING_WORD.match(statement)
    return match.group(1).upper() if match else None


def first_keyword(statement: str, count: int = 1) -> tuple[str, ...]:
    """The first ``count`` words of ``statement`` outside comments, upper-cased."""
    words: list[str] = []
    for word in _code_words(statement):
        words.append(word)
        if len(words) == count:
            break
    return tuple(words)


def has_keyword(statement: str, keyword: str) -> bool:
    """Whether ``keyword`` appears as a word in the code of ``statement`` (not in strings)."""
    keyword = keyword.upper()
    return any(word == keyword for word in _code_words(statement))


# --------------------------------------------------------------------------------------------
# Parameter markers
# --------------------------------------------------------------------------------------------

_NAMED = re.compile(r"(?<![:A-Za-z0-9_]):([A-Za-z_][A-Za-z0-9_]*)")


def bind_named(
    statement: str, names: Sequence[str], style: Literal["pyformat", "dollar"]
) -> tuple[str, list[str]]:
    """Turn ``:name`` markers (names in ``names``) into driver parameters.

    NoETL's sink lets a statement say ``VALUES (:id, :email)`` for the keys of its data.
    ``pyformat`` gives psycopg's ``%(name)s`` (every other ``%`` is doubled, as psycopg then
    requires); ``dollar`` gives DuckDB's ``$name``. ``::type`` casts and markers inside strings,
    identifiers and comments are left alone. Returns the statement and the names used, in order
    of first use; with no marker used the statement is returned unchanged.
    """
    wanted = set(names)
    used: list[str] = []
    out: list[str] = []

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in wanted:
            return match.group(0)
        if name not in used:
            used.append(name)
        return f"%({name})s" if style == "pyformat" else f"${name}"

    pieces = list(tokens(statement))
    for kind, value in pieces:
        if kind == "code":
            if style == "pyformat":
                # Escape first so the markers written by replace() keep their single %.
                value = value.replace("%", "%%")
            out.append(_NAMED.sub(replace, value))
        else:
            out.append(value.replace("%", "%%") if style == "pyformat" else value)
    if not used:
        return statement, []
    return "".join(out), used


def positional_markers(statement: str, style: Literal["qmark", "format"]) -> str:
    """Convert ``%s`` (psycopg) to ``?`` (DuckDB) or ``?`` to ``%s``, outside strings/comments.

    NoETL's transfer writes custom target queries with ``%s`` per column; DuckDB wants ``?``.
    """
    out: list[str] = []
    for kind, value in tokens(statement):
        if kind == "code":
            value = value.replace("%s", "?") if style == "qmark" else value.replace("?", "%s")
        out.append(value)
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Identifiers
# --------------------------------------------------------------------------------------------

_PLAIN_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def quote_ident(name: str, *, fold: bool = True) -> str:
    """``name`` as a double-quoted identifier (``"`` doubled).

    With ``fold``, a plain identifier (letters, digits, ``_``, ``$``) is lower-cased first, which
    is what PostgreSQL does to the unquoted name NoETL would have written (``ID`` -> ``"id"``); a
    name with any other character is kept verbatim, so it can never end the identifier.
    """
    if not isinstance(name, str) or not name:
        raise SqlConfigError(f"an identifier must be a non-empty string, got {name!r}")
    if "\x00" in name:
        raise SqlConfigError("an identifier cannot contain a NUL character")
    if fold and _PLAIN_IDENT.fullmatch(name):
        name = name.lower()
    return '"' + name.replace('"', '""') + '"'


def table_parts(table: str) -> list[str]:
    """Split ``schema.table`` (or ``db.schema.table``) into names; ``"quoted"`` parts unquoted.

    A part in double quotes keeps its case and may contain dots; other parts are taken as plain
    names (and folded by :func:`quote_ident`). ``public.my_table`` -> ``["public", "my_table"]``;
    ``"My Schema"."a.b"`` -> ``['My Schema', 'a.b']`` (marked as quoted).
    """
    if not isinstance(table, str) or not table.strip():
        raise SqlConfigError(f"a table name must be a non-empty string, got {table!r}")
    parts: list[str] = []
    i = 0
    text = table.strip()
    n = len(text)
    while i <= n:
        if i < n and text[i] == '"':
            j = i + 1
            buf: list[str] = []
            while j < n:
                if text[j] == '"':
                    if j + 1 < n and text[j + 1] == '"':
                        buf.append('"')
                        j += 2
                        continue
                    break
                buf.append(text[j])
                j += 1
            if j >= n:
                raise SqlConfigError(f"unterminated quoted name in table {table!r}")
            parts.append(_QuotedName("".join(buf)))
            i = j + 1
            if i < n and text[i] != ".":
                raise SqlConfigError(f"unexpected text after a quoted name in table {table!r}")
        else:
            dot = text.find(".", i)
            end = n if dot < 0 else dot
            part = text[i:end].strip()
            if not part:
                raise SqlConfigError(f"empty name in table {table!r}")
            parts.append(part)
            i = end
        if i >= n:
            break
        i += 1  # skip the dot
        if i >= n:
            raise SqlConfigError(f"empty name in table {table!r}")
    if len(parts) > 3:
        raise SqlConfigError(f"table {table!r} has more than three dotted parts")
    return parts


class _QuotedName(str):
    """A name that was double-quoted in the source: its case is kept."""


def quote_table(table: str) -> str:
    """``table`` (``schema.table``, parts optionally quoted) as a quoted qualified name."""
    return ".".join(
        quote_ident(part, fold=not isinstance(part, _QuotedName)) for part in table_parts(table)
    )


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
        from ..runtime.render import render_value

        if callable(context):
            context = context()

        texts = [
            render_value(text, context, strict=False, coerce=False, field="sql") for text in texts
        ]
    statements: list[str] = []
    for text in texts:
        statements.extend(split_statements(str(text)))
    return statements


def render_context(call: Any) -> dict[str, Any]:
    """Context for SQL the runtime could not render (base64, script files) of a ToolCall.

    NoETL's worker renders such SQL with the execution context and the step's inputs on top.
    """
    from .python import merged_inputs

    return {**dict(call.context), **merged_inputs(call.config, call.step_input)}


# --------------------------------------------------------------------------------------------
# JSON-safe values
# --------------------------------------------------------------------------------------------


def _decimal(value: decimal.Decimal) -> Any:
    if not value.is_finite():
        if value.is_nan():
            return "NaN"
        return "-Infinity" if value.is_signed() else "Infinity"
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= 0:
        return int(value)
    return float(value)


def _interval(value: _dt.timedelta) -> str:
    """PostgreSQL/DuckDB interval input text: ``2 days 03:04:05.5``, ``-00:00:01``."""
    sign = "-" if value < _dt.timedelta(0) else ""
    magnitude = -value if sign else value
    days = magnitude.days
    seconds = magnitude.seconds
    micros = magnitude.microseconds
    parts = []
    if days:
        parts.append(f"{sign}{days} days")
    if seconds or micros or not days:
        hours, rest = divmod(seconds, 3600)
        minutes, secs = divmod(rest, 60)
        clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
        if micros:
            clock += f".{micros:06d}".rstrip("0")
        parts.append(f"{sign}{clock}")
    return " ".join(parts)


def _range_text(value: Any) -> str:
    """psycopg ``Range`` as its literal (``[1,5)``, ``empty``)."""
    if getattr(value, "isempty", False):
        return "empty"
    bounds = getattr(value, "bounds", "[)")
    lower = "" if value.lower is None else _bound_text(value.lower)
    upper = "" if value.upper is None else _bound_text(value.upper)
    return f"{bounds[0]}{lower},{upper}{bounds[1]}"


def _bound_text(value: Any) -> str:
    text = jsonable_value(value)
    text = text if isinstance(text, str) else str(text)
    if any(c in text for c in ' ,()[]"\\'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _is_range(value: Any) -> bool:
    cls = type(value)
    return cls.__name__ == "Range" and cls.__module__.startswith("psycopg")


def _is_multirange(value: Any) -> bool:
    cls = type(value)
    return cls.__name__ == "Multirange" and cls.__module__.startswith("psycopg")


_IP_TYPES = (
    ipaddress.IPv4Address,
    ipaddress.IPv6Address,
    ipaddress.IPv4Network,
    ipaddress.IPv6Network,
)


def jsonable_value(value: Any) -> Any:
    """One database value as plain JSON data (the table in the module docstring)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return _interval(value)
    if isinstance(value, (uuid.UUID, *_IP_TYPES)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    if isinstance(value, Mapping):
        return {str(key): jsonable_value(item) for key, item in value.items()}
    if _is_range(value):
        return _range_text(value)
    if _is_multirange(value):
        return "{" + ",".join(_range_text(item) for item in value) + "}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable_value(item) for item in value]
    return str(value)


def jsonable_row(values: Mapping[str, Any] | Sequence[Any]) -> Any:
    """A row (a mapping column -> value, or a sequence of values) with JSON-safe values."""
    if isinstance(values, Mapping):
        return {str(key): jsonable_value(item) for key, item in values.items()}
    return [jsonable_value(item) for item in values]


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
            row = {name: jsonable_value(value) for name, value in zip(names, values, strict=False)}
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
