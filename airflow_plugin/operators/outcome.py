"""``NoetlOutcomeOperator``: the run ends failed when a step's call failed, as NoETL ends it.

NoETL's canonical engine goes on along a failed step's arcs (an arc without ``when`` matches,
a condition sees ``event.name == 'call.error'``) and still marks the execution failed. On
Airflow the failed step's task succeeds, recording ``status: error`` and the error in its XCom,
so that the branch machinery takes its route; the compiler then puts this task after the DAG's
leaves (``noetl_compile/lower/outcome.py``), the *watcher* pattern of Airflow's own system
tests:

* trigger rule ``none_failed``: a failed or upstream-failed leaf makes this task
  upstream-failed, so a step that failed outright still fails the run (Airflow decides a run's
  state from its leaves, and this task is one);
* when it runs (every leaf succeeded or was skipped: recovery steps have run to their end), it
  reads the XCom of the step tasks it watches and fails, naming each step whose call failed and
  its error, or succeeds when none did. Its log says which.

The listener turns the run's state into ``WorkflowFinished`` (``error`` / ``success``), and
``noetlc run`` / ``noetlc status`` report the run failed with this task's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseOperator

from ..compat import AirflowFailException
from .base import XCOM_RETURN_KEY, is_noetl_output

__all__ = ["NoetlOutcomeOperator", "failed_calls"]


def failed_calls(watch: Mapping[str, str], outputs: Mapping[str, Any]) -> list[str]:
    """One line per step whose output records a failed call: ``step 'x': Type: message``.

    ``watch``: task id -> step (or region) name; ``outputs``: task id -> XCom ``return_value``
    (None for a task that did not run). A region's output names its members' errors."""
    lines: list[str] = []
    for task_id, name in watch.items():
        output = outputs.get(task_id)
        if not is_noetl_output(output) or output.get("status") != "error":
            continue
        errors = output.get("errors")
        if not isinstance(errors, Mapping) or not errors:
            errors = {name: output.get("error")}
        for step, error in errors.items():
            lines.append(f"step {step!r}: {_error_text(error)}")
    return lines


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        kind, message = error.get("type") or error.get("kind"), error.get("message")
        if kind and message:
            return f"{kind}: {message}"
        return str(message or kind or "call failed")
    return str(error) if error else "call failed"


class NoetlOutcomeOperator(BaseOperator):
    """Fail the run when a watched step's call failed (see the module docstring).

    :param watch: result task id -> step or region name, the tasks whose failed call may have
        routed on (the compiler lists them).
    """

    template_fields = ()
    ui_color = "#f0f0f0"
    custom_operator_name = "NoETL run outcome"

    def __init__(self, *, watch: Mapping[str, str], **kwargs: Any) -> None:
        if not isinstance(watch, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in watch.items()
        ):
            raise ValueError("`watch` must map task id -> step name (strings)")
        super().__init__(**kwargs)
        self.watch = dict(watch)

    def execute(self, context: Any) -> None:
        ti = context["ti"]
        outputs = {
            task_id: ti.xcom_pull(task_ids=task_id, key=XCOM_RETURN_KEY) for task_id in self.watch
        }
        failed = failed_calls(self.watch, outputs)
        if failed:
            # NoETL's status: failed at the first call.error, whatever ran after it.
            raise AirflowFailException(
                "NoETL ends this run failed: a step's call failed and the run went on along "
                "its arcs; " + "; ".join(failed)
            )
        self.log.info(
            "NoETL run outcome: no step call failed (%d step task(s) watched)", len(self.watch)
        )
