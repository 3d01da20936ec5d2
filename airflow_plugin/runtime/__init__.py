"""NoETL step runtime — pure Python, no Airflow imports (unit-testable without Airflow).

Modules: ``ids`` (execution ids), ``proxy`` (step-result addressing), ``context`` (render context),
``render`` (Jinja rendering, coercion, conditions), ``payload`` (the compiler -> runtime contract),
``pipeline`` (tool pipelines and policies), ``step`` (one step end to end).

The names below are resolved lazily: ``tools`` imports ``runtime.render`` while ``runtime.step``
imports ``tools``; eager re-exports here would make that a circular import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .context import build_context
    from .ids import execution_id_for
    from .payload import validate_payload
    from .pipeline import PipelineResult, run_pipeline
    from .proxy import ResultProxy, unwrap
    from .render import RenderError, evaluate_condition, render_value
    from .step import FeatureNotAvailable, StepFailed, StepOutcome, execute_step, routing_targets

_EXPORTS = {
    "build_context": "context",
    "execution_id_for": "ids",
    "validate_payload": "payload",
    "PipelineResult": "pipeline",
    "run_pipeline": "pipeline",
    "ResultProxy": "proxy",
    "unwrap": "proxy",
    "RenderError": "render",
    "evaluate_condition": "render",
    "render_value": "render",
    "FeatureNotAvailable": "step",
    "StepFailed": "step",
    "StepOutcome": "step",
    "execute_step": "step",
    "routing_targets": "step",
}

__all__ = [
    "FeatureNotAvailable",
    "PipelineResult",
    "RenderError",
    "ResultProxy",
    "StepFailed",
    "StepOutcome",
    "build_context",
    "evaluate_condition",
    "execute_step",
    "execution_id_for",
    "render_value",
    "routing_targets",
    "run_pipeline",
    "unwrap",
    "validate_payload",
]
assert sorted(__all__) == sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
