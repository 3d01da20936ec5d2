"""What the view shows of one DAG run, read from the configured event store.

Plain Python over ``events.store`` and ``events.projection``: the state is exactly what
``noetlc status`` prints (``project``), the timeline the stored events in order. Every value
leaving here goes through ``redact`` once more: events are redacted when recorded, and a page
must not become the place where a secret recorded by an older version shows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ..events import names
from ..events.config import settings
from ..events.projection import project
from ..events.store import EventStore
from ..hooks.redact import redact
from ..templating.ids import execution_id_for

__all__ = ["RunView", "gate_history", "load_run", "redacted_state", "store"]

_stores: dict[str, EventStore] = {}
_lock = threading.Lock()


def store(url: str | None = None) -> EventStore:
    """One ``EventStore`` (one engine, one pool) per URL for the API server's lifetime."""
    url = url or settings().url
    with _lock:
        if url not in _stores:
            _stores[url] = EventStore(url)
        return _stores[url]


def gate_history(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every gate that paused the run, in order, with its answer once one came."""
    gates: dict[str, dict[str, Any]] = {}
    for event in events:
        name, gate = event.get("name"), event.get("entity_id")
        if name == names.PLAYBOOK_PAUSED:
            gates[gate] = {
                "gate": gate,
                "step": event.get("step"),
                "since": event.get("timestamp"),
                "task_id": event.get("task_id"),
                "waiting": True,
                "answered_at": None,
                "answer": None,
                "request": event.get("data") or {},
            }
        elif name == names.SIGNAL_RECEIVED and gate in gates:
            gates[gate].update(
                waiting=False, answered_at=event.get("timestamp"), answer=event.get("data") or {}
            )
    return list(gates.values())


def redacted_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """The projection with its values redacted, and its names left as they are: a step, task
    or loop is named by the playbook (a step `use_token` is no secret, and masking its name
    masked its whole entry), while what a step produced, wrote or failed with is redacted under
    its own keys."""
    out = dict(state)
    for part in ("ctx", "vars", "workload"):  # keyed by variable names: their keys count
        if isinstance(state.get(part), Mapping):
            out[part] = redact(dict(state[part]))
    out["results"] = {step: redact(result) for step, result in state.get("results", {}).items()}
    for part in ("steps", "tasks", "loops"):
        entries = state.get(part)
        if isinstance(entries, Mapping):
            out[part] = {
                name: {k: v if k in _NAMES else redact(v, key=k) for k, v in entry.items()}
                for name, entry in entries.items()
            }
    out["gates"] = [redact(gate) for gate in state.get("gates") or []]
    return out


# Entries of a step, task or loop that hold names and counts, never a value a step produced.
_NAMES = frozenset({"status", "runs", "step", "try_number", "total", "finished", "failed", "done"})


class RunView:
    """The events of one DAG run and what follows from them."""

    def __init__(self, dag_id: str, run_id: str, events: list[dict[str, Any]]) -> None:
        self.dag_id = dag_id
        self.run_id = run_id
        self.execution_id = execution_id_for(dag_id, run_id)
        self.events = events
        self.state = redacted_state(project(events))
        self.gates = gate_history(events)

    def for_task(self, task_id: str, map_index: int | None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e.get("task_id") == task_id
            and (map_index is None or map_index < 0 or e.get("map_index") == map_index)
        ]


def load_run(dag_id: str, run_id: str, url: str | None = None) -> RunView:
    execution = execution_id_for(dag_id, run_id)
    rows = store(url).events(execution)
    return RunView(dag_id, run_id, [redact(row) for row in rows])
