"""Cursor drivers: where a cursor loop (``loop.cursor``, seed 002) claims its work items.

A driver is a class registered under the entry-point group ``noetl.cursor_drivers``
(``name -> module:Class``); the runtime looks it up by ``loop.cursor.kind``, so a new backend is
a package that declares the entry point, with no change to the compiler or the runtime.
``postgres`` ships with noetlc (declared in its own pyproject, and known here even when the
project runs from a source tree without its metadata).
"""

from __future__ import annotations

from .base import (
    AT_LEAST_ONCE,
    ClaimSpec,
    CursorDriver,
    CursorDriverError,
    Lease,
    guarantee_of,
    leases,
)
from .registry import ENTRY_POINT_GROUP, available_drivers, driver_class, open_driver

__all__ = [
    "AT_LEAST_ONCE",
    "ENTRY_POINT_GROUP",
    "ClaimSpec",
    "CursorDriver",
    "CursorDriverError",
    "Lease",
    "available_drivers",
    "driver_class",
    "guarantee_of",
    "leases",
    "open_driver",
]
