"""NoETL events: what the runtime reports, and where it goes.

``recorder`` defines the event envelope and the one interface every producer calls
(``emit``); stores (in memory today, durable ones with the event-log work) implement it.
"""

from __future__ import annotations

from .recorder import (
    Event,
    MemoryRecorder,
    NullRecorder,
    Recorder,
    current_recorder,
    emit,
    recording,
    set_default_recorder,
)

__all__ = [
    "Event",
    "MemoryRecorder",
    "NullRecorder",
    "Recorder",
    "current_recorder",
    "emit",
    "recording",
    "set_default_recorder",
]
