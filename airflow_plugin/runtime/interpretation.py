"""What an inline run of steps leaves: results, writes, the order steps ran in, errors.

Its own module below the interpreter and nested playbook calls: a nested ``return_step`` call
(runtime/nested.py) hands an empty one to the interpreter and reads it back when the child
fails, to report the child's progress (NoETL 5's status payload)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Interpretation"]


@dataclass
class Interpretation:
    results: dict[str, Any] = field(default_factory=dict)  # step -> latest result
    ctx: dict[str, Any] = field(default_factory=dict)  # ctx writes, in run order
    vars: dict[str, Any] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # steps in the order they ran
    attempts: dict[str, int] = field(default_factory=dict)  # step -> tool calls (iterations)
    # Targets outside the set: (step, task id or None, args), first time each was chosen.
    exits: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)
    # Steps whose failed call routed on (outcome ``status: error``) -> the error: the run still
    # ends failed (operators/outcome.py).
    errors: dict[str, Any] = field(default_factory=dict)

    @property
    def last_result(self) -> Any:
        return self.results.get(self.order[-1]) if self.order else None
