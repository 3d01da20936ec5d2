"""The events of a whole run: requested and started, finished and processed.

Told by the listener for Airflow DAG runs and by the inline child runner for a nested playbook
that runs inside its parent's task (``runtime.nested.run_child``); both use these two functions,
so a run looks the same in the log however it ran. Ids depend on the execution and the name
only: every task of a run may announce its start, the log keeps one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import names
from .identity import event_id
from .recorder import Event, emit

__all__ = ["run_finished", "run_started"]


def run_started(
    execution_id: int, entity_id: str, *, workload: Mapping[str, Any], **fields: Any
) -> None:
    """PlaybookExecutionRequested (data: the workload), PlaybookRequestEvaluated and
    WorkflowStarted. The request reached a run of a compiled DAG, so it was evaluated valid: the
    playbook passed `noetlc check` at compile time and the workload Airflow's params validation."""
    _emit_all(
        execution_id,
        entity_id,
        fields,
        (names.PLAYBOOK_EXECUTION_REQUESTED, "playbook", "success", {"workload": dict(workload)}),
        (names.PLAYBOOK_REQUEST_EVALUATED, "playbook", "success", {"valid": True}),
        (names.WORKFLOW_STARTED, "workflow", "in_progress", {}),
    )


def run_finished(
    execution_id: int, entity_id: str, *, status: str, data: Mapping[str, Any], **fields: Any
) -> None:
    """WorkflowFinished and the terminal PlaybookProcessed, both with ``status``."""
    _emit_all(
        execution_id,
        entity_id,
        fields,
        (names.WORKFLOW_FINISHED, "workflow", status, dict(data)),
        (names.PLAYBOOK_PROCESSED, "playbook", status, dict(data)),
    )


def _emit_all(
    execution_id: int,
    entity_id: str,
    fields: Mapping[str, Any],
    *events: tuple[str, str, str, Mapping[str, Any]],
) -> None:
    """Emit run-level events (name, entity, status, data), each with its id from the execution
    and the name alone."""
    for name, entity, status, data in events:
        emit(
            Event(
                name=name,
                entity=entity,
                entity_id=entity_id,
                status=status,
                execution_id=str(execution_id),
                data=data,
                event_id=event_id("run", execution_id, name),
                **fields,
            )
        )
