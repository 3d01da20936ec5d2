"""Step-level nested playbooks (``tool.kind: playbook``) as ``TriggerDagRunOperator``.

``NoetlPlaybookOperator`` is a ``TriggerDagRunOperator`` whose ``conf`` is the step's input
rendered with the NoETL context (Airflow's Jinja never sees the DSL: ``template_fields = ()``),
with ``logical_date=None`` and a unique ``trigger_run_id`` so one parent run may call the same
child many times, waiting deferrably for the child; the step result is then read from the
child run. A templated ``path`` is resolved at run time with the same path -> dag id mapping as
the compiler (``noetl_compile.dag_ids.dag_id_for_path``, the one definition both sides import).

A call that does not wait (NoETL 5 without ``return_result``/``return_step``:
``runtime.nested.call_mode``) triggers the child run and comes back as soon as the run exists
(any state counts, a failure of the child included), with ``{status: started, execution_id,
path, async: true}``: the child's execution id, its run going on beside the caller.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator

from noetl_compile.step_decode import decode_reads, decode_step

from ..compat import AirflowRuntimeError, DagIsPaused, dag_is_paused, paused_check_builtin
from ..errors import NoetlRuntimeError
from ..runtime.call_settings import parent_of, poll_interval
from ..runtime.catalog import dag_id_for_path
from .base import NoetlTaskMixin, fail_task, runs_in_process, step_output
from .tool_events import ToolCallEvents

__all__ = ["NoetlPlaybookOperator", "dag_id_for_path"]

UNRESOLVED_DAG_ID = "__noetl_child_resolved_at_run_time__"


def _trigger_error(dag_id: str, exc: Exception) -> Exception:
    """What a failed start of the child run means for the playbook's author."""
    if isinstance(exc, DagIsPaused):
        return RuntimeError(
            f"the child playbook's DAG {dag_id!r} is paused, so its run would never start: "
            f"unpause it (`airflow dags unpause {dag_id}`) and run this step again"
        )
    detail = getattr(getattr(exc, "error", None), "detail", None)
    if isinstance(detail, Mapping) and detail.get("status_code") == 404:
        return LookupError(
            f"the child playbook's DAG {dag_id!r} is not deployed: compile its playbook into "
            "the DAGs folder (`noetlc compile`)"
        )
    return RuntimeError(f"cannot start a run of the child playbook's DAG {dag_id!r}: {exc}")


class NoetlPlaybookOperator(TriggerDagRunOperator, NoetlTaskMixin):
    template_fields = ()
    inherits_from_skipmixin = True
    ui_color = "#fdf3e1"
    pre_execute = NoetlTaskMixin.route_guard  # before BaseOperator's in the MRO

    def __init__(
        self,
        *,
        payload: dict[str, Any],
        reads: dict[str, Any],
        trigger_dag_id: str | None = None,
        wait_for_completion: bool = True,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        spec = decode_step(payload)
        step = spec.name
        reads = dict(decode_reads(reads, f"nested playbook step {step!r}", args=False).mapping)
        child = spec.get("playbook")
        if spec.tool is None or spec.tool.kind not in ("playbook", "playbooks"):
            raise ValueError(f"step {step!r}: NoetlPlaybookOperator needs a `playbook` tool")
        if (
            not isinstance(child, Mapping)
            or not isinstance(child.get("path"), str)
            or not child["path"]
        ):
            raise ValueError(f"step {step!r}: the nested playbook needs a string `path`")
        static = child.get("dag_id")
        if trigger_dag_id is not None and static is not None and trigger_dag_id != static:
            raise ValueError(
                f"step {step!r}: trigger_dag_id {trigger_dag_id!r} does not match the payload"
            )
        # How often the triggerer asks for the child's state: Airflow's default (60 s) would
        # add up to a minute to every nested call (seen in a deployment: a child that ended
        # in one second was noticed 60 s later).
        kwargs.setdefault("poke_interval", 5)
        # The call's own `poll_interval` (NoETL 5 playbook.rs:402) where the DAG file holds it
        # as a number; a templated one is read again once rendered (execute()).
        declared = payload.get("tool")
        if isinstance(declared, Mapping) and poll_interval(declared) is not None:
            kwargs["poke_interval"] = poll_interval(declared)
        # A paused child DAG would take the run and never start it: the step would wait for ever.
        # Compiled DAGs are created unpaused (``is_paused_upon_creation=False``), so a paused
        # child is someone's decision; the step fails at once saying so (``_trigger``). Before
        # Airflow 3.2 the operator cannot ask; execute() checks the child itself.
        if paused_check_builtin():
            kwargs.setdefault("fail_when_dag_is_paused", True)
        super().__init__(
            trigger_dag_id=trigger_dag_id or static or UNRESOLVED_DAG_ID,
            logical_date=None,
            wait_for_completion=wait_for_completion,
            deferrable=deferrable,
            **kwargs,
        )
        self.payload = spec
        self.reads = reads

    # -- helpers shared with the inline path ----------------------------------------------------

    def _render_call(self, inputs: dict[str, Any]) -> tuple[str, dict[str, Any], Any]:
        """(child dag id, child workload overrides, rendered tool config) for this call."""
        from ..runtime.nested import child_workload
        from ..templating.context import step_context
        from ..templating.render import render_value

        context = step_context(self.payload, inputs)
        tool = render_value(self.payload["tool"], context, strict=False, field="tool")
        step_input = render_value(
            self.payload.get("input") or {}, context, strict=False, field="input"
        )
        step_input = {**(step_input if isinstance(step_input, dict) else {}), **inputs["args"]}
        child = self.payload["playbook"]
        dag_id = child.get("dag_id") or dag_id_for_path(tool.get("path") or child["path"])
        return dag_id, child_workload(tool, step_input), tool

    @staticmethod
    def _scheduler_absent() -> bool:
        """True under ``dag.test()`` / ``noetlc run``: no scheduler will ever run a child DAG run,
        so the child runs inline (``NOETL_NESTED=inline|trigger`` overrides the detection)."""
        mode = os.environ.get("NOETL_NESTED", "").strip().lower()
        if mode in ("inline", "trigger"):
            return mode == "inline"
        return runs_in_process()

    def _finish(self, context: Any, result: Any) -> Any:
        from ..runtime.step import complete_step, routing_targets
        from ..templating.render import to_jsonable

        # The child's result is this step's result; set/case/routing run on it as on a call.
        inputs = self.pull_inputs(context, self.payload["step"])
        try:
            outcome = complete_step(self.payload, inputs, to_jsonable(result), event="call.done")
        except NoetlRuntimeError as exc:
            raise fail_task(self.payload["step"], exc) from exc
        output = step_output(outcome)
        targets = outcome.next_task_ids if routing_targets(self.payload) else None
        return self.push_and_route(context, output, targets)

    # -- execution ------------------------------------------------------------------------------

    def _mode(self, tool: Mapping[str, Any]) -> tuple[str, str | None]:
        from ..runtime.nested import call_mode

        return call_mode(tool, self.noetl_profile)

    def _wait_for_an_end(self) -> None:
        """A ``return_step`` call on NoETL 5 waits for the child's end, success or failure, and
        a failed child is not the call's failure (its status payload says FAILED)."""
        from airflow.utils.state import DagRunState

        self.allowed_states = [DagRunState.SUCCESS, DagRunState.FAILED]
        self.failed_states = []

    def _wait_for_any_state(self) -> None:
        """The trigger comes back as soon as the child run exists: every run state is allowed
        and none is a failure (the caller does not wait for the child's outcome)."""
        from airflow.utils.state import DagRunState

        self.allowed_states = list(DagRunState)
        self.failed_states = []

    def execute(self, context: Any) -> Any:
        from ..runtime.interpreter import interpret
        from ..runtime.nested import (
            child_execution_id,
            run_child,
            started_record,
        )

        step = self.payload["step"]
        inputs = self.pull_inputs(context, step)
        dag_id, workload, tool = self._render_call(inputs)
        mode, return_step = self._mode(tool)
        if self._scheduler_absent():
            execution_id = child_execution_id(inputs["execution_id"], step, step, dag_id)
            self.log.info("NoETL step %s: running child playbook %s inline", step, dag_id)
            with self.recording(context):
                # The call is a tool call of this step: its events frame the child's run, and
                # the child's first event points back at ToolStarted.
                call = ToolCallEvents(
                    step,
                    inputs["execution_id"],
                    "playbook",
                    {"dag_id": dag_id, "child_execution_id": str(execution_id)},
                )
                try:
                    result = run_child(
                        dag_id,
                        workload,
                        interpret=interpret,
                        execution_id=execution_id,
                        return_step=return_step,
                        strict=inputs.get("strict"),
                        parent_execution_id=parent_of(tool, inputs["execution_id"]),
                        status=mode == "status",
                    )
                except (NoetlRuntimeError, LookupError) as exc:
                    if mode != "start":
                        call.errored(exc)
                        raise fail_task(step, exc) from exc
                    # Started, not waited for: the child's failure is its own run's.
                    self.log.warning("child playbook %s failed (not waited for): %s", dag_id, exc)
                if mode == "start":
                    result = started_record(execution_id, tool.get("path") or dag_id)
                call.completed(result)
                return self._finish(context, result)
        # A deployment: a real child DAG run, waited for deferrably; its result is read after.
        self.trigger_dag_id = dag_id
        self.conf = workload
        self.trigger_run_id = self._child_run_id(context)
        if mode == "start":
            self._wait_for_any_state()
        elif mode == "status":
            self._wait_for_an_end()
        if poll_interval(tool) is not None:
            self.poke_interval = poll_interval(tool)
        with self.recording(context):
            call = ToolCallEvents(step, inputs["execution_id"], "playbook", self._call_data())
        try:
            if not paused_check_builtin() and dag_is_paused(dag_id):
                raise DagIsPaused(dag_id=dag_id)
            return super().execute(context)  # raises DagRunTriggerException: the trigger itself
        except (DagIsPaused, AirflowRuntimeError) as exc:
            error = _trigger_error(dag_id, exc)
            with self.recording(context):
                call.errored(error)
            raise fail_task(step, error) from exc

    def _child_run_id(self, context: Any) -> str:
        return f"noetl__{context['run_id']}__{self.task_id}"[:250]

    def _call_data(self) -> dict[str, Any]:
        from ..templating.ids import execution_id_for

        # The child run's own execution (what the listener records it under).
        child = execution_id_for(self.trigger_dag_id, self.trigger_run_id)
        return {"dag_id": self.trigger_dag_id, "child_execution_id": str(child)}

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        # Back from the triggerer this is a fresh operator from the DAG file: what execute()
        # resolved at run time (a templated child path) is gone; the trigger's event has the
        # child's dag id and run id (the base class reads the run id from it).
        from airflow.providers.common.compat.sdk import AirflowException

        from ..runtime.nested import started_record

        event_data = event[1] if isinstance(event, (tuple, list)) and len(event) == 2 else {}
        if isinstance(event_data, Mapping) and event_data.get("dag_id"):
            self.trigger_dag_id = event_data["dag_id"]
        self.trigger_run_id = self._child_run_id(context)
        step = self.payload["step"]
        mode, return_step = self._mode(self.payload.get("tool") or {})
        if mode == "start":
            self._wait_for_any_state()
        elif mode == "status":
            self._wait_for_an_end()
        # Stamped with this task's coordinates like every event of the step (this process is
        # not the one that triggered the child: the call's start was told there).
        with self.recording(context):
            call = ToolCallEvents(
                step, self.execution_id(context), "playbook", self._call_data(), announce=False
            )
            try:
                super().execute_complete(context, event)
            except AirflowException as exc:  # the child run failed: so does this step
                call.errored(exc)
                raise fail_task(step, exc) from exc
            if mode == "start":
                from ..templating.ids import execution_id_for

                child = execution_id_for(self.trigger_dag_id, self.trigger_run_id)
                path = (self.payload.get("tool") or {}).get("path") or self.trigger_dag_id
                result = started_record(child, path)
            elif mode == "status":
                result = self._child_status(context, event_data)
            else:
                result = self._child_result(context, return_step)
            call.completed(result)
            return self._finish(context, result)

    def _child_status(self, context: Any, event_data: Any) -> dict[str, Any]:
        """NoETL 5's ``return_step`` result for a child DAG run that has ended: its state from
        the trigger's event, its steps from their results in the child's step order (a step that
        left none, e.g. the failed one, is not counted: the run's task states are not read)."""
        from ..runtime.catalog import find_playbook
        from ..runtime.interpretation import Interpretation
        from ..runtime.nested import status_payload
        from ..templating.ids import execution_id_for

        child = find_playbook(self.trigger_dag_id)
        ran = Interpretation()
        for step in child.steps:
            value = context["ti"].xcom_pull(
                dag_id=self.trigger_dag_id,
                run_id=self.trigger_run_id,
                task_ids=step,
                key="return_value",
            )
            if isinstance(value, dict) and "result" in value:
                ran.order.append(step)
        state = event_data.get(self.trigger_run_id) if isinstance(event_data, Mapping) else None
        if str(state) == "failed" or getattr(state, "value", None) == "failed":
            ran.errors["<run>"] = state
        # A failed run counts one failed step (which one is not read here).
        return status_payload(execution_id_for(self.trigger_dag_id, self.trigger_run_id), ran)

    def _child_result(self, context: Any, return_step: str | None) -> Any:
        """The child's result: the return step's, else the last step's that has one."""
        from ..runtime.catalog import find_playbook

        child = find_playbook(self.trigger_dag_id)
        ti = context["ti"]
        result = None
        for step in reversed(list(child.steps)):
            if return_step and step != return_step:
                continue
            value = ti.xcom_pull(
                dag_id=self.trigger_dag_id,
                run_id=self.trigger_run_id,
                task_ids=step,
                key="return_value",
            )
            if isinstance(value, dict) and "result" in value:
                result = value["result"]
                break
        return result
