"""Execute one compiled step: input -> tool calls -> set/vars/sink/case -> routing decision.

This is the whole NoETL step lifecycle that the Airflow operators wrap; it is pure Python so it
can be tested without Airflow. The order of operations follows NoETL:

1. case-v2 ``step.enter`` rules (only their ``set`` matters before the call);
2. the step ``input`` is rendered (leniently, like tool configuration) and incoming ``args`` from
   the routing step are laid over it;
3. the call loop: the tool (or pipeline, or single tool with policy rules = one-task pipeline)
   runs; after each call the case rules of the call event (``call.done`` / ``call.error``) are
   evaluated — their ``collect``/``sink``/``set`` apply per call — and a case ``retry``/``call``
   action or a step-level ``retry`` policy may call again (error retry, or pagination with
   ``next_call`` params; module ``repeat``);
4. on success: canonical step ``set`` (ctx writes), case-v2 ``vars`` (rendered against
   ``result``), the step-level ``sink``;
5. case rules of ``step.exit``; per event the first matching rule fires;
6. routing arcs (``next`` of any dialect) when no case rule chose a target: ``exclusive`` = first
   matching arc, ``inclusive`` = all matching arcs, an arc without ``when`` always matches; arc
   ``set`` becomes ctx writes, arc ``args`` the target's incoming args.

What a failed tool call routes to follows the engine of the playbook's dialect:

* canonical (NoETL 138c10ed): the arcs are evaluated as after a successful call, with
  ``event.name == 'call.error'``: an arc without ``when`` matches, so the run goes on along it.
  The step's outcome is ``status: error`` and the run still ends failed, as NoETL ends it: the
  compiled DAG's outcome task (``operators/outcome.py``) fails when a step's call failed.
* case-v2 and v1: only a case rule or an arc whose condition explicitly addresses the failure (it
  uses ``error`` or compares with ``'call.error'``/``'error'``) and that decides where to go
  handles it (a rule that only retries does not handle the failure it gives up on); a case-v2
  rule that routes the failure also takes the step's plain ``next`` (dc55c492 ends the step
  ``CASE_HANDLED``). An unconditional ``next`` (or a generic ``event.name == 'step.exit'`` rule,
  used by most case-v2 playbooks to move on) does not turn a crashed step into a successful one.

Nothing that matches: :class:`StepFailed` is raised.

Phases: ``execute_step(phase="iteration")`` runs one loop iteration (the loop binding comes in
``inputs["loop"]``; a ``next`` chosen by a case rule waits for the loop's end);
:func:`complete_step` ends a step whose result came from elsewhere: a loop's end (``loop.done``
rules, the deferred ``next``, then the arcs, over the aggregated result) or a child playbook's
result (``call.done`` and ``step.exit`` rules, then the arcs).

Nothing is silently wrong: a template kept as text by lenient rendering and a guard that could not
be evaluated are :class:`~.render.RenderIssue` s, logged as warnings naming step, field and
expression, reported as ``TemplateWarning`` events, and fatal in strict mode (``NOETL_STRICT=1``
or ``inputs["strict"]``). Every step run reports its lifecycle to the event recorder.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from noetl_compile.engine_profiles import EngineProfile

from ..templating.context import (
    build_context,
    issuing_context,
    loop_variables,
    with_bindings,
    with_loop,
    with_values,
)
from ..templating.render import (
    RenderError,
    evaluate_condition,
    render_value,
    to_jsonable,
)
from ..tools import ToolOutcome
from .payload import Step, as_step, normalise_case_next, with_defaults
from .repeat import (
    Policy,
)
from .step_calls import CallLoop, retry_policies
from .step_case import CaseRules, case_actions
from .step_observe import observed, strict_checkpoint
from .step_outcome import FeatureNotAvailable, StepFailed, StepOutcome, strict_mode
from .step_state import RunState, SinkRunner, StepEvents, render_set

__all__ = [
    "FeatureNotAvailable",
    "StepFailed",
    "StepOutcome",
    "complete_step",
    "execute_step",
    "routing_targets",
    "strict_mode",
]

log = logging.getLogger(__name__)


class _StepRun:
    """One step execution, built from the typed step: who it is (:class:`StepEvents`), what it
    changes (:class:`RunState`), and the objects that do its work, each given what it needs
    (:class:`CaseRules`, :class:`CallLoop`, :class:`SinkRunner`). ``execute_step`` and
    ``complete_step`` drive it; ``step_observe`` reads ``step``, ``step_run_id``, ``strict``,
    ``arcs`` and ``failed_steps`` and reports through ``emit``."""

    def __init__(
        self,
        spec: Step,
        inputs: Mapping[str, Any],
        sleep: Callable[[float], None],
        *,
        phase: str = "step",
        policies: list[Policy] | None = None,
    ) -> None:
        self.spec = spec
        # The payload's templates, absent keys as their defaults (the DAG file leaves them out).
        self.payload: Mapping[str, Any] = with_defaults(spec.payload)
        self.step: str = spec.name
        self.phase = phase  # "step", or "iteration": one loop iteration, routing waits for the end
        # The engine whose semantics this step follows, resolved when the payload was decoded.
        self.profile: EngineProfile = spec.profile
        self.strict: bool = strict_mode(inputs)
        # step -> "Type: message" of each read step whose call failed (its task went on along
        # an arc): a template of this step that cannot render names that producer.
        self.failed_steps: dict[str, str] = dict(inputs.get("failed_steps") or {})
        self.arcs = spec.routing.arcs
        loop = inputs.get("loop")
        iteration = int(loop.get("index", 0)) if isinstance(loop, Mapping) else None
        run_index = inputs.get("run_index")
        self.step_run_id: str = self.step + (f"@{run_index}" if run_index else "")
        if iteration is not None:
            self.step_run_id += f"#{iteration}"
        self.events = StepEvents(
            step=self.step,
            step_run_id=self.step_run_id,
            execution_id=str(inputs.get("execution_id", 0)),
            loop_id=(loop.get("loop_id") or self.step) if isinstance(loop, Mapping) else None,
            iteration=iteration,
        )
        context = build_context(
            workload=inputs.get("workload"),
            results=inputs.get("results"),
            ctx=inputs.get("ctx"),
            vars=inputs.get("vars"),
            execution_id=self.events.execution_id,
            catalog_id=inputs.get("catalog_id"),
            profile=self.profile,
            step_names=[
                self.step,
                *dict.fromkeys(a.step for a in self.arcs),
                *(inputs.get("step_names") or ()),
            ],
        )
        self.state = RunState(context=context)
        if isinstance(loop, Mapping):
            self.state.context = with_loop(
                self.state.context,
                iterator=loop["iterator"],
                item=loop.get("item"),
                index=int(loop.get("index", 0)),
                length=loop.get("length"),
                profile=self.profile,
            )
            issued = loop_variables(self.payload, loop)
            if issued:
                self.state.write(issued)
        incoming = inputs.get("args")
        self.incoming_args: dict[str, Any] = dict(incoming) if isinstance(incoming, Mapping) else {}
        self.state.context["args"] = dict(self.incoming_args)
        if self.profile.args_as_bare_names:
            # A v1 `next` entry's `with`/`data`/`args` are the target step's bindings, which its
            # templates read by bare name (`{{ city }}`), as the v1 engine merged them into the
            # step's context.
            self.state.context = with_bindings(self.state.context, self.incoming_args)
        self.sinks = SinkRunner(events=self.events, state=self.state)
        self.case = CaseRules(
            rules=spec.case,
            arcs=self.arcs,
            mode=spec.routing.mode,
            profile=self.profile,
            state=self.state,
            events=self.events,
            sinks=self.sinks,
        )
        self.calls = CallLoop(
            tool=self.payload.get("tool"),
            pipeline=self.payload.get("pipeline"),
            policies=policies or [],
            profile=self.profile,
            phase=phase,
            sleep=sleep,
            state=self.state,
            events=self.events,
            sinks=self.sinks,
            case=self.case,
            before_call=lambda: strict_checkpoint(self),
        )

    def emit(self, name: str, entity: str, status: str, **fields: Any) -> None:
        self.events.emit(name, entity, status, **fields)

    def render_set(
        self, values: Any, context: Mapping[str, Any], where: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return render_set(values, context, self.step, where)


def execute_step(
    payload: Step | Mapping[str, Any],
    inputs: Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
    phase: str = "step",
) -> StepOutcome:
    """Run one step of a compiled playbook; see the module docstring for the order of things.

    ``payload``: the typed step the operator that carries it decoded once, at DAG parse
    (``step_model.decode_step``), not again per call or iteration; a plain payload (a test's,
    an inline child's step) is decoded here.
    ``inputs``: ``{workload, results, ctx, vars, execution_id, args?, loop?, strict?, run_index?,
    step_names?, failed_steps?}`` pulled by the caller. ``phase``: ``step`` or ``iteration`` (one loop iteration:
    no routing). ``sleep``: used for retry backoff (tests inject a recorder).
    Raises :class:`StepFailed` for an unhandled failure, ``ToolNotAvailable`` for a tool kind this
    runtime cannot execute.
    """
    spec = as_step(payload)
    run = _StepRun(spec, inputs, sleep, phase=phase, policies=retry_policies(spec))
    return observed(run, lambda: _execute(run))


def _execute(run: _StepRun) -> StepOutcome:
    payload, step, state = run.payload, run.step, run.state
    guard = run.spec.guard
    # NoETL 5's local step `when` (noetl/cli): false -> the step does not run and its branch
    # ends there; a guard that cannot be evaluated is false and noted, as an arc's. Its server
    # (``guard_walks_on``, evaluate_step_when) skips the step and takes its arcs.
    if (
        guard is not None
        and run.phase == "step"
        and not evaluate_condition(guard, state.context, flavor="arc", field="when")
    ):
        if not run.spec.guard_walks_on:
            return StepOutcome(result=None, status="skipped")
        run.case.route_arcs(
            with_values(state.context, event={"name": "step.skipped", "step": step}), failed=False
        )
        return _outcome(run, None, "skipped", None, 0)
    if run.spec.case:
        matched = run.case.match_case("step.enter", state.context, failed=False)
        if matched is not None:
            run.case.apply_case(*matched, routing=run.phase == "step")

    raw_input = payload.get("input") or {}
    issuing = issuing_context(state.context, step, run.profile)
    step_input = render_value(raw_input, issuing, strict=False, field="input")
    step_input = (
        {**step_input, **run.incoming_args}
        if isinstance(step_input, Mapping)
        else dict(run.incoming_args)
    )
    state.context = with_values(state.context, input=step_input, args=step_input)
    strict_checkpoint(run)  # an input left as template text never reaches the tool

    outcome, result, status, attempts = run.calls.call_loop(step_input)
    failed = status == "error"
    overridden, value = state.result_override
    if overridden:
        result = value
    run.calls.after_call_context(outcome, result, failed, attempts)

    if not failed:
        if payload.get("set"):
            state.write(*run.render_set(payload["set"], state.context, "set"))
        if payload.get("vars"):
            # case-v2 ``vars``: values extracted from the result, persisted for later steps.
            try:
                rendered = render_value(payload["vars"], state.context, strict=True, field="vars")
            except RenderError as exc:
                raise StepFailed(
                    step,
                    {
                        "kind": "template",
                        "type": "TemplateError",
                        "message": f"field {exc.field}: {exc}",
                        "retryable": False,
                    },
                ) from exc
            state.write({}, rendered)
        if payload.get("sink"):
            run.sinks.run(payload["sink"], state.context, "sink")

    if run.spec.case:
        matched = run.case.match_case("step.exit", state.context, failed=failed)
        if matched is not None:
            index, actions, event_context = matched
            if failed:
                state.handled = True
            run.case.apply_case(index, actions, event_context, routing=run.phase == "step")

    also_next = _also_plain_next(run, failed)
    if run.phase == "step" and (not state.case_routed or also_next):
        run.case.route_arcs(
            with_values(
                state.context, event={"name": "call.error" if failed else "call.done", "step": step}
            ),
            failed=failed and not also_next,
        )

    if failed and not state.handled:
        raise StepFailed(step, outcome.error, to_jsonable(result))
    return _outcome(run, result, status, outcome.error if failed else None, attempts)


def _also_plain_next(run: _StepRun, failed: bool) -> bool:
    """case-v2 (dc55c492): a case rule that routes a failed call ends the step ``CASE_HANDLED``
    rather than ``FAILED``, and the engine then also takes the step's plain ``next``
    (case_v2/case_status_error_dict): ``profile.routed_failure_takes_next``."""
    state = run.state
    return failed and state.case_routed and state.handled and run.profile.routed_failure_takes_next


def _outcome(run: _StepRun, result: Any, status: str, error: Any, attempts: int) -> StepOutcome:
    state = run.state
    if state.sinks and isinstance(result, Mapping):
        # The sink's row count belongs to the step result (what was persisted, and where).
        result = {**result, "_sink": state.sinks[-1] if len(state.sinks) == 1 else state.sinks}
    return StepOutcome(
        result=to_jsonable(result),
        ctx_writes=to_jsonable(state.ctx_writes),
        vars_writes=to_jsonable(state.vars_writes),
        next_steps=list(state.routing.steps),
        next_task_ids=list(state.routing.task_ids),
        next_args=to_jsonable(state.routing.args),
        status=status,
        error=to_jsonable(error) if error else None,
        attempts=attempts,
        next_targets=list(state.routing.targets),
        deferred_next=to_jsonable(state.deferred),
    )


def complete_step(
    payload: Step | Mapping[str, Any],
    inputs: Mapping[str, Any],
    result: Any,
    *,
    sleep: Callable[[float], None] = time.sleep,
    event: str = "loop.done",
    deferred: list[dict[str, Any]] | None = None,
    writes: Mapping[str, Any] | None = None,
) -> StepOutcome:
    """The end of a step whose result was produced elsewhere: ``event`` case rules (``loop.done``
    for a loop's aggregated result, ``call.done`` for a child playbook's result), ``step.exit``
    rules, then the arcs; ``set``/``vars`` apply to the result as after a call. For a loop,
    ``step.exit`` rules already ran per iteration; the targets they chose (``deferred``) are
    taken now unless a ``loop.done`` rule routes. ``writes``: ctx the step wrote before (a
    loop's iterator and ``loop_index``), reported with the step's own writes."""
    run = _StepRun(as_step(payload), inputs, sleep)
    payload, state = run.payload, run.state
    state.ctx_writes.update(writes or {})

    def body() -> StepOutcome:
        run.calls.after_call_context(ToolOutcome.success(result), result, False, 1)
        if event == "call.done" and payload.get("set"):
            state.write(*run.render_set(payload["set"], state.context, "set"))
        loop_context = with_values(state.context, event={"name": event, "step": run.step})
        if run.spec.case:
            for name in (event,) if event == "loop.done" else (event, "step.exit"):
                matched = run.case.match_case(name, loop_context, failed=False)
                if matched is not None:
                    run.case.apply_case(*matched, routing=True)
        if not state.case_routed and deferred:
            for target in deferred:
                task_id = (
                    target["task_id"]
                    if "task_id" in target
                    else run.case.task_id_of.get(target["step"], target["step"])
                )
                state.routing.add(target["step"], task_id, target.get("args"))
            state.case_routed = True
        if not state.case_routed:
            run.case.route_arcs(loop_context, failed=False)
        return _outcome(run, result, "ok", None, 1)

    return observed(run, body)


def routing_targets(payload: Step | Mapping[str, Any]) -> list[str]:
    """Every task id this step may route to (arcs and case ``next``), in payload order."""
    spec = as_step(payload)
    ids: list[str | None] = [arc.task_id for arc in spec.routing.arcs]
    task_id_of = {arc.step: arc.task_id for arc in spec.routing.arcs}
    for rule in spec.case:
        actions = case_actions(rule.then)
        targets = normalise_case_next(actions.get("next"))
        call = actions.get("call")
        if isinstance(call, Mapping) and isinstance(call.get("step"), str):
            targets.append({"step": call["step"]})
        for target in targets:
            ids.append(
                target["task_id"]
                if "task_id" in target
                else task_id_of.get(target["step"], target["step"])
            )
    return [i for i in dict.fromkeys(ids) if i is not None]
