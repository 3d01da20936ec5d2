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
| CaseStarted / CaseEvaluated | case | - | a step's case rules evaluated for an event / the rule that matched (or none) |
| SinkStarted / SinkProcessed | sink | - | a sink write (data: table, rows, mode) |
| NextEvaluated | next | - | routing decided (data: targets) |
| LoopStarted / LoopIterationStarted / LoopIterationCompleted / LoopFinished | loop | - / - / - / loop.done | a loop and its iterations (iteration = 0-based index) |
| PlaybookPaused / SignalReceived | gate | - | a gate waits / is released (answer, timer or timeout) |
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from .envelope import COORDINATES, Event
from .identity import event_id

__all__ = [
    "COORDINATES",
    "Event",
    "MemoryRecorder",
    "NullRecorder",
    "Recorder",
    "TeeRecorder",
    "current_event_id",
    "current_recorder",
    "default_recorder",
    "deliver_soon",
    "emit",
    "flush",
    "forget_default_recorder",
    "recording",
    "set_default_recorder",
    "wants",
]

log = logging.getLogger(__name__)


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


class TeeRecorder:
    """Sends every event to several recorders (``noetlc run``: its report and the store)."""

    def __init__(self, *recorders: Recorder) -> None:
        self.recorders = recorders

    def record(self, event: Event) -> None:
        for recorder in self.recorders:
            recorder.record(event)

    def flush(self, timeout: float | None = None) -> bool:
        return all(flush(recorder, timeout) for recorder in self.recorders)


def flush(recorder: Recorder, timeout: float | None = None) -> bool:
    """Flush ``recorder`` if it buffers (a store writer); True when nothing is left behind."""
    method = getattr(recorder, "flush", None)
    if method is None:
        return True
    try:
        return bool(method(timeout))
    except Exception:  # observing must never break the observed work
        log.exception("NoETL event recorder failed to flush")
        return False


def deliver_soon(recorder: Recorder) -> None:
    """Have ``recorder`` (a store writer) deliver what waits in its outbox, and what processes
    that died left in their journals, with the next batch it stores."""
    method = getattr(recorder, "deliver_soon", None)
    if method is not None:
        method()


class _Scope:
    """One recording scope: where events go, what is stamped on them, and how many events of
    each identity key it emitted (the ``occurrence`` that keeps repeated transitions apart)."""

    __slots__ = ("coordinates", "keep", "last_event_id", "occurrences", "recorder")

    def __init__(
        self,
        recorder: Recorder,
        coordinates: dict[str, Any],
        keep: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.recorder = recorder
        self.coordinates = coordinates
        self.keep = keep
        self.occurrences: dict[tuple[Any, ...], int] = {}
        self.last_event_id: str | None = None


_UNSET: Any = object()
_default: Recorder = _UNSET
_default_lock = threading.Lock()
_unscoped = _Scope(NullRecorder(), {})
_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "noetl_recording", default=None
)


def set_default_recorder(recorder: Recorder | None) -> Recorder:
    """Install the process-wide recorder (None = drop events); returns the previous one."""
    global _default
    with _default_lock:
        previous = _default
        _default = recorder if recorder is not None else NullRecorder()
        _unscoped.occurrences.clear()
    return previous if previous is not _UNSET else NullRecorder()


def forget_default_recorder() -> None:
    """Back to no recorder installed: the next ``default_recorder()`` reads the environment again
    (the warm runner after its rehearsal, so that each fork finds its own run's event log)."""
    global _default
    with _default_lock:
        _default = _UNSET
        _unscoped.occurrences.clear()


def default_recorder() -> Recorder:
    """The process-wide recorder; on first use, the one the environment configures (the store
    of ``config.settings()``, or nothing when ``NOETL_EVENTS=off``)."""
    global _default
    if _default is _UNSET:
        with _default_lock:
            if _default is _UNSET:
                _default = _configured()
    return _default


def _configured() -> Recorder:
    try:
        from .config import settings

        options = settings()
        if not options.enabled:
            return NullRecorder()
        from .outbox import Outbox
        from .store import EventStore
        from .writer import StoreRecorder

        return StoreRecorder(
            EventStore(options.url),
            Outbox(options.outbox),
            max_data_bytes=options.max_data_bytes,
            flush_timeout=options.flush_timeout,
        )
    except Exception:
        # A broken setting must not break tasks, but it must be heard: every task log says it.
        log.exception("NoETL event log is misconfigured; events of this process are dropped")
        return NullRecorder()


def current_recorder() -> Recorder:
    scope = _scope.get()
    return scope.recorder if scope is not None else default_recorder()


@contextlib.contextmanager
def recording(
    recorder: Recorder | None = None,
    *,
    keep: Callable[[str, str], bool] | None = None,
    **coordinates: Any,
) -> Iterator[Recorder]:
    """Scope in which events go to ``recorder`` (default: the current one) stamped with the given
    ``coordinates`` (:data:`COORDINATES`) and any outer ones. ``keep(name, status)``, when
    given, decides which events of the scope are recorded at all (inner scopes inherit it): a
    cursor slot keeps one completion event per item and drops the item chain's bookkeeping."""
    outer = _scope.get()
    target = recorder or current_recorder()
    merged = dict(outer.coordinates) if outer is not None else {}
    merged.update({k: v for k, v in coordinates.items() if k in COORDINATES and v is not None})
    if keep is None and outer is not None:
        keep = outer.keep
    scope = _Scope(target, merged, keep)
    if outer is not None and outer.recorder is target:
        # Same destination, same task attempt: keep counting where the outer scope is.
        scope.occurrences = outer.occurrences
    token = _scope.set(scope)
    try:
        yield target
    finally:
        _scope.reset(token)


def current_event_id() -> str | None:
    """Id of the event this scope emitted last: the parent of what starts now (a nested run)."""
    scope = _scope.get()
    return scope.last_event_id if scope is not None else None


def wants(name: str, status: str) -> bool:
    """Whether an event ``name`` with ``status`` would be recorded here: producers ask before
    building an expensive payload (events off, or dropped by the scope's ``keep``)."""
    scope = _scope.get()
    if scope is None:
        return not isinstance(default_recorder(), NullRecorder)
    if isinstance(scope.recorder, NullRecorder):
        return False
    return scope.keep is None or scope.keep(name, status)


def _stamped(event: Event, changes: dict[str, Any]) -> Event:
    """``dataclasses.replace(event, **changes)`` without running ``__init__`` again: every field
    is the event's own (already built) or a stamp, and replace costs ~12x as much, paid by every
    event of every loop item (7 per item)."""
    stamped = object.__new__(Event)
    stamped.__dict__.update(event.__dict__)
    stamped.__dict__.update(changes)
    return stamped


def emit(event: Event) -> None:
    """Send ``event`` to the current recorder, stamped and with its deterministic id; a failing
    recorder is logged, never raised."""
    scope = _scope.get()
    if scope is None:
        scope = _unscoped
        scope.recorder = default_recorder()
    recorder = scope.recorder
    if isinstance(recorder, NullRecorder):
        return
    if scope.keep is not None and not scope.keep(event.name, event.status):
        return
    try:
        # One copy of the event per emit (this runs for every event of every step): stamped
        # first, so its identity is read off the copy in one call.
        changes = {k: v for k, v in scope.coordinates.items() if getattr(event, k) is None}
        if event.event_id is None:
            event = _stamped(event, changes)
            key = event.identity_key()
            occurrence = scope.occurrences.get(key, 0)
            scope.occurrences[key] = occurrence + 1
            event.__dict__["event_id"] = event_id(*key, occurrence)  # the copy is ours
        elif changes:
            event = _stamped(event, changes)
        scope.last_event_id = event.event_id
        recorder.record(event)
    except Exception:  # observing must never break the observed work
        log.exception("NoETL event recorder failed; event %s of %s dropped", event.name, event.step)
