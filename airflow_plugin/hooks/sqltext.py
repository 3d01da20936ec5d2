"""SQL text as the database hooks and the SQL tools read it: one tokenizer (strings, quoted
identifiers, dollar quoting, comments) under statement splitting (``split_statements``: on ``;``
outside quotes and comments, blank statements dropped), statement classification
(``first_keyword``, ``has_keyword``), parameter markers (``bind_named``, ``positional_markers``)
and identifier quoting / table-name parsing (``quote_ident``, ``table_parts``, ``quote_table``).
A ``;``, ``:name`` or ``%s`` inside a string is never touched.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Literal

from ..errors import NoetlConfigError

__all__ = [
    "SqlConfigError",
    "TokenKind",
    "bind_named",
    "first_keyword",
    "has_keyword",
    "leading_keyword",
    "positional_markers",
    "quote_ident",
    "quote_table",
    "split_statements",
    "table_parts",
    "tokens",
]


class SqlConfigError(NoetlConfigError):
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
