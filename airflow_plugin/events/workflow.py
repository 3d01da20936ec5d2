"""The events of a whole run: requested and started, finished and processed.

Told by the listener for Airflow DAG runs and by the inline child runner for a nested playbook
that runs inside its parent's task (``runtime.nested.run_child``); both use these two functions,
so a run looks the same in the log however it ran. Ids depend on the execution, the name and
the run's attempt: every task of a run may announce its start, the log keeps one per attempt,
while a run cleared and finished again (Airflow's ``clear_number``: 0 for the first attempt, one
more per Clear) starts and finishes anew, so each re-finish is an event of its own. The request
(PlaybookExecutionRequested, PlaybookRequestEvaluated) happened once, whatever re-ran after.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import names
from .identity import event_id
from .recorder import Event, emit

__all__ = ["run_finished", "run_started"]


def run_started(
    execution_id: int,
    entity_id: str,
    *,
    workload: Mapping[str, Any],
    run_attempt: int = 0,
    **fields: Any,
) -> None:
    """PlaybookExecutionRequested (data: the workload), PlaybookRequestEvaluated and
    WorkflowStarted. The request reached a run of a compiled DAG, so it was evaluated valid: the
    playbook passed `noetlc check` at compile time and the workload Airflow's params validation."""
    _emit_all(
        execution_id,
        entity_id,
        fields,
        0,
        (names.PLAYBOOK_EXECUTION_REQUESTED, "playbook", "success", {"workload": dict(workload)}),
        (names.PLAYBOOK_REQUEST_EVALUATED, "playbook", "success", {"valid": True}),
    )
    _emit_all(
        execution_id,
        entity_id,
        fields,
        run_attempt,
        (names.WORKFLOW_STARTED, "workflow", "in_progress", _attempt_data({}, run_attempt)),
    )


def run_finished(
    execution_id: int,
    entity_id: str,
    *,
    status: str,
    data: Mapping[str, Any],
    run_attempt: int = 0,
    **fields: Any,
) -> None:
    """WorkflowFinished and the terminal PlaybookProcessed, both with ``status``, for the run's
    attempt ``run_attempt`` (its ``clear_number``)."""
    data = _attempt_data(data, run_attempt)
    _emit_all(
        execution_id,
        entity_id,
        fields,
        run_attempt,
        (names.WORKFLOW_FINISHED, "workflow", status, data),
        (names.PLAYBOOK_PROCESSED, "playbook", status, data),
    )


def _attempt_data(data: Mapping[str, Any], run_attempt: int) -> dict[str, Any]:
    # Stored in data, not in the ``attempt`` column: that one counts a step's retries.
    return {**data, "run_attempt": run_attempt} if run_attempt else dict(data)


def _emit_all(
    execution_id: int,
    entity_id: str,
    fields: Mapping[str, Any],
    run_attempt: int,
    *events: tuple[str, str, str, Mapping[str, Any]],
) -> None:
    """Emit run-level events (name, entity, status, data), each with its id from the execution,
    the name and the run's attempt (the first attempt's ids are the execution and name alone, as
    they always were, so logs written before attempts counted keep their ids)."""
    attempt = (run_attempt,) if run_attempt else ()
    for name, entity, status, data in events:
        emit(
            Event(
                name=name,
                entity=entity,
                entity_id=entity_id,
                status=status,
                execution_id=str(execution_id),
                data=data,
                event_id=event_id("run", execution_id, name, *attempt),
                **fields,
            )
        )
