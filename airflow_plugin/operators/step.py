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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow.providers.standard.operators.branch import BranchMixIn
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, DownstreamTasksSkipped

from ..runtime.ids import execution_id_for
from ..runtime.payload import validate_payload

# The step runtime (Jinja sandbox, tools) is imported in execute(), not here: DAG files import
# this module on every parse, and only a worker running the task needs the runtime.

__all__ = ["NoetlStepOperator", "validate_reads"]

XCOM_RETURN_KEY = "return_value"
_READS_KEYS = ("results", "ctx", "vars", "args", "region_results")


def validate_reads(reads: Any, step: str = "?") -> dict[str, Any]:
    """Check the ``reads`` mapping; return a normalised copy."""
    if reads is None:
        return {}
    problems: list[str] = []
    if not isinstance(reads, Mapping):
        # ValueError, not TypeError: the operator promises one exception type for a bad spec.
        raise ValueError(f"`reads` of step {step!r} must be a dict, got {type(reads).__name__}")  # noqa: TRY004
    unknown = sorted(set(reads) - set(_READS_KEYS))
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)}")
    for key in ("results", "region_results"):
        value = reads.get(key) or {}
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            problems.append(f"`{key}` must map step name -> task id (strings)")
    for key in ("ctx", "vars"):
        value = reads.get(key) or {}
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(t, str) for t in v)
            for k, v in value.items()
        ):
            problems.append(f"`{key}` must map variable name -> list of task ids")
    args = reads.get("args")
    if args is not None and not (isinstance(args, list) and all(isinstance(t, str) for t in args)):
        problems.append("`args` must be a list of task ids")
    if problems:
        raise ValueError(f"invalid `reads` for NoETL step {step!r}: " + "; ".join(problems))
    return json.loads(json.dumps(dict(reads)))


class NoetlStepOperator(BaseOperator, BranchMixIn):
    """Run one NoETL step (tool / pipeline, set, vars, case, routing) inside an Airflow task.

    :param payload: the compiler's step payload (see ``airflow_plugin.runtime.payload``).
    :param reads: ``{"results": {step: task_id}, "ctx": {var: [task_id, ...]},
        "vars": {var: [task_id, ...]}, "args": [task_id, ...]}`` — which upstream XComs to pull.
        For ctx/vars the last listed task that ran and wrote the variable wins. ``args`` (tasks
        that may route into this step with ``args``) defaults to the direct upstream tasks.

    XCom ``return_value``: ``{"result", "ctx", "vars", "next", "args", "status"}``.
    """

    template_fields = ()
    inherits_from_skipmixin = True
    ui_color = "#dfe9f7"

    def __init__(self, *, payload: dict, reads: dict | None = None, **kwargs: Any) -> None:
        validate_payload(payload)
        try:
            # The payload travels in DAG files and events: it must be plain JSON. The round trip
            # also gives the operator its own copy.
            payload = json.loads(json.dumps(payload))
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"NoETL step payload of {payload.get('step')!r} is not JSON: {exc}"
            ) from exc
        reads = validate_reads(reads, payload["step"])
        super().__init__(**kwargs)
        self.payload = payload
        self.reads = reads

    # -- inputs -----------------------------------------------------------------------------

    @staticmethod
    def _workload(context: Mapping[str, Any]) -> dict[str, Any]:
        # Workload = DAG params (playbook defaults) with the run request (dag_run.conf) on top.
        params = context.get("params") or {}
        workload = {key: params[key] for key in params}
        dag_run = context.get("dag_run")
        conf = getattr(dag_run, "conf", None) or {}
        workload.update(conf)
        return workload

    def _inputs(self, context: Mapping[str, Any]) -> dict[str, Any]:
        ti = context["ti"]
        pulled: dict[str, Any] = {}

        def output_of(task_id: str) -> Mapping[str, Any] | None:
            if task_id not in pulled:
                value = ti.xcom_pull(task_ids=task_id, key=XCOM_RETURN_KEY)
                # Only NoETL step outputs count; a skipped task has none (None).
                pulled[task_id] = (
                    value if isinstance(value, Mapping) and "result" in value else None
                )
            return pulled[task_id]

        results: dict[str, Any] = {}
        for step, task_id in (self.reads.get("results") or {}).items():
            output = output_of(task_id)
            if output is not None:
                results[step] = output.get("result")
        # A step inside a cyclic region or a v1 loop body ran inside that task: its result is
        # one entry of the task's `results`.
        for step, task_id in (self.reads.get("region_results") or {}).items():
            output = ti.xcom_pull(task_ids=task_id, key=XCOM_RETURN_KEY)
            inner = output.get("results") if isinstance(output, Mapping) else None
            if isinstance(inner, Mapping) and step in inner:
                results[step] = inner[step]

        def latest(namespace: str) -> dict[str, Any]:
            values: dict[str, Any] = {}
            for name, task_ids in (self.reads.get(namespace) or {}).items():
                for task_id in reversed(task_ids):
                    output = output_of(task_id)
                    written = output.get(namespace) if output else None
                    if isinstance(written, Mapping) and name in written:
                        values[name] = written[name]
                        break
            return values

        args: dict[str, Any] = {}
        senders = self.reads.get("args")
        if senders is None:
            senders = sorted(self.upstream_task_ids)
        for task_id in senders:
            output = output_of(task_id)
            sent = (output.get("args") or {}).get(self.payload["step"]) if output else None
            if isinstance(sent, Mapping):
                args.update(sent)

        dag_id = getattr(ti, "dag_id", None) or self.dag_id
        run_id = getattr(ti, "run_id", None) or context["run_id"]
        return {
            "workload": self._workload(context),
            "results": results,
            "ctx": latest("ctx"),
            "vars": latest("vars"),
            "args": args,
            "execution_id": execution_id_for(dag_id, run_id),
        }

    # -- execution --------------------------------------------------------------------------

    def execute(self, context: Any) -> dict[str, Any]:
        from ..runtime.step import FeatureNotAvailable, StepFailed, execute_step, routing_targets
        from ..tools import ToolNotAvailable

        step = self.payload["step"]
        inputs = self._inputs(context)
        try:
            outcome = execute_step(self.payload, inputs)
        except StepFailed as exc:
            traceback = exc.error.get("traceback")
            if traceback:
                self.log.error("NoETL step %s tool error:\n%s", step, traceback)
            raise AirflowFailException(str(exc)) from exc
        except (ToolNotAvailable, FeatureNotAvailable) as exc:
            raise AirflowFailException(f"step {step!r}: {exc}") from exc

        output = {
            "result": outcome.result,
            "ctx": outcome.ctx_writes,
            "vars": outcome.vars_writes,
            "next": outcome.next_steps,
            "args": outcome.next_args,
            "status": outcome.status,
        }
        self.log.info(
            "NoETL step %s finished (%s); next: %s", step, outcome.status, outcome.next_steps
        )
        if routing_targets(self.payload):
            self._branch(context, outcome.next_task_ids, output)
        return output

    def _branch(self, context: Any, task_ids: list[str], output: dict[str, Any]) -> None:
        try:
            # An empty list skips every direct downstream task (no arc matched).
            self.do_branch(context, list(task_ids))
        except DownstreamTasksSkipped:
            # The task runner will not push the return value on this path; do it here.
            if self.do_xcom_push:
                context["ti"].xcom_push(XCOM_RETURN_KEY, output)
            raise
