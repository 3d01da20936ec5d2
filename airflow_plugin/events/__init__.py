"""NoETL events: what the runtime and the listener report, and where it goes.

* ``recorder``: the event envelope, the one interface every producer calls (``emit``), and the
  process default recorder (configured from the environment on first use);
* ``identity``: deterministic event ids (idempotency);
* ``redact``: secrets out, size bounded, before anything is queued;
* ``schema`` + ``migrations/``: the one table (and views) on Postgres or SQLite;
* ``store``: reads and idempotent batched writes; ``outbox``: durable local spill;
  ``journal``: each process's unsettled events on disk (a SIGKILLed process loses none);
  ``writer``: the background batching recorder over them; ``config``: the environment settings;
* ``listener``: Airflow listener hooks (DAG-run and task-instance transitions);
* ``projection``: the execution state rebuilt from events alone (replay, ``noetlc status``);
* ``timeline`` and ``cli``: ``noetlc events`` / ``noetlc status``.

Only ``recorder`` and ``identity`` load with this package; the rest import SQLAlchemy and load
when first used.
"""

from __future__ import annotations

from .recorder import (
    Event,
    MemoryRecorder,
    NullRecorder,
    Recorder,
    TeeRecorder,
    current_event_id,
    current_recorder,
    default_recorder,
    emit,
    flush,
    forget_default_recorder,
    recording,
    set_default_recorder,
    wants,
)

__all__ = [
    "Event",
    "MemoryRecorder",
    "NullRecorder",
    "Recorder",
    "TeeRecorder",
    "current_event_id",
    "current_recorder",
    "default_recorder",
    "emit",
    "flush",
    "forget_default_recorder",
    "recording",
    "set_default_recorder",
    "wants",
]
