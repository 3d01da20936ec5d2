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

from noetl_compile.engine_profiles import EngineProfile, profile_for

from ..events import Event, emit, names, wants
from ..templating.context import (
    apply_ctx_writes,
    apply_vars_writes,
    build_context,
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
from .payload import arc_task_id, normalise_case_next, with_defaults
from .pipeline import (
    split_set,
)
from .repeat import (
    Policy,
)
from .step_calls import CallLoop, failure_error, retry_policies
from .step_case import CaseRules, Routing, case_actions
from .step_observe import observed, strict_checkpoint
from .step_outcome import FeatureNotAvailable, StepFailed, StepOutcome, strict_mode

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


# ----------------------------------------------------------------------------------------------
# failure handling
# ----------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------


def _render_set(
    values: Any, context: Mapping[str, Any], step: str = "?", field: str = "set"
) -> tuple[dict, dict]:
    try:
        return _render_set_strict(values, context, field)
    except RenderError as exc:
        raise StepFailed(
            step,
            {
                "kind": "template",
                "type": "TemplateError",
                "message": f"field {exc.field or field}: {exc}",
                "retryable": False,
            },
        ) from exc


def _render_set_strict(values: Any, context: Mapping[str, Any], field: str) -> tuple[dict, dict]:
    """Render a ``set`` block -> (ctx writes, vars writes).

    Canonical: ``ctx.x``/``step.x``/``iter.x``/bare ``x`` all write ``x`` into the execution
    variables (NoETL's engine flattens them). case-v2 also has a list of ``{name, value}`` entries
    and ``vars.x``/``{vars: {...}}`` forms, which write ``vars``.
    """
    ctx_writes: dict[str, Any] = {}
    vars_writes: dict[str, Any] = {}
    if isinstance(values, list):  # case-v2: [{name, value}] -> vars
        for entry in values:
            if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
                vars_writes[entry["name"]] = render_value(
                    entry.get("value"), context, strict=True, field=f"{field}.{entry['name']}"
                )
        return ctx_writes, vars_writes
    if not isinstance(values, Mapping):
        return ctx_writes, vars_writes
    rest: dict[str, Any] = {}
    for key, value in values.items():
        if key == "vars" and isinstance(value, Mapping):
            vars_writes.update(render_value(value, context, strict=True, field=f"{field}.vars"))
        elif key.startswith("vars."):
            vars_writes[key[len("vars.") :]] = render_value(
                value, context, strict=True, field=f"{field}.{key}"
            )
        else:
            rest[key] = value
    rendered = render_value(rest, context, strict=True, field=field)
    ctx_part, iter_part = split_set(rendered)
    # At step level there is no iteration scope left to write into: the engine stores iter.* in
    # the execution variables like ctx.*.
    ctx_writes.update(ctx_part)
    ctx_writes.update(iter_part)
    return ctx_writes, vars_writes


class _StepRun(CaseRules, CallLoop):
    """State of one step execution (keeps execute_step readable)."""

    def __init__(
        self,
        payload: Mapping[str, Any],
        inputs: Mapping[str, Any],
        sleep: Callable[[float], None],
        *,
        phase: str = "step",
        policies: list[Policy] | None = None,
    ):
        self.payload = payload
        self.step: str = payload["step"]
        self.phase = phase  # "step", or "iteration": one loop iteration, routing waits for the end
        self.policies = policies or []
        # The engine whose semantics this step follows, resolved once per payload.
        self.profile: EngineProfile = profile_for(payload)
        self.sleep = sleep
        self.strict = strict_mode(inputs)
        self.execution_id = str(inputs.get("execution_id", 0))
        # step -> "Type: message" of each read step whose call failed (its task went on along
        # an arc): a template of this step that cannot render names that producer.
        self.failed_steps: dict[str, str] = dict(inputs.get("failed_steps") or {})
        self.ctx_writes: dict[str, Any] = {}
        self.vars_writes: dict[str, Any] = {}
        self.fired: set[int] = set()
        self.routing = Routing()
        self.case_routed = False
        self.handled = False
        self.sinks: list[dict[str, Any]] = []
        self.deferred: list[dict[str, Any]] = []
        self.result_override: tuple[bool, Any] = (False, None)
        routing = payload.get("routing") or {}
        self.arcs: list[Mapping[str, Any]] = list(routing.get("arcs") or [])
        self.mode: str = routing.get("mode") or "exclusive"
        # step name -> task id, so case ``next`` targets find their Airflow task.
        self.task_id_of = {a["step"]: arc_task_id(a) for a in self.arcs}
        self.context = build_context(
            workload=inputs.get("workload"),
            results=inputs.get("results"),
            ctx=inputs.get("ctx"),
            vars=inputs.get("vars"),
            execution_id=self.execution_id,
            profile=self.profile,
            step_names=[self.step, *self.task_id_of, *(inputs.get("step_names") or ())],
        )
        loop = inputs.get("loop")
        self.iteration: int | None = None
        self.loop_id: str | None = None
        if isinstance(loop, Mapping):
            self.iteration = int(loop.get("index", 0))
            self.loop_id = loop.get("loop_id") or self.step
            self.context = with_loop(
                self.context,
                iterator=loop["iterator"],
                item=loop.get("item"),
                index=self.iteration,
                length=loop.get("length"),
            )
            issued = loop_variables(payload, loop)
            if issued:
                self.ctx_writes.update(issued)
                self.context = apply_ctx_writes(self.context, issued)
        run_index = inputs.get("run_index")
        self.step_run_id = self.step + (f"@{run_index}" if run_index else "")
        if self.iteration is not None:
            self.step_run_id += f"#{self.iteration}"
        incoming = inputs.get("args")
        self.incoming_args: dict[str, Any] = dict(incoming) if isinstance(incoming, Mapping) else {}
        self.context["args"] = dict(self.incoming_args)
        if self.profile.args_as_bare_names:
            # A v1 `next` entry's `with`/`data`/`args` are the target step's bindings, which its
            # templates read by bare name (`{{ city }}`), as the v1 engine merged them into the
            # step's context.
            self.context = with_bindings(self.context, self.incoming_args)

    # -- events -------------------------------------------------------------------------------

    def before_call(self) -> None:
        strict_checkpoint(self)

    def emit(self, name: str, entity: str, status: str, **fields: Any) -> None:
        if not wants(name, status):
            return  # events off, or a cursor item's bookkeeping: skip building the payload
        data = fields.pop("data", None)
        emit(
            Event(
                name=name,
                entity=entity,
                entity_id=fields.pop("entity_id", self.step_run_id),
                status=status,
                execution_id=self.execution_id,
                step=self.step,
                step_run_id=self.step_run_id,
                loop_id=self.loop_id,
                iteration=self.iteration,
                data=to_jsonable(data or {}),
                **fields,
            )
        )

    # -- context bookkeeping ------------------------------------------------------------------

    def write(self, ctx_writes: Mapping[str, Any], vars_writes: Mapping[str, Any] = {}) -> None:
        if ctx_writes:
            self.ctx_writes.update(ctx_writes)
            self.context = apply_ctx_writes(self.context, ctx_writes)
        if vars_writes:
            self.vars_writes.update(vars_writes)
            self.context = apply_vars_writes(self.context, vars_writes)

    def render_set(self, values: Any, context: Mapping[str, Any], where: str) -> tuple[dict, dict]:
        return _render_set(values, context, self.step, where)

    # -- case rules ---------------------------------------------------------------------------

    # -- routing arcs -------------------------------------------------------------------------

    # -- sinks --------------------------------------------------------------------------------

    def run_sink(self, spec: Any, context: Mapping[str, Any], where: str) -> None:
        """Render a sink block against the current context and write it; a failed sink fails the
        step (a sink is a side effect the playbook relies on)."""
        from ..tools.sink import run_sink

        rendered = render_value(spec, context, strict=False, field=where)
        if not isinstance(rendered, Mapping):
            rendered = {}
        destination = rendered.get("tool")
        table = (destination if isinstance(destination, Mapping) else rendered).get("table")
        self.emit(
            names.SINK_STARTED,
            "sink",
            "in_progress",
            entity_id=f"{self.step_run_id}:sink",
            data={"table": table},
        )
        started = time.monotonic()
        outcome = run_sink(rendered, step=self.step, context=context)
        duration = time.monotonic() - started
        if not outcome.ok:
            self.emit(
                names.SINK_PROCESSED,
                "sink",
                "error",
                entity_id=f"{self.step_run_id}:sink",
                data={"error": outcome.error},
                duration=duration,
            )
            error = failure_error(outcome)
            error["message"] = f"{where}: {error.get('message', 'sink failed')}"
            raise StepFailed(self.step, error)
        self.sinks.append(dict(outcome.data or {}))
        self.emit(
            names.SINK_PROCESSED,
            "sink",
            "success",
            entity_id=f"{self.step_run_id}:sink",
            data=outcome.data,
            duration=duration,
        )

    # -- the call -----------------------------------------------------------------------------


def execute_step(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
    phase: str = "step",
) -> StepOutcome:
    """Run one step of a compiled playbook; see the module docstring for the order of things.

    ``payload``: the compiler's step payload, validated once by the operator that carries it
    (``payload.validate_payload``, at DAG parse), not again per call or iteration.
    ``inputs``: ``{workload, results, ctx, vars, execution_id, args?, loop?, strict?, run_index?,
    step_names?, failed_steps?}`` pulled by the caller. ``phase``: ``step`` or ``iteration`` (one loop iteration:
    no routing). ``sleep``: used for retry backoff (tests inject a recorder).
    Raises :class:`StepFailed` for an unhandled failure, ``ToolNotAvailable`` for a tool kind this
    runtime cannot execute.
    """
    payload = with_defaults(payload)  # the DAG file leaves default-valued keys out
    run = _StepRun(payload, inputs, sleep, phase=phase, policies=retry_policies(payload))
    return observed(run, lambda: _execute(run))


def _execute(run: _StepRun) -> StepOutcome:
    payload, step = run.payload, run.step
    guard = payload.get("guard")
    # NoETL 5's local step `when` (noetl/cli): false -> the step does not run and its branch
    # ends there; a guard that cannot be evaluated is false and noted, as an arc's. Its server
    # (``guard_walks_on``, evaluate_step_when) skips the step and takes its arcs.
    if (
        guard is not None
        and run.phase == "step"
        and not evaluate_condition(guard, run.context, flavor="arc", field="when")
    ):
        if not payload.get("guard_walks_on"):
            return StepOutcome(result=None, status="skipped")
        run.route_arcs(
            with_values(run.context, event={"name": "step.skipped", "step": step}), failed=False
        )
        return _outcome(run, None, "skipped", None, 0)
    if payload.get("case"):
        matched = run.match_case("step.enter", run.context, failed=False)
        if matched is not None:
            run.apply_case(*matched, routing=run.phase == "step")

    raw_input = payload.get("input") or {}
    step_input = render_value(raw_input, run.context, strict=False, field="input")
    step_input = (
        {**step_input, **run.incoming_args}
        if isinstance(step_input, Mapping)
        else dict(run.incoming_args)
    )
    run.context = with_values(run.context, input=step_input, args=step_input)
    strict_checkpoint(run)  # an input left as template text never reaches the tool

    outcome, result, status, attempts = run.call_loop(step_input)
    failed = status == "error"
    overridden, value = run.result_override
    if overridden:
        result = value
    run.after_call_context(outcome, result, failed, attempts)

    if not failed:
        if payload.get("set"):
            run.write(*run.render_set(payload["set"], run.context, "set"))
        if payload.get("vars"):
            # case-v2 ``vars``: values extracted from the result, persisted for later steps.
            try:
                rendered = render_value(payload["vars"], run.context, strict=True, field="vars")
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
            run.write({}, rendered)
        if payload.get("sink"):
            run.run_sink(payload["sink"], run.context, "sink")

    if payload.get("case"):
        matched = run.match_case("step.exit", run.context, failed=failed)
        if matched is not None:
            index, actions, event_context = matched
            if failed:
                run.handled = True
            run.apply_case(index, actions, event_context, routing=run.phase == "step")

    also_next = _also_plain_next(run, failed)
    if run.phase == "step" and (not run.case_routed or also_next):
        run.route_arcs(
            with_values(
                run.context, event={"name": "call.error" if failed else "call.done", "step": step}
            ),
            failed=failed and not also_next,
        )

    if failed and not run.handled:
        raise StepFailed(step, outcome.error, to_jsonable(result))
    return _outcome(run, result, status, outcome.error if failed else None, attempts)


def _also_plain_next(run: _StepRun, failed: bool) -> bool:
    """case-v2 (dc55c492): a case rule that routes a failed call ends the step ``CASE_HANDLED``
    rather than ``FAILED``, and the engine then also takes the step's plain ``next``
    (case_v2/case_status_error_dict): ``profile.routed_failure_takes_next``."""
    return failed and run.case_routed and run.handled and run.profile.routed_failure_takes_next


def _outcome(run: _StepRun, result: Any, status: str, error: Any, attempts: int) -> StepOutcome:
    if run.sinks and isinstance(result, Mapping):
        # The sink's row count belongs to the step result (what was persisted, and where).
        result = {**result, "_sink": run.sinks[-1] if len(run.sinks) == 1 else run.sinks}
    return StepOutcome(
        result=to_jsonable(result),
        ctx_writes=to_jsonable(run.ctx_writes),
        vars_writes=to_jsonable(run.vars_writes),
        next_steps=list(run.routing.steps),
        next_task_ids=list(run.routing.task_ids),
        next_args=to_jsonable(run.routing.args),
        status=status,
        error=to_jsonable(error) if error else None,
        attempts=attempts,
        next_targets=list(run.routing.targets),
        deferred_next=to_jsonable(run.deferred),
    )


def complete_step(
    payload: Mapping[str, Any],
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
    payload = with_defaults(payload)  # the DAG file leaves default-valued keys out
    run = _StepRun(payload, inputs, sleep)
    run.ctx_writes.update(writes or {})

    def body() -> StepOutcome:
        run.after_call_context(ToolOutcome.success(result), result, False, 1)
        if event == "call.done" and payload.get("set"):
            run.write(*run.render_set(payload["set"], run.context, "set"))
        loop_context = with_values(run.context, event={"name": event, "step": run.step})
        if payload.get("case"):
            for name in (event,) if event == "loop.done" else (event, "step.exit"):
                matched = run.match_case(name, loop_context, failed=False)
                if matched is not None:
                    run.apply_case(*matched, routing=True)
        if not run.case_routed and deferred:
            for target in deferred:
                task_id = (
                    target["task_id"]
                    if "task_id" in target
                    else run.task_id_of.get(target["step"], target["step"])
                )
                run.routing.add(target["step"], task_id, target.get("args"))
            run.case_routed = True
        if not run.case_routed:
            run.route_arcs(loop_context, failed=False)
        return _outcome(run, result, "ok", None, 1)

    return observed(run, body)


def routing_targets(payload: Mapping[str, Any]) -> list[str]:
    """Every task id this step may route to (arcs and case ``next``), in payload order."""
    ids: list[str] = []
    arcs = (payload.get("routing") or {}).get("arcs") or []
    task_id_of = {a["step"]: arc_task_id(a) for a in arcs}
    for arc in arcs:
        ids.append(arc_task_id(arc))
    for rule in payload.get("case") or []:
        actions = case_actions(rule.get("then"))
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
