"""Exact source positions of the characters of flow scalars (plain, 'single', "double").

A diagnostic inside a YAML string (a template, a python block, a secret) must point at the file's
line and column. For flow scalars the value differs from the source (escapes, escaped line
breaks, line folding), so the scalar is re-scanned the way YAML reads it and every value
character learns its source index. Used by ``CheckContext.position_in_string``.
"""

from __future__ import annotations

_ESCAPE_LENGTHS = {"x": 2, "u": 4, "U": 8}


def source_indices(
    text: str, start: int, end: int, style: str | None
) -> tuple[list[int], str] | None:
    """(source index of every value character, the value as scanned) for a flow scalar."""
    quote = style if style in ("'", '"') else ""
    i, stop = start + len(quote), end - len(quote)
    out: list[str] = []
    where: list[int] = []
    while i < stop:
        char = text[i]
        if quote == '"' and char == "\\":
            nxt = text[i + 1] if i + 1 < stop else ""
            if nxt in ("\n", "\r"):  # escaped line break: joins the lines without a space
                i = _skip_blanks(text, _skip_break(text, i + 1), stop)
                continue
            length = _ESCAPE_LENGTHS.get(nxt, 0)
            try:
                decoded = _decode_escape(nxt, text[i + 2 : i + 2 + length])
            except ValueError:
                return None
            out.append(decoded)
            where.append(i)
            i += 2 + length
        elif quote == "'" and char == "'" and text[i + 1 : i + 2] == "'":
            out.append("'")
            where.append(i)
            i += 2
        elif char in " \t" or char in "\r\n":
            j = _skip_blanks(text, i, stop)
            if j < stop and text[j] in "\r\n":  # trailing blanks are dropped, the break folds
                i = _fold(text, j, stop, out, where)
            else:
                out.append(text[i:j])
                where.extend(range(i, j))
                i = j
        else:
            out.append(char)
            where.append(i)
            i += 1
    return where, "".join(out)


def _fold(text: str, i: int, stop: int, out: list[str], where: list[int]) -> int:
    """A line break and the blank lines after it: one space, or one newline per blank line."""
    first = i
    i = _skip_blanks(text, _skip_break(text, i), stop)
    newlines = 0
    while i < stop and text[i] in "\r\n":
        newlines += 1
        where.append(i)
        i = _skip_blanks(text, _skip_break(text, i), stop)
    if newlines:
        out.append("\n" * newlines)
    else:
        out.append(" ")
        where.append(first)
    return i


def _skip_break(text: str, i: int) -> int:
    return i + 2 if text.startswith("\r\n", i) else i + 1


def _skip_blanks(text: str, i: int, stop: int) -> int:
    while i < stop and text[i] in " \t":
        i += 1
    return i


def _decode_escape(code: str, digits: str) -> str:
    simple = {
        "0": "\0",
        "a": "\a",
        "b": "\b",
        "t": "\t",
        "\t": "\t",
        "n": "\n",
        "v": "\v",
        "f": "\f",
        "r": "\r",
        "e": "\x1b",
        " ": " ",
        '"': '"',
        "/": "/",
        "\\": "\\",
        "N": "\x85",
        "_": "\xa0",
        "L": "\u2028",
        "P": "\u2029",
    }
    if code in simple:
        return simple[code]
    if code in _ESCAPE_LENGTHS and len(digits) == _ESCAPE_LENGTHS[code]:
        return chr(int(digits, 16))
    raise ValueError(code)
