"""What a step run ends with: ``StepOutcome`` (result, ctx/vars writes, chosen targets), the
failure nothing handles (``StepFailed``), a DSL feature this runtime lacks
(``FeatureNotAvailable``) and whether render issues are fatal (``strict_mode``). The floor under
the step's case rules, call loop and observation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import NoetlFailure, NoetlUnavailable

__all__ = ["FeatureNotAvailable", "StepFailed", "StepOutcome", "strict_mode"]


class StepFailed(NoetlFailure):
    """The step failed and nothing in its routing/case handles the failure."""

    def __init__(self, step: str, error: Mapping[str, Any] | None, result: Any = None):
        self.step = step
        self.error = dict(error or {})
        self.result = result
        kind = self.error.get("type", "Error")
        message = self.error.get("message", "tool call failed")
        where = self.error.get("field")
        prefix = f"{where}: " if where and not str(message).startswith("field ") else ""
        super().__init__(f"step {step!r} failed: {prefix}{kind}: {message}")


class FeatureNotAvailable(NoetlUnavailable):
    """A DSL feature reached at run time that this runtime does not implement."""


@dataclass
class StepOutcome:
    result: Any
    ctx_writes: dict[str, Any] = field(default_factory=dict)
    vars_writes: dict[str, Any] = field(default_factory=dict)
    next_steps: list[str] = field(default_factory=list)
    # Airflow task id of each chosen target, in the order of ``next_steps``.
    next_task_ids: list[str] = field(default_factory=list)
    # Rendered ``args`` per chosen target step (arc/case ``next`` args).
    next_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    status: str = "ok"  # ok | break | error (an error handled by case/routing)
    error: dict[str, Any] | None = None
    attempts: int = 1  # tool calls of this step run (iterations for a loop step)
    issues: list[str] = field(default_factory=list)
    # (step, task id or None) of each chosen target, in order: regions tell members from exits.
    next_targets: list[tuple[str, str | None]] = field(default_factory=list)
    # Results of other steps this run produced (a v1 loop's body steps and end_loop step).
    extra_results: dict[str, Any] = field(default_factory=dict)
    # Targets a case rule chose during a loop iteration: taken once, when the loop is done.
    deferred_next: list[dict[str, Any]] = field(default_factory=list)


def strict_mode(inputs: Mapping[str, Any] | None = None) -> bool:
    """Strict: render issues fail the step (``NOETL_STRICT=1``, or ``strict`` in the inputs)."""
    if inputs and inputs.get("strict") is not None:
        return bool(inputs["strict"])
    return os.environ.get("NOETL_STRICT", "").strip().lower() in ("1", "true", "yes", "on")
