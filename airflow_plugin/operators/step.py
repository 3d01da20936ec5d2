"""``NoetlStepOperator`` — one compiled NoETL step as one Airflow task.

Why it is built this way:

* ``template_fields = ()``: the payload is full of NoETL Jinja (``{{ workload.x }}``) that must be
  rendered by the NoETL runtime with NoETL's context, never by Airflow's Jinja (which would fail on
  StrictUndefined or render it against the Airflow context).
* Inputs are pulled explicitly: the compiler computes which upstream tasks each step reads
  (``reads``), so a step pulls exactly those XComs and nothing else.
* Routing uses Airflow's branch machinery (``BranchMixIn.do_branch`` -> ``SkipMixin.skip_all_except``
  from the standard provider): direct downstream tasks that were not chosen are skipped and the
  skip cascades through ``all_success`` tasks; joins use ``none_failed_min_one_success``.
  ``inherits_from_skipmixin = True`` makes the scheduler's ``NotPreviouslySkippedDep`` honour the
  decision when tasks are cleared and re-run.
* In Airflow 3, ``skip_all_except`` raises ``DownstreamTasksSkipped`` out of ``execute``; the task
  runner then marks the task successful **without pushing the return value**. The operator pushes
  its XCom itself on that path so downstream steps can still read the result.
* A tool failure not handled by the step's routing fails the task with ``AirflowFailException``:
  NoETL retries live inside the step (policies); Airflow ``retries`` are for infrastructure
  failures and would re-run side effects the policy already decided about.
* A failure the routing takes fails the task too (red, traceback in the log), after pushing the
  output with ``routed_to``; the chosen tasks run by their tolerant trigger rule and a guard
  (``failure_routes.py``), and the outcome task ends the run as NoETL ends it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from noetl_compile.step_decode import decode_reads, decode_step

from ..compat import AirflowFailException
from ..errors import NoetlRuntimeError
from .base import XCOM_RETURN_KEY, NoetlTask, fail_task, failure_summary, step_output
from .failure_routes import ROUTED_TO, routes_by_trigger_rules

# The step runtime (Jinja sandbox, tools) is imported in execute(), not here: DAG files import
# this module on every parse, and only a worker running the task needs the runtime.

__all__ = ["NoetlStepOperator"]


class NoetlStepOperator(NoetlTask):
    """Run one NoETL step (tool / pipeline, set, vars, case, routing) inside an Airflow task.

    :param payload: the compiler's step payload (see ``airflow_plugin.runtime.payload``).
    :param reads: ``{"results": {step: task_id}, "ctx": {var: [task_id, ...]},
        "vars": {var: [task_id, ...]}, "args": [task_id, ...]}`` — which upstream XComs to pull.
        For ctx/vars the last listed task that ran and wrote the variable wins. ``args`` (tasks
        that may route into this step with ``args``) defaults to the direct upstream tasks.

    XCom ``return_value``: ``{"result", "ctx", "vars", "next", "args", "status"}``.
    """

    def __init__(self, *, payload: dict, reads: dict | None = None, **kwargs: Any) -> None:
        try:
            # The payload travels in DAG files and events: it must be plain JSON. The round trip
            # also gives the operator its own copy.
            payload = json.loads(json.dumps(payload))
        except (TypeError, ValueError) as exc:
            step = payload.get("step") if isinstance(payload, Mapping) else None
            raise ValueError(f"NoETL step payload of {step!r} is not JSON: {exc}") from exc
        # The payload's one decode (step_model's docstring): the runtime is handed the result.
        spec = decode_step(payload)
        reads = decode_reads(reads, f"step {spec.name!r}").mapping
        super().__init__(**kwargs)
        self.payload = payload
        self.spec = spec
        self.reads = reads

    def execute(self, context: Any) -> dict[str, Any]:
        from ..runtime import interpreter  # noqa: F401  (registers kind: playbook)
        from ..runtime.step import StepFailed, execute_step, routing_targets

        step = self.spec.name
        inputs = self.pull_inputs(context, step)
        with self.recording(context):
            try:
                outcome = execute_step(self.spec, inputs)
            except StepFailed as exc:
                traceback = exc.error.get("traceback")
                if traceback:
                    self.log.error("NoETL step %s tool error:\n%s", step, traceback)
                if exc.result is not None and self.do_xcom_push:
                    # NoETL records a failed step's result too (its step.exit event): keep it
                    # where a step's result lives, routing nowhere.
                    context["ti"].xcom_push(
                        XCOM_RETURN_KEY,
                        {
                            "result": exc.result,
                            "ctx": {},
                            "vars": {},
                            "next": [],
                            "args": {},
                            "status": "error",
                        },
                    )
                raise fail_task(step, exc) from exc
            except NoetlRuntimeError as exc:
                raise fail_task(step, exc) from exc
        if outcome.status == "skipped" and not outcome.next_targets:
            from ..compat import AirflowSkipException

            # NoETL 5's local step `when` is false: the step does not run, its branch ends.
            raise AirflowSkipException(f"step {step!r}: its `when` guard is false")
        if outcome.status == "error":
            # The call failed and the playbook's routing took the failure (an arc, a case rule,
            # the engine's failed-call routing): the log shows what failed and where, as an
            # unhandled failure's does.
            error = outcome.error or {}
            self.log.error(
                "NoETL step %s: its call failed (%s); the routing took the failure, the run goes "
                "on to %s%s",
                step,
                failure_summary(error),
                outcome.next_steps or "no step",
                f":\n{error['traceback']}" if error.get("traceback") else "",
            )
            if self.failure_routes_by_trigger_rules():
                return self.fail_routed(context, outcome)
        output = step_output(outcome)
        self.log.info(
            "NoETL step %s finished (%s); next: %s", step, outcome.status, outcome.next_steps
        )
        targets = outcome.next_task_ids if routing_targets(self.payload) else None
        return self.push_and_route(context, output, targets)

    def failure_routes_by_trigger_rules(self) -> bool:
        """Were the tasks after this step compiled to start after its failure (``none_skipped``
        or ``all_done``, each checking that the failure routed to it: ``failure_routes.py``)? DAG files compiled
        before that kept a routed failure's task green, so that its branch could run."""
        return routes_by_trigger_rules(self)

    def fail_routed(self, context: Any, outcome: Any) -> Any:
        """Push the output (the failure, where the routing went) and fail the task: red, with
        Airflow's failure callbacks; the chosen tasks run by their trigger rule."""
        step = self.payload["step"]
        output = step_output(outcome, **{ROUTED_TO: list(outcome.next_task_ids)})
        if self.do_xcom_push:
            context["ti"].xcom_push(XCOM_RETURN_KEY, output)
        raise AirflowFailException(
            f"step {step!r}: {failure_summary(outcome.error)} (the routing took the failure: "
            f"the run goes on to {', '.join(outcome.next_steps) or 'no step'})"
        )
