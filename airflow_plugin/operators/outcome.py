"""``NoetlOutcomeOperator``: the run ends as NoETL ends it, whatever task is red in the middle.

A step whose call failed is a failed task even when its routing took the failure
(``failure_routes.py``): the route runs through trigger rules, and Airflow would still decide the
run's state from its leaves. The compiler puts this task after the DAG's leaves
(``noetl_compile/lower/outcome.py``), the *watcher* pattern of Airflow's own system tests, with
trigger rule ``all_done``, so it is the one leaf and runs once everything else has ended. It
reads the run's task states and:

* fails when a task failed without a routing that took the failure (an unhandled failure, a
  failed loop instance...): NoETL fails such a run, and the tasks after it were skipped or
  upstream-failed, not run;
* fails when a step's call failed and the routing took it, if the engine ends such a run failed
  (``routed_failure_fails_run``: the canonical engine and NoETL 5 mark the execution failed at
  the first ``call.error`` and still follow the arcs); for the engines that end it completed
  (case-v2, v1) it succeeds and says which failure the routing handled;
* does the same for the watched tasks whose output records a failed call while the task
  succeeded (a region whose member's call failed and routed on inside it; DAG files compiled
  before failed steps turned red).

The listener turns the run's state into ``WorkflowFinished`` (``error`` / ``success``), and
``noetlc run`` / ``noetlc status`` report the run failed with this task's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseOperator

from ..compat import AirflowFailException
from .base import XCOM_RETURN_KEY, is_noetl_output
from .failure_routes import error_text, handled_failure, run_failures, task_states

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
            lines.append(f"step {step!r}: {error_text(error)}")
    return lines


class NoetlOutcomeOperator(BaseOperator):
    """End the run as NoETL ends it (see the module docstring).

    :param watch: result task id -> step or region name, the tasks whose failed call may have
        routed on (the compiler lists them).
    :param routed_failure_fails_run: the engine ends a run failed when a call failed, even
        where the routing took the failure (the engine profile's field of that name).
    """

    template_fields = ()
    ui_color = "#f0f0f0"
    custom_operator_name = "NoETL run outcome"

    def __init__(
        self, *, watch: Mapping[str, str], routed_failure_fails_run: bool = True, **kwargs: Any
    ) -> None:
        if not isinstance(watch, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in watch.items()
        ):
            raise ValueError("`watch` must map task id -> step name (strings)")
        super().__init__(**kwargs)
        self.watch = dict(watch)
        self.routed_failure_fails_run = bool(routed_failure_fails_run)

    def execute(self, context: Any) -> None:
        ti = context["ti"]
        run_id = getattr(ti, "run_id", None) or context["run_id"]
        dag_id = getattr(ti, "dag_id", None) or self.dag_id
        raw = (ti.get_task_states(dag_id=dag_id, run_ids=[run_id]) or {}).get(run_id) or {}
        dag = getattr(self, "dag", None)
        task_ids = list(getattr(dag, "task_ids", None) or raw)
        states = task_states(raw, task_ids)
        states.pop(self.task_id, None)
        failed = [
            t for t, s in states.items() if len(s) == 1 and s[0] == "failed"
        ]  # a mapped task's instances never route a failure
        outputs = {
            task_id: ti.xcom_pull(task_ids=task_id, key=XCOM_RETURN_KEY)
            for task_id in sorted(set(failed) | set(self.watch))
        }
        unhandled, handled = run_failures(states, outputs, self.watch)
        if unhandled:
            raise AirflowFailException(
                "NoETL ends this run failed: a step failed and no routing took the failure; "
                + "; ".join(unhandled)
            )
        # Watched tasks that succeeded while recording a failed call (regions, older DAG files).
        routed = handled + failed_calls(
            self.watch,
            {t: o for t, o in outputs.items() if t not in failed and not handled_failure(o)},
        )
        if routed and self.routed_failure_fails_run:
            # NoETL's status: failed at the first call.error, whatever ran after it.
            raise AirflowFailException(
                "NoETL ends this run failed: a step's call failed and the run went on along "
                "its arcs; " + "; ".join(routed)
            )
        if routed:
            self.log.info(
                "NoETL run outcome: success; the routing took each failed call, and this "
                "engine ends such a run completed: %s",
                "; ".join(routed),
            )
            return
        self.log.info(
            "NoETL run outcome: no step call failed (%d step task(s) watched)", len(self.watch)
        )
