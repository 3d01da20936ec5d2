"""Execute one compiled step: input -> tool/pipeline -> set/vars/case -> routing decision.

This is the whole NoETL step lifecycle that the Airflow operator wraps; it is pure Python so it
can be tested without Airflow. The order of operations follows NoETL:

1. case-v2 ``step.enter`` rules (only their ``set`` matters before the call);
2. the step ``input`` is rendered (leniently, like tool configuration) and incoming ``args`` from
   the routing step are laid over it;
3. the tool (or pipeline, or single tool with policy rules = one-task pipeline) runs;
4. on success: canonical step ``set`` (ctx writes), case-v2 ``vars`` (rendered against ``result``);
5. case rules: the call event (``call.done`` / ``call.error``) then ``step.exit``; per event the
   first matching rule fires (a rule fires at most once per step run); ``then.set`` and
   ``then.next`` are applied;
6. routing arcs (``next`` of any dialect) when no case rule chose a target: ``exclusive`` = first
   matching arc, ``inclusive`` = all matching arcs, an arc without ``when`` always matches; arc
   ``set`` becomes ctx writes, arc ``args`` the target's incoming args.

A failed tool call is *handled* only by a case rule or an arc whose condition explicitly addresses
the failure (it uses ``error`` or compares with ``'call.error'``/``'error'``), evaluated on the
failure event. Otherwise :class:`StepFailed` is raised: an unconditional ``next`` (or a generic
``event.name == 'step.exit'`` rule, used by most case-v2 playbooks to move on) must not turn a
crashed step into a successful one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import TemplateSyntaxError, nodes

from ..tools import ToolOutcome
from .context import apply_ctx_writes, apply_vars_writes, build_context, with_values
from .payload import PAYLOAD_EXTENSIONS, arc_task_id, normalise_case_next, validate_payload
from .pipeline import (
    call_tool,
    outcome_envelope,
    outcome_result,
    run_pipeline,
    single_tool_pipeline,
    split_set,
)
from .proxy import wrap_result
from .render import environment, evaluate_condition, render_value, to_jsonable

__all__ = ["FeatureNotAvailable", "StepFailed", "StepOutcome", "execute_step", "routing_targets"]

# case ``then`` actions this runtime does not perform yet. Matching one fails the step loudly
# instead of silently skipping a side effect the playbook relies on.
_UNBUILT_CASE_ACTIONS = ("retry", "collect", "sink", "call", "result")


class StepFailed(Exception):
    """The step's tool failed and nothing in its routing/case handles ``call.error``."""

    def __init__(self, step: str, error: Mapping[str, Any] | None, result: Any = None):
        self.step = step
        self.error = dict(error or {})
        self.result = result
        kind = self.error.get("type", "Error")
        message = self.error.get("message", "tool call failed")
        super().__init__(f"step {step!r} failed: {kind}: {message}")


class FeatureNotAvailable(RuntimeError):
    """A DSL feature reached at run time that this runtime does not implement yet."""


@dataclass
class StepOutcome:
    result: Any
    ctx_writes: dict[str, Any] = field(default_factory=dict)
    vars_writes: dict[str, Any] = field(default_factory=dict)
    next_steps: list[str] = field(default_factory=list)
    # Airflow task id of each chosen target, in the order of ``next_steps``.
    next_task_ids: list[str] = field(default_factory=list)
    # Rendered ``args`` per chosen target step (arc/case ``next`` args).
    next_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    status: str = "ok"  # ok | break | error (an error handled by case/routing)
    error: dict[str, Any] | None = None


# ----------------------------------------------------------------------------------------------
# failure handling
# ----------------------------------------------------------------------------------------------


def _mentions(when: Any, *, names: tuple[str, ...] = (), constants: tuple[str, ...] = ()) -> bool:
    """Does the template ``when`` use one of ``names`` or compare with one of ``constants``?

    Decided on the Jinja AST, not the text, so ``'error'`` inside another word does not count.
    """
    if not isinstance(when, str):
        return False
    try:
        tree = environment().parse(when)
    except TemplateSyntaxError:
        return False
    for node in tree.find_all((nodes.Name, nodes.Const)):
        if isinstance(node, nodes.Name) and node.name in names:
            return True
        if isinstance(node, nodes.Const) and node.value in constants:
            return True
    return False


def _addresses_failure(when: Any) -> bool:
    """Does a condition explicitly look at the failure (``error`` or a ``call.error`` check)?"""
    return _mentions(when, names=("error",), constants=("call.error", "error"))


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------


def _render_set(values: Any, context: Mapping[str, Any], dialect: str) -> tuple[dict, dict]:
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
                vars_writes[entry["name"]] = render_value(entry.get("value"), context, strict=True)
        return ctx_writes, vars_writes
    if not isinstance(values, Mapping):
        return ctx_writes, vars_writes
    rest: dict[str, Any] = {}
    for key, value in values.items():
        if key == "vars" and isinstance(value, Mapping):
            vars_writes.update(render_value(value, context, strict=True))
        elif key.startswith("vars."):
            vars_writes[key[len("vars.") :]] = render_value(value, context, strict=True)
        else:
            rest[key] = value
    rendered = render_value(rest, context, strict=True)
    ctx_part, iter_part = split_set(rendered)
    # At step level there is no iteration scope left to write into: the engine stores iter.* in
    # the execution variables like ctx.*.
    ctx_writes.update(ctx_part)
    ctx_writes.update(iter_part)
    return ctx_writes, vars_writes


def _case_actions(then: Any) -> dict[str, Any]:
    """``then`` may be one action dict or a list of them; merge into one dict in order."""
    if isinstance(then, Mapping):
        return dict(then)
    merged: dict[str, Any] = {}
    if isinstance(then, list):
        for action in then:
            if not isinstance(action, Mapping):
                continue
            for key, value in action.items():
                if key == "next" and "next" in merged:
                    merged["next"] = normalise_case_next(merged["next"]) + normalise_case_next(
                        value
                    )
                elif (
                    key == "set"
                    and isinstance(merged.get("set"), Mapping)
                    and isinstance(value, Mapping)
                ):
                    merged["set"] = {**merged["set"], **value}
                else:
                    merged[key] = value
    return merged


@dataclass
class _Routing:
    steps: list[str] = field(default_factory=list)
    task_ids: list[str] = field(default_factory=list)
    args: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, step: str, task_id: str | None, args: Mapping[str, Any] | None) -> None:
        if step not in self.steps:
            self.steps.append(step)
            # A target without an Airflow task (task_id None) is routed to but not branched to.
            if task_id is not None and task_id not in self.task_ids:
                self.task_ids.append(task_id)
        if args:
            self.args.setdefault(step, {}).update(args)


class _StepRun:
    """State of one step execution (keeps execute_step readable)."""

    def __init__(
        self, payload: Mapping[str, Any], inputs: Mapping[str, Any], sleep: Callable[[float], None]
    ):
        self.payload = payload
        self.step: str = payload["step"]
        self.dialect: str = payload.get("dialect") or "canonical"
        self.sleep = sleep
        self.ctx_writes: dict[str, Any] = {}
        self.vars_writes: dict[str, Any] = {}
        self.fired: set[int] = set()
        self.routing = _Routing()
        self.case_routed = False
        self.handled = False
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
            execution_id=inputs.get("execution_id", 0),
            dialect=self.dialect,
            step_names=[self.step, *self.task_id_of],
        )
        incoming = inputs.get("args")
        self.incoming_args: dict[str, Any] = dict(incoming) if isinstance(incoming, Mapping) else {}
        self.context["args"] = dict(self.incoming_args)

    # -- context bookkeeping ------------------------------------------------------------------

    def write(self, ctx_writes: Mapping[str, Any], vars_writes: Mapping[str, Any] = {}) -> None:
        if ctx_writes:
            self.ctx_writes.update(ctx_writes)
            self.context = apply_ctx_writes(self.context, ctx_writes)
        if vars_writes:
            self.vars_writes.update(vars_writes)
            self.context = apply_vars_writes(self.context, vars_writes)

    # -- case rules ---------------------------------------------------------------------------

    def fire_case(self, event: str, context: Mapping[str, Any], *, failed: bool) -> None:
        rules = self.payload.get("case") or []
        event_context = with_values(context, event={"name": event, "step": self.step})
        for index, rule in enumerate(rules):
            when = rule.get("when")
            if failed and not _addresses_failure(when):
                continue
            if event == "step.enter" and not _mentions(when, constants=("step.enter",)):
                # Before the call only rules written for step.enter run; a rule on, say, the
                # workload alone is meant for the call result and waits for call.done.
                continue
            if not evaluate_condition(when, event_context, flavor="arc"):
                continue
            if index in self.fired:
                return  # first match for this event already ran on an earlier event
            self.fired.add(index)
            self.apply_case_then(rule.get("then"), event_context)
            if failed:
                self.handled = True
            return

    def apply_case_then(self, then: Any, context: Mapping[str, Any]) -> None:
        actions = _case_actions(then)
        for name in _UNBUILT_CASE_ACTIONS:
            if name in actions:
                raise FeatureNotAvailable(
                    f"step {self.step!r}: case action `{name}` is not built yet in this runtime"
                )
        if "set" in actions:
            ctx_writes, vars_writes = _render_set(actions["set"], context, self.dialect)
            self.write(ctx_writes, vars_writes)
            # The rule's own ``next.args`` see what its ``set`` just wrote.
            context = apply_vars_writes(apply_ctx_writes(context, ctx_writes), vars_writes)
        for target in normalise_case_next(actions.get("next")):
            args = render_value(target.get("args") or {}, context, strict=False)
            task_id = (
                target["task_id"]
                if "task_id" in target
                else self.task_id_of.get(target["step"], target["step"])
            )
            self.routing.add(target["step"], task_id, args)
            self.case_routed = True

    # -- routing arcs -------------------------------------------------------------------------

    def route_arcs(self, context: Mapping[str, Any], *, failed: bool) -> None:
        for index, arc in enumerate(self.arcs):
            when = arc.get("when")
            if failed and not _addresses_failure(when):
                continue
            if not evaluate_condition(when, context, flavor="arc"):
                continue
            group = [arc]
            if self.mode == "exclusive" and arc.get("group") is not None:
                # v1 ``when: .. then: [a, b]``: the arcs of the winning group fire together.
                group += [a for a in self.arcs[index + 1 :] if a.get("group") == arc["group"]]
            for chosen in group:
                self.take_arc(chosen, context)
            if failed:
                self.handled = True
            if self.mode == "exclusive":
                return

    def take_arc(self, arc: Mapping[str, Any], context: Mapping[str, Any]) -> None:
        if isinstance(arc.get("set"), Mapping):
            self.write(*_render_set(arc["set"], context, self.dialect))
        args = render_value(arc.get("args") or {}, context, strict=False)
        self.routing.add(arc["step"], arc_task_id(arc), args)

    # -- the call -----------------------------------------------------------------------------

    def call(self, step_input: dict[str, Any]) -> tuple[ToolOutcome, Any, str]:
        """Run tool / pipeline -> (outcome envelope source, step result, status)."""
        payload = self.payload
        tool = payload.get("tool")
        pipeline = payload.get("pipeline")
        if tool and _has_rules(tool):
            pipeline = single_tool_pipeline(self.step, tool)
        if pipeline:
            ran = run_pipeline(
                pipeline, self.context, step=self.step, step_input=step_input, sleep=self.sleep
            )
            self.write(ran.ctx_writes)
            if ran.status == "failed":
                outcome = ToolOutcome.failure(ran.error or {}, data=ran.result)
                return outcome, ran.result, "error"
            return ToolOutcome.success(ran.result), ran.result, ran.status
        if tool:
            outcome = call_tool(self.step, self.step, tool, self.context, step_input)
            return outcome, outcome_result(outcome), "ok" if outcome.ok else "error"
        # No tool: a pure router (v1 steps without type, v1 ``end``) produces no result.
        return ToolOutcome.success(None), None, "ok"


def _has_rules(tool: Mapping[str, Any]) -> bool:
    spec = tool.get("spec")
    policy = spec.get("policy") if isinstance(spec, Mapping) else None
    return isinstance(policy, Mapping) and bool(policy.get("rules"))


def execute_step(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> StepOutcome:
    """Run one step of a compiled playbook; see the module docstring for the order of things.

    ``payload``: the compiler's step payload (validated here, see ``payload.validate_payload``).
    ``inputs``: ``{workload, results, ctx, vars, execution_id, args?}`` pulled by the caller.
    ``sleep``: used for retry backoff (tests inject a recorder).
    Raises :class:`StepFailed` for an unhandled tool failure, ``ToolNotAvailable`` /
    :class:`FeatureNotAvailable` for parts of the DSL this runtime does not have yet.
    """
    validate_payload(payload)
    for key in sorted(PAYLOAD_EXTENSIONS):
        if payload.get(key):
            raise FeatureNotAvailable(
                f"step {payload['step']!r}: `{key}` is not built yet in this runtime"
            )
    run = _StepRun(payload, inputs, sleep)
    step = run.step

    if payload.get("case"):
        run.fire_case("step.enter", run.context, failed=False)

    raw_input = payload.get("input") or {}
    step_input = render_value(raw_input, run.context, strict=False)
    step_input = (
        {**step_input, **run.incoming_args}
        if isinstance(step_input, Mapping)
        else dict(run.incoming_args)
    )
    run.context = with_values(run.context, input=step_input, args=step_input)

    outcome, result, status = run.call(step_input)
    failed = status == "error"

    after = dict(run.context)
    after[step] = wrap_result(result)
    after = with_values(
        after,
        output=outcome_envelope(outcome),
        result=wrap_result(result),
        response=wrap_result(result),
        this={
            "status": "ok" if not failed else "error",
            "data": result,
            "error": outcome.error,
            "meta": outcome.meta,
        },
    )
    if failed:
        after["error"] = outcome.error
    if run.dialect == "case-v2":
        # Spec 6.3: ``_retry.index`` (1-based try) and ``_retry.count`` (tries so far). Without
        # case ``retry`` support in this runtime every step makes exactly one try.
        after["_retry"] = {"index": 1, "count": 1}
    run.context = after

    if not failed:
        if payload.get("set"):
            run.write(*_render_set(payload["set"], run.context, run.dialect))
        if payload.get("vars"):
            # case-v2 ``vars``: values extracted from the result, persisted for later steps.
            run.write({}, render_value(payload["vars"], run.context, strict=True))

    if payload.get("case"):
        run.fire_case("call.error" if failed else "call.done", run.context, failed=failed)
        run.fire_case("step.exit", run.context, failed=failed)

    if not run.case_routed:
        run.route_arcs(
            with_values(
                run.context, event={"name": "call.error" if failed else "call.done", "step": step}
            ),
            failed=failed,
        )

    if failed and not run.handled:
        raise StepFailed(step, outcome.error, to_jsonable(result))

    return StepOutcome(
        result=to_jsonable(result),
        ctx_writes=to_jsonable(run.ctx_writes),
        vars_writes=to_jsonable(run.vars_writes),
        next_steps=list(run.routing.steps),
        next_task_ids=list(run.routing.task_ids),
        next_args=to_jsonable(run.routing.args),
        status=status,
        error=to_jsonable(outcome.error) if failed else None,
    )


def routing_targets(payload: Mapping[str, Any]) -> list[str]:
    """Every task id this step may route to (arcs and case ``next``), in payload order."""
    ids: list[str] = []
    arcs = (payload.get("routing") or {}).get("arcs") or []
    task_id_of = {a["step"]: arc_task_id(a) for a in arcs}
    for arc in arcs:
        ids.append(arc_task_id(arc))
    for rule in payload.get("case") or []:
        for target in normalise_case_next(_case_actions(rule.get("then")).get("next")):
            ids.append(
                target["task_id"]
                if "task_id" in target
                else task_id_of.get(target["step"], target["step"])
            )
    return [i for i in dict.fromkeys(ids) if i is not None]
