"""Deterministic event ids.

The same transition can reach the log more than once: the worker and the scheduler both report a
task failure, every task of a run announces the run's start, the outbox re-delivers a batch that
may already have landed. The store keeps one row per ``event_id`` (inserts ignore duplicates), so
an id must be a pure function of what the event *is*: the execution, the Airflow attempt
(task, map index, try), the entity, the event name, the NoETL attempt and iteration. Two
different transitions with all of those equal (a cyclic region visiting a step twice inside one
task attempt) are told apart by ``occurrence``: how many identical keys this attempt emitted
before, which a deterministic re-run reproduces.
"""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["EVENT_NAMESPACE", "event_id"]

# Fixed namespace of uuid5 ids; changing it changes every id ever derived.
EVENT_NAMESPACE = uuid.UUID("6f1c3a52-5d2b-4a57-9a0c-2e7d0c9b4e11")


def event_id(*parts: Any) -> str:
    """uuid5 over ``parts``; None and "" differ, and no part can run into the next."""
    key = "\x1f".join("\x00" if part is None else str(part) for part in parts)
    return str(uuid.uuid5(EVENT_NAMESPACE, key))
