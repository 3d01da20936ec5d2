"""The step payload as the runtime reads it: defaults filled in, arc targets resolved.

A payload is decoded ONCE, where it enters the plugin: each operator calls
``noetl_compile.step_model.decode_step`` (or its loop/region/reads siblings) in its constructor,
so a malformed payload is a DAG import error naming the step and the field, not a task failure at
3 a.m. The runtime below the operators (``runtime.step``, ``runtime.loop``, the interpreter)
trusts what it is handed: a region's, a loop body's and an inline child's steps reach it through
an operator's constructor too (:func:`as_step` decodes a plain payload a caller hands it, such as
an inline child's, once). Unknown top-level keys are rejected on purpose: a key the runtime does
not know is a feature it would otherwise silently skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from noetl_compile.step_contract import StepPayload
from noetl_compile.step_decode import decode_step
from noetl_compile.step_model import (
    DIALECTS,
    EXTENSION_KEYS,
    PAYLOAD_KEYS,
    ROUTING_MODES,
    STEP_DEFAULTS,
    Step,
    normalise_case_next,
)

__all__ = [
    "DIALECTS",
    "PAYLOAD_DEFAULTS",
    "PAYLOAD_EXTENSIONS",
    "PAYLOAD_KEYS",
    "ROUTING_MODES",
    "Step",
    "arc_task_id",
    "as_step",
    "normalise_case_next",
    "with_defaults",
]

PAYLOAD_EXTENSIONS = EXTENSION_KEYS
# What an absent key means (the table the compiler compacts with). An absent arc ``when`` is an
# unguarded arc, an absent arc ``task_id`` is the step name (``arc_task_id``), an absent routing
# ``mode`` exclusive.
PAYLOAD_DEFAULTS: Mapping[str, Any] = STEP_DEFAULTS


def with_defaults(payload: Mapping[str, Any]) -> StepPayload:
    """``payload`` with every absent contract key set to its default (fresh containers)."""
    full: dict[str, Any] = {key: _fresh(value) for key, value in PAYLOAD_DEFAULTS.items()}
    full.update(payload)
    routing = full.get("routing")
    if isinstance(routing, Mapping):
        full["routing"] = {**_fresh(STEP_DEFAULTS["routing"]), **routing}
    return full  # type: ignore[return-value]


def _fresh(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


def arc_task_id(arc: Mapping[str, Any]) -> str | None:
    """Airflow task id of a routing target: ``task_id`` if given (``None`` = the target has no task
    in this DAG, e.g. an implicit ``end``), else the step name."""
    task_id: str | None = arc["task_id"] if "task_id" in arc else arc["step"]
    return task_id


def as_step(payload: Step | Mapping[str, Any]) -> Step:
    """The typed step: as it is when an operator decoded it, decoded here when a caller hands
    a plain payload (tests, an inline child's steps)."""
    return payload if isinstance(payload, Step) else decode_step(payload)
