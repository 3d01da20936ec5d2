"""Database values as plain JSON data, for every hook and tool that hands rows on (results,
cursor claims, sink and transfer writes).

The rule: a value JSON has no
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
"""

from __future__ import annotations

import datetime as _dt
import decimal
import ipaddress
import math
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["jsonable_row", "jsonable_value"]


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


def jsonable_value(value: Any, exact_decimals: bool = False) -> Any:
    """One database value as plain JSON data (the table in the module docstring).

    ``exact_decimals``: a finite Decimal is its exact decimal text (``"12.50"``), as NoETL 5's
    tools hand numeric values on (the engine profile's ``sql_result_shape``)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, decimal.Decimal):
        if exact_decimals and value.is_finite():
            return format(value, "f")  # positional, never exponent notation: "0.0000001"
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
        return {str(key): jsonable_value(item, exact_decimals) for key, item in value.items()}
    if _is_range(value):
        return _range_text(value)
    if _is_multirange(value):
        return "{" + ",".join(_range_text(item) for item in value) + "}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable_value(item, exact_decimals) for item in value]
    return str(value)


def jsonable_row(values: Mapping[str, Any] | Sequence[Any]) -> Any:
    """A row (a mapping column -> value, or a sequence of values) with JSON-safe values."""
    if isinstance(values, Mapping):
        return {str(key): jsonable_value(item) for key, item in values.items()}
    return [jsonable_value(item) for item in values]
