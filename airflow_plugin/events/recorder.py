"""The event envelope and the recorder interface (formal spec section 9, whitepaper section 9).

Producers (the step runtime, loop/region operators, later the listener) build an :class:`Event`
and call :func:`emit`; they never know where it goes. The recorder in effect is
:func:`current_recorder`: the one installed by :func:`recording` for the running task (a context
variable, so nested scopes and threads started with a copied context see the right one), else the
process default (:func:`set_default_recorder`; a :class:`NullRecorder` until something installs a
store). Airflow coordinates (dag_id, run_id, task_id, map_index, try_number) are set once per
scope by :func:`recording` and stamped on every event emitted inside it, so producers pass only
what they know.

A recorder must never fail the work it observes: :func:`emit` catches and logs a failing store.

Taxonomy used by the runtime (spec 9.2 names; ``alias`` is the name playbook conditions use):

| name | entity | alias | when |
|---|---|---|---|
| StepStarted / StepFinished | step | step.enter / step.exit | around one step run (status success, error, skipped) |
| ToolStarted / ToolCompleted / ToolErrored | tool | - / call.done / call.error | around one tool call (pipeline task, attempt) |
| RetryStarted / RetryProcessed | retry | - | a retry policy re-runs a call (attempt = the new try) / the retry loop ended |
| CaseEvaluated | case | - | a case rule matched (data: rule index, event, actions) |
| SinkStarted / SinkProcessed | sink | - | a sink write (data: table, rows, mode) |
| NextEvaluated | next | - | routing decided (data: targets) |
| LoopStarted / LoopIterationStarted / LoopIterationCompleted / LoopFinished | loop | - / - / - / loop.done | a loop and its iterations (iteration = 0-based index) |
| PlaybookPaused | playbook | - | a gate waits |
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

__all__ = [
    "COORDINATES",
    "Event",
    "MemoryRecorder",
    "NullRecorder",
    "Recorder",
    "current_recorder",
    "emit",
    "recording",
    "set_default_recorder",
]

log = logging.getLogger(__name__)

# Airflow coordinates a recording scope stamps on its events.
COORDINATES = ("dag_id", "run_id", "task_id", "map_index", "try_number")


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

    def as_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["timestamp"] = self.timestamp.isoformat()
        out["data"] = dict(self.data)
        return out


class Recorder(Protocol):
    def record(self, event: Event) -> None: ...


class NullRecorder:
    """Drops events (the default until a store is installed)."""

    def record(self, event: Event) -> None:
        return None


class MemoryRecorder:
    """Keeps events in a list, in emission order (tests, ``noetlc run``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[Event] = []

    def record(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def named(self, *names: str) -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.name in names]

    def clear(self) -> None:
        with self._lock:
            self.events.clear()


_default: Recorder = NullRecorder()
_scope: contextvars.ContextVar[tuple[Recorder, dict[str, Any]] | None] = contextvars.ContextVar(
    "noetl_recording", default=None
)


def set_default_recorder(recorder: Recorder | None) -> Recorder:
    """Install the process-wide recorder (None = drop events); returns the previous one."""
    global _default
    previous = _default
    _default = recorder if recorder is not None else NullRecorder()
    return previous


def current_recorder() -> Recorder:
    scope = _scope.get()
    return scope[0] if scope is not None else _default


@contextlib.contextmanager
def recording(recorder: Recorder | None = None, **coordinates: Any) -> Iterator[Recorder]:
    """Scope in which events go to ``recorder`` (default: the current one) stamped with the given
    Airflow ``coordinates`` (dag_id, run_id, task_id, map_index, try_number) and any outer ones."""
    outer = _scope.get()
    target = recorder or current_recorder()
    merged = dict(outer[1]) if outer is not None else {}
    merged.update({k: v for k, v in coordinates.items() if k in COORDINATES and v is not None})
    token = _scope.set((target, merged))
    try:
        yield target
    finally:
        _scope.reset(token)


def emit(event: Event) -> None:
    """Send ``event`` to the current recorder; a failing recorder is logged, never raised."""
    scope = _scope.get()
    recorder, coordinates = scope if scope is not None else (_default, {})
    if isinstance(recorder, NullRecorder):
        return
    if coordinates:
        event = replace(
            event, **{k: v for k, v in coordinates.items() if getattr(event, k) is None}
        )
    try:
        recorder.record(event)
    except Exception:  # observing must never break the observed work
        log.exception("NoETL event recorder failed; event %s of %s dropped", event.name, event.step)
