"""The events of a whole run: requested and started, finished and processed.

Told by the listener for Airflow DAG runs and by the inline child runner for a nested playbook
that runs inside its parent's task (``tools.playbook.run_child``); both use these two functions,
so a run looks the same in the log however it ran. Ids depend on the execution and the name
only: every task of a run may announce its start, the log keeps one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .identity import event_id
from .recorder import Event, emit

__all__ = ["run_finished", "run_started"]


def _common(execution_id: int, entity_id: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    return {"entity_id": entity_id, "execution_id": str(execution_id), **fields}


def run_started(
    execution_id: int, entity_id: str, *, workload: Mapping[str, Any], **fields: Any
) -> None:
    """PlaybookExecutionRequested (data: the workload), PlaybookRequestEvaluated and
    WorkflowStarted. The request reached a run of a compiled DAG, so it was evaluated valid: the
    playbook passed `noetlc check` at compile time and the workload Airflow's params validation."""
    common = _common(execution_id, entity_id, fields)
    emit(
        Event(
            name="PlaybookExecutionRequested",
            entity="playbook",
            status="success",
            data={"workload": dict(workload)},
            event_id=event_id("run", execution_id, "PlaybookExecutionRequested"),
            **common,
        )
    )
    emit(
        Event(
            name="PlaybookRequestEvaluated",
            entity="playbook",
            status="success",
            data={"valid": True},
            event_id=event_id("run", execution_id, "PlaybookRequestEvaluated"),
            **common,
        )
    )
    emit(
        Event(
            name="WorkflowStarted",
            entity="workflow",
            status="in_progress",
            event_id=event_id("run", execution_id, "WorkflowStarted"),
            **common,
        )
    )


def run_finished(
    execution_id: int, entity_id: str, *, status: str, data: Mapping[str, Any], **fields: Any
) -> None:
    """WorkflowFinished and the terminal PlaybookProcessed, both with ``status``."""
    common = _common(execution_id, entity_id, fields)
    for name, entity in (("WorkflowFinished", "workflow"), ("PlaybookProcessed", "playbook")):
        emit(
            Event(
                name=name,
                entity=entity,
                status=status,
                data=dict(data),
                event_id=event_id("run", execution_id, name),
                **common,
            )
        )
