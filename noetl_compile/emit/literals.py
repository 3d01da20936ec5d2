"""Plain data -> Python source, deterministically and safely.

Only ``dict`` (string keys), ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None`` are
accepted; anything else raises ``TypeError``, so no object can smuggle its own ``repr`` into a
generated file. Strings are ``repr``-escaped (every non-printable character, including line
and paragraph separators, becomes an escape), so no playbook text can end a literal early.
Layout follows black's style: one line when it fits, otherwise one item per line with a
trailing comma; multi-line strings become a parenthesised concatenation of one piece per line.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["WIDTH", "comment", "python_literal", "str_literal"]

WIDTH = 100
INDENT = "    "


def str_literal(text: str) -> str:
    """``repr`` of a string, with double quotes where that needs no extra escaping."""
    if type(text) is not str:
        text = str.__str__(text)
    body = repr(text)
    if body[0] == "'" and '"' not in text and "'" not in text:
        return '"' + body[1:-1] + '"'
    return body


def _scalar(value: Any) -> str:
    if value is None or value is True or value is False:
        return repr(value)
    if type(value) is int:
        return repr(value)
    if type(value) is float:
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
        return repr(value)
    if type(value) is str:
        return str_literal(value)
    raise TypeError(f"not plain data: {type(value).__name__}")


def _flat(value: Any) -> str:
    if type(value) is dict:
        items = []
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"dict keys must be strings, not {type(key).__name__}")
            items.append(f"{str_literal(key)}: {_flat(item)}")
        return "{" + ", ".join(items) + "}"
    if type(value) is list:
        return "[" + ", ".join(_flat(item) for item in value) + "]"
    return _scalar(value)


def _string_pieces(text: str, depth: int) -> str | None:
    """A long multi-line string as ``("line 1\\n" "line 2")`` — one piece per source line."""
    lines = text.splitlines(keepends=True)
    if len(lines) < 2:
        return None
    pad = INDENT * (depth + 1)
    body = "".join(f"{pad}{str_literal(line)}\n" for line in lines)
    return "(\n" + body + INDENT * depth + ")"


def python_literal(value: Any, depth: int = 0, used: int = 0) -> str:
    """Source for ``value`` starting at column ``len(INDENT) * depth + used``.

    ``used`` counts the characters already on the line before the value (a key, ``name = ``);
    one more is reserved for a trailing comma.
    """
    flat = _flat(value)
    if len(INDENT) * depth + used + len(flat) + 1 <= WIDTH and "\n" not in flat:
        return flat
    pad = INDENT * (depth + 1)
    if type(value) is dict and value:
        lines = []
        for key, item in value.items():
            key_text = str_literal(key) + ": "
            lines.append(f"{pad}{key_text}{python_literal(item, depth + 1, len(key_text))},\n")
        return "{\n" + "".join(lines) + INDENT * depth + "}"
    if type(value) is list and value:
        lines = [f"{pad}{python_literal(item, depth + 1)},\n" for item in value]
        return "[\n" + "".join(lines) + INDENT * depth + "]"
    if type(value) is str:
        pieces = _string_pieces(value, depth)
        if pieces is not None:
            return pieces
    return flat


def comment(text: str) -> str:
    """A one-line ``#`` comment; anything but printable ASCII is escaped, so it stays one line."""
    safe = "".join(c if " " <= c <= "~" else ascii(c)[1:-1] for c in str(text))
    return "# " + safe
