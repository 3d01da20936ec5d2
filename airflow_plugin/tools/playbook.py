"""``kind: playbook`` run inline: the child playbook's compiled steps, in this process.

Used for a ``playbook`` task inside a pipeline, a cyclic region or a loop body, and for
step-level nested calls when no scheduler can run a child DAG (``dag.test()``, ``noetlc run``).
The child is the DAG the compiler made of the catalog path (``path``; ``runtime.catalog``); its
workload is its own defaults with the call's ``input``/``args``/``payload`` (and the step input)
on top; it gets its own execution id, derived from the parent's and the call site.

Result: the result of the child's ``return_step`` when given (NoETL polls the child for that step),
else of the last step the child ran.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from .outcome import ToolCall, ToolOutcome, tool_error

__all__ = ["run_child", "run_playbook"]

KIND = "playbook"


def child_workload(config: Mapping[str, Any], step_input: Mapping[str, Any]) -> dict[str, Any]:
    """The call's overrides of the child's workload: ``payload``/``args``/``input``/``with``/
    ``data`` of the tool block, then the step input."""
    workload: dict[str, Any] = {}
    for key in ("payload", "args", "input", "with", "data"):
        value = config.get(key)
        if isinstance(value, Mapping):
            workload.update(value)
    workload.update(step_input)
    return workload


def child_execution_id(parent: Any, step: str, task: str, dag_id: str) -> int:
    """A child run's execution id: deterministic from the parent's and the call site, so a retried
    parent task gives its child the same id."""
    digest = hashlib.sha256(f"{parent}\x1f{step}\x1f{task}\x1f{dag_id}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)) or 1


def run_child(
    dag_id: str,
    overrides: Mapping[str, Any],
    *,
    execution_id: int,
    return_step: str | None = None,
    strict: bool | None = None,
) -> Any:
    """Run the compiled playbook ``dag_id`` inline; returns its result (see module docstring).

    Raises ``runtime.catalog.PlaybookNotFound`` and ``runtime.step.StepFailed``.
    """
    from ..runtime.catalog import find_playbook
    from ..runtime.interpreter import interpret

    child = find_playbook(dag_id)
    base = {
        "workload": {**child.workload, **overrides},
        "results": {},
        "ctx": {},
        "vars": {},
        "execution_id": execution_id,
    }
    if strict is not None:
        base["strict"] = strict
    ran = interpret(child.steps, [(step, {}) for step in child.entry], base)
    if return_step:
        if return_step not in ran.results:
            raise LookupError(
                f"child playbook {dag_id!r} finished without running its return_step {return_step!r}"
            )
        return ran.results[return_step]
    return ran.last_result


def run_playbook(call: ToolCall) -> ToolOutcome:
    from ..runtime.catalog import PlaybookNotFound, dag_id_for_path
    from ..runtime.step import StepFailed

    config = call.config
    path = config.get("path") or config.get("playbook")
    dag_id = config.get("dag_id")
    if not dag_id:
        if not isinstance(path, str) or not path.strip() or "{{" in path:
            return ToolOutcome.failure(
                tool_error(
                    KIND, "ConfigError", f"playbook tool needs a catalog `path`, got {path!r}"
                )
            )
        dag_id = dag_id_for_path(path)
    parent = call.context.get("execution_id", 0)
    execution_id = child_execution_id(parent, call.step, call.task, dag_id)
    try:
        result = run_child(
            dag_id,
            child_workload(config, call.step_input),
            execution_id=execution_id,
            return_step=config.get("return_step"),
        )
    except PlaybookNotFound as exc:
        return ToolOutcome.failure(tool_error(KIND, "PlaybookNotFound", str(exc)))
    except StepFailed as exc:
        error = tool_error(
            KIND,
            "ChildPlaybookFailed",
            f"child playbook {dag_id!r} failed: {exc}",
            retryable=bool(exc.error.get("retryable")),
            code=exc.error.get("code"),
        )
        return ToolOutcome.failure(error, data={"execution_id": str(execution_id)})
    except LookupError as exc:
        return ToolOutcome.failure(tool_error(KIND, "ReturnStepNotRun", str(exc)))
    return ToolOutcome.success(result, child_execution_id=str(execution_id), dag_id=dag_id)
