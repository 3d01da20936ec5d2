"""The event envelope: one observable transition (formal spec section 9) and the coordinates a
recording scope stamps on it. A leaf of ``events``: the recorder builds and routes envelopes,
the writer stores them, and neither has to import the other for the type.
"""

from __future__ import annotations

import datetime as _dt
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COORDINATES", "Event"]


# What a recording scope stamps on its events: the Airflow coordinates of the task attempt and
# the playbook the DAG was compiled from.
COORDINATES = (
    "dag_id",
    "run_id",
    "task_id",
    "map_index",
    "try_number",
    "playbook_path",
    "playbook_hash",
)


# The fields that make a transition this one (``Event.identity_key``), in key order.
_IDENTITY_FIELDS = (
    "execution_id",
    "dag_id",
    "run_id",
    "task_id",
    "map_index",
    "try_number",
    "entity",
    "entity_id",
    "name",
    "attempt",
    "iteration",
)


_read_identity = operator.attrgetter(*_IDENTITY_FIELDS)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


@dataclass(frozen=True)
class Event:
    """One observable transition. ``data`` must be plain JSON (the runtime passes it through
    ``to_jsonable``); correlation ids are strings so they survive any store unchanged."""

    name: str
    entity: str
    entity_id: str
    status: str  # in_progress | success | error | paused | skipped
    execution_id: str = ""
    step: str | None = None
    alias: str | None = None
    source: str = "worker"
    step_run_id: str | None = None
    tool_run_id: str | None = None
    loop_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None
    parent_step_run_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    duration: float | None = None
    timestamp: _dt.datetime = field(default_factory=_now)
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    map_index: int | None = None
    try_number: int | None = None
    playbook_path: str | None = None
    playbook_hash: str | None = None
    parent_execution_id: str | None = None
    parent_event_id: str | None = None
    # Deterministic (see ``identity``); assigned by :func:`emit` unless the producer set it.
    event_id: str | None = None

    def identity_key(self, stamps: Mapping[str, Any] | None = None) -> tuple[Any, ...]:
        """What makes this transition this one (``occurrence`` aside); ``stamps`` are fields
        about to be set on it (the recording scope's coordinates)."""
        if not stamps:
            return _read_identity(self)  # one C call: every event of every loop item comes here
        return tuple(stamps[n] if n in stamps else getattr(self, n) for n in _IDENTITY_FIELDS)

    def as_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["timestamp"] = self.timestamp.isoformat()
        out["data"] = dict(self.data)
        return out
