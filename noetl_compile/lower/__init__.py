"""Stage 5 — lower: the checked AST -> IR (step graph + task plan), see ``build.lower``."""

from __future__ import annotations

from .build import dag_id_for, lower, step_graph
from .ir import IR, Task, Unit

__all__ = ["IR", "Task", "Unit", "dag_id_for", "lower", "step_graph"]
