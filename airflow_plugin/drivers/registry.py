"""``loop.cursor.kind`` -> driver class, through the ``noetl.cursor_drivers`` entry points."""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from .base import ClaimSpec, CursorDriver, CursorDriverError

__all__ = [
    "ENTRY_POINT_GROUP",
    "available_drivers",
    "driver_class",
    "forget_drivers",
    "open_driver",
]

ENTRY_POINT_GROUP = "noetl.cursor_drivers"
# The drivers noetlc itself declares in that group; also used when the project runs from a source
# tree whose distribution metadata is not installed.
BUILTIN_DRIVERS = {"postgres": "airflow_plugin.drivers.postgres:PostgresCursorDriver"}


@cache
def _declared() -> dict[str, object]:
    found: dict[str, object] = dict(BUILTIN_DRIVERS)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        found[entry.name] = entry
    return found


def available_drivers() -> list[str]:
    return sorted(_declared())


def driver_class(kind: str) -> type[CursorDriver]:
    """The class registered for ``kind``; CursorDriverError naming what is registered."""
    target = _declared().get(kind)
    if target is None:
        raise CursorDriverError(
            f"no cursor driver {kind!r} (registered under the {ENTRY_POINT_GROUP!r} entry points: "
            f"{', '.join(available_drivers())})"
        )
    try:
        if isinstance(target, str):
            module, _, name = target.partition(":")
            return getattr(importlib.import_module(module), name)
        return target.load()  # type: ignore[attr-defined]
    except Exception as exc:
        raise CursorDriverError(f"cursor driver {kind!r} cannot be loaded: {exc}") from exc


def open_driver(spec: ClaimSpec) -> CursorDriver:
    return driver_class(spec.kind)(spec)


def forget_drivers() -> None:
    """Read the entry points again (a test that installs a driver at run time)."""
    _declared.cache_clear()
