"""``kind: playbook`` run inline: the child playbook's compiled steps, in this process.

Used for a ``playbook`` task inside a pipeline, a cyclic region or a loop body, and for
step-level nested calls when no scheduler can run a child DAG (``dag.test()``, ``noetlc run``).
The child is the DAG the compiler made of the catalog path (``path``; ``runtime.catalog``); its
workload is its own defaults with the call's ``input``/``args``/``payload`` (and the step input)
on top; it gets its own execution id, derived from the parent's and the call site.

Result (:func:`call_mode`): with ``return_result`` (NoETL 5, noetl/tools ded94546 playbook.rs:55)
the result of the child's ``result_step``, else of the last step the child ran; with
``return_step`` the result of that step, or, where the engine says so
(``profile.playbook_return_step_status``, NoETL 5: playbook.rs:446), the child's status payload
:func:`status_payload`, a failed child not failing the call; with neither, as the
engine does (``profile.playbook_call_waits``): the Python engines' worker waits here for the last
step's result, NoETL 5 returns ``{status: started, execution_id, path, async: true}`` without
waiting (playbook.rs:387). Inline (no scheduler beside this process to run the child while the
caller goes on) the started child still runs to its end first, but its failure is not the
call's: it is logged and its own run events say so.

Running a child is running the interpreter, which stands above this module: ``interpret`` is
handed in. ``runtime/interpreter.py`` registers the ``playbook``/``playbooks`` tool kinds with
itself bound, so whatever imports the interpreter can run an inline child.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..errors import error_family
from ..events import current_event_id, recording
from ..events.listener import playbook_identity
from ..events.workflow import run_finished, run_started
from ..tools.outcome import ToolCall, ToolOutcome, tool_error
from .call_settings import parent_of, poll_interval, whole_number
from .catalog import PlaybookNotFound, dag_id_for_path, find_playbook
from .interpretation import Interpretation
from .step_outcome import StepFailed

__all__ = [
    "Interpret",
    "call_mode",
    "parent_of",
    "poll_interval",
    "run_child",
    "run_playbook",
    "started_record",
    "status_payload",
]

# interpreter.interpret(steps, entries, base) -> Interpretation, handed down by its caller.
Interpret = Callable[..., Any]

KIND = "playbook"
logger = logging.getLogger(__name__)

CallMode = Literal["result", "start", "status"]


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def call_mode(config: Mapping[str, Any], profile: Any) -> tuple[CallMode, str | None]:
    """How a ``playbook`` call ends, and the child step whose result it returns (None: the last
    step that ran): ``result`` waits for the child, ``start`` returns :func:`started_record` as
    soon as the child is started, ``status`` waits and returns :func:`status_payload` (see the
    module docstring)."""
    if _truthy(config.get("return_result")):
        step = config.get("result_step")
        return "result", step if isinstance(step, str) and step else None
    step = config.get("return_step")
    if isinstance(step, str) and step:
        return ("status" if profile.playbook_return_step_status else "result"), step
    return ("result" if profile.playbook_call_waits else "start"), None


def started_record(execution_id: Any, path: Any) -> dict[str, Any]:
    """NoETL 5's result of a call that does not wait (playbook.rs:387)."""
    return {"status": "started", "execution_id": str(execution_id), "path": path, "async": True}


def status_payload(execution_id: Any, ran: Any, failed_step: str | None = None) -> dict[str, Any]:
    """NoETL 5's ``return_step`` result: the child's ``/status`` document (noetl/server
    d9ec700c services/execution.rs:962 ExecutionStatus) for a child that has ended: ``ran`` is
    the child's Interpretation, ``failed_step`` the step whose failure ended it. A step counts
    once however often it ran (the server counts distinct node names)."""
    entered = list(dict.fromkeys([*ran.order, *([failed_step] if failed_step else [])]))
    failed = set(ran.errors) | ({failed_step} if failed_step else set())
    return {
        "execution_id": whole_number(execution_id),
        "status": "FAILED" if failed else "COMPLETED",
        "current_step": entered[-1] if entered else None,
        "progress": {
            "total_steps": len(entered),
            "completed_steps": sum(1 for step in entered if step not in failed),
            "running_steps": 0,
            "failed_steps": len(failed),
        },
        "is_cancelled": False,
    }


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
    """A child run's execution id: deterministic from the parent's execution and the call
    (``task``: the call's ToolStarted event id, or the pipeline task label), so replaying the same
    parent attempt derives the same ids and two calls never share one."""
    digest = hashlib.sha256(f"{parent}\x1f{step}\x1f{task}\x1f{dag_id}".encode()).digest()
    return (int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)) or 1


def run_child(
    dag_id: str,
    overrides: Mapping[str, Any],
    *,
    interpret: Interpret,
    execution_id: int,
    return_step: str | None = None,
    strict: bool | None = None,
    parent_execution_id: int | None = None,
    status: bool = False,
) -> Any:
    """Run the compiled playbook ``dag_id`` inline; returns its result (see module docstring),
    or with ``status`` its :func:`status_payload`, failed or not.

    Raises ``catalog.PlaybookNotFound`` and ``step.StepFailed``.
    """
    child = find_playbook(dag_id)
    workload = {**child.workload, **overrides}
    base = {
        "workload": workload,
        "results": {},
        "ctx": {},
        "vars": {},
        "execution_id": execution_id,
    }
    if strict is not None:
        base["strict"] = strict
    if status:
        state = Interpretation()
        try:
            _observed_child(
                child, workload, base, execution_id, parent_execution_id, interpret, state=state
            )
        except StepFailed as exc:
            return status_payload(execution_id, state, exc.step)
        return status_payload(execution_id, state)
    ran = _observed_child(child, workload, base, execution_id, parent_execution_id, interpret)
    if return_step:
        if return_step not in ran.results:
            raise LookupError(
                f"child playbook {dag_id!r} finished without running its return_step {return_step!r}"
            )
        return ran.results[return_step]
    return ran.last_result


def _observed_child(
    child: Any,
    workload: Mapping[str, Any],
    base: Mapping[str, Any],
    execution_id: int,
    parent_execution_id: int | None,
    interpret: Interpret,
    **options: Any,
) -> Any:
    """Interpret the child between its run events: the child's own execution in the log,
    linked to the parent's execution and to the parent event that started it."""
    path, digest = playbook_identity(child.doc)  # the catalog read it with the DAG file
    link: dict[str, Any] = {
        "parent_execution_id": None if parent_execution_id is None else str(parent_execution_id),
        "parent_event_id": current_event_id(),
    }
    # Coordinates stay the parent task's (where it ran); the playbook stamps are the child's.
    with recording(playbook_path=path, playbook_hash=digest):
        run_started(execution_id, child.dag_id, workload=workload, **link)
        try:
            ran = interpret(child.steps, [(step, {}) for step in child.entry], base, **options)
        except BaseException as exc:
            run_finished(
                execution_id,
                child.dag_id,
                status="error",
                data=_error_data(exc),
                **link,
            )
            raise
        run_finished(execution_id, child.dag_id, status="success", data={}, **link)
    return ran


def run_playbook(call: ToolCall, *, interpret: Interpret) -> ToolOutcome:
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
    # The call's own ToolStarted id tells this call from every other one of the same call site
    # (loop iterations, region visits, retry attempts, Airflow tries); without events, the site.
    execution_id = child_execution_id(parent, call.step, current_event_id() or call.task, dag_id)
    mode, return_step = call_mode(config, call.profile)
    try:
        result = run_child(
            dag_id,
            child_workload(config, call.step_input),
            interpret=interpret,
            execution_id=execution_id,
            return_step=return_step,
            parent_execution_id=parent_of(config, parent),
            status=mode == "status",
        )
    except PlaybookNotFound as exc:
        return ToolOutcome.failure(tool_error(KIND, "PlaybookNotFound", str(exc)))
    except (StepFailed, LookupError) as exc:
        if mode != "start":
            return _child_failure(exc, dag_id, execution_id)
        logger.warning("started child playbook %s failed (not waited for): %s", dag_id, exc)
    if mode == "start":
        return ToolOutcome.success(
            started_record(execution_id, path or dag_id),
            child_execution_id=str(execution_id),
            dag_id=dag_id,
        )
    return ToolOutcome.success(result, child_execution_id=str(execution_id), dag_id=dag_id)


def _child_failure(exc: BaseException, dag_id: str, execution_id: int) -> ToolOutcome:
    """The call's failure when the child it waited for failed (``StepFailed``) or ended without
    running the step whose result it returns (``LookupError``)."""
    if isinstance(exc, StepFailed):
        error = tool_error(
            KIND,
            "ChildPlaybookFailed",
            f"child playbook {dag_id!r} failed: {exc}",
            retryable=bool(exc.error.get("retryable")),
            code=exc.error.get("code"),
        )
        return ToolOutcome.failure(error, data={"execution_id": str(execution_id)})
    return ToolOutcome.failure(tool_error(KIND, "ReturnStepNotRun", str(exc)))


def _error_data(exc: BaseException) -> dict[str, Any]:
    """A failed child run's PlaybookFinished data: the error, and its family when it is one of
    the runtime's (``errors.error_family``)."""
    data: dict[str, Any] = {"error": f"{type(exc).__name__}: {exc}"}
    family = error_family(exc)
    if family is not None:
        data["error_family"] = family
    return data
