"""The filters NoETL 5's renderers register that Jinja itself lacks: ``keys``, ``values``,
``get``, ``split``, ``len``, ``fromjson`` and ``b64decode``, with the meaning of NoETL 5's
minijinja filters (noetl/server ``orchestrate-core/src/template.rs``, the server's; noetl/tools
``src/template/engine.rs``, the worker's, which adds the ``len`` alias). ``fromjson`` and
``b64decode`` were NoETL's before (check accepts them in every generation).

NoETL 5's other filters (``items``, ``string``, ``int``, ``float``, ``trim``, ``safe``, ``first``,
``last``, ``join``, ``length``, ``d``...) are Jinja's own and need nothing here. Its renderers define no
functions: ``now()`` is not NoETL 5's, and check says so. These filters are registered in the
runtime's one Jinja environment for every generation; `noetlc check` accepts them only in NoETL 5
playbooks (T304 in the older ones, whose engines lack them).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from jinja2 import Undefined, pass_environment

from .proxy import unwrap

__all__ = ["NOETL5_FILTERS"]


def _mapping(value: Any, name: str) -> Mapping[str, Any]:
    plain = unwrap(value)
    if not isinstance(plain, Mapping):
        # NoETL 5: "keys requires a mapping" (an error of the render, not an empty list).
        raise TypeError(f"{name} requires a mapping, got {type(plain).__name__}")
    return plain


def _keys(value: Any) -> list[str]:
    return [str(key) for key in _mapping(value, "keys")]


def _values(value: Any) -> list[Any]:
    return list(_mapping(value, "values").values())


@pass_environment
def _get(env: Any, value: Any, key: Any) -> Any:
    """``value[key]``, or undefined (``| default(...)`` then applies) when it is missing."""
    plain = unwrap(value)
    try:
        return plain[key]
    except (KeyError, IndexError, TypeError):
        return env.undefined(name=str(key))


def _split(value: Any, sep: Any = " ") -> list[str]:
    """Rust's ``str::split``: a literal separator (one blank by default), empty parts kept."""
    text = "" if isinstance(value, Undefined) else str(unwrap(value))
    separator = str(sep)
    if separator == "":  # Rust splits around every character, with an empty part at each end
        return ["", *text, ""]
    return text.split(separator)


def _len(value: Any) -> int:
    return len(unwrap(value))


def _fromjson(value: Any) -> Any:
    return json.loads(str(unwrap(value)))


def _b64decode(value: Any) -> str:
    return base64.b64decode(str(unwrap(value)).encode("ascii")).decode("utf-8")


NOETL5_FILTERS = {
    "keys": _keys,
    "values": _values,
    "get": _get,
    "split": _split,
    "len": _len,
    "fromjson": _fromjson,
    "b64decode": _b64decode,
}
