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

A failed tool call is *handled* only by a case rule or an arc whose condition explicitly addresses
the failure (it uses ``error`` or compares with ``'call.error'``/``'error'``) and that decides
where to go (a rule that only retries does not handle the failure it gives up on). Otherwise
:class:`StepFailed` is raised: an unconditional ``next`` (or a generic ``event.name ==
'step.exit'`` rule, used by most case-v2 playbooks to move on) must not turn a crashed step into a
successful one.

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
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import TemplateSyntaxError, nodes

from ..events import Event, emit, wants
from ..templating.context import (
    apply_ctx_writes,
    apply_vars_writes,
    build_context,
    with_bindings,
    with_loop,
    with_values,
)
from ..templating.proxy import response_view, wrap_result
from ..templating.render import (
    RenderError,
    RenderIssue,
    collect_issues,
    environment,
    evaluate_condition,
    render_value,
    to_jsonable,
)
from ..tools import ToolOutcome
from .payload import arc_task_id, normalise_case_next, validate_payload, with_defaults
from .pipeline import (
    call_tool,
    outcome_envelope,
    outcome_result,
    run_pipeline,
    single_tool_pipeline,
    split_set,
)
from .repeat import (
    Policy,
    apply_next_call,
    case_policy,
    collect_value,
    merge_collected,
    step_policies,
)

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


class StepFailed(Exception):
    """The step failed and nothing in its routing/case handles the failure."""

    def __init__(self, step: str, error: Mapping[str, Any] | None, result: Any = None):
        self.step = step
        self.error = dict(error or {})
        self.result = result
        kind = self.error.get("type", "Error")
        message = self.error.get("message", "tool call failed")
        where = self.error.get("field")
        prefix = f"{where}: " if where and not str(message).startswith("field ") else ""
        super().__init__(f"step {step!r} failed: {prefix}{kind}: {message}")


class FeatureNotAvailable(RuntimeError):
    """A DSL feature reached at run time that this runtime does not implement."""


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
    attempts: int = 1  # tool calls of this step run (iterations for a loop step)
    issues: list[str] = field(default_factory=list)
    # (step, task id or None) of each chosen target, in order: regions tell members from exits.
    next_targets: list[tuple[str, str | None]] = field(default_factory=list)
    # Results of other steps this run produced (a v1 loop's body steps and end_loop step).
    extra_results: dict[str, Any] = field(default_factory=dict)
    # Targets a case rule chose during a loop iteration: taken once, when the loop is done.
    deferred_next: list[dict[str, Any]] = field(default_factory=list)


def strict_mode(inputs: Mapping[str, Any] | None = None) -> bool:
    """Strict: render issues fail the step (``NOETL_STRICT=1``, or ``strict`` in the inputs)."""
    if inputs and inputs.get("strict") is not None:
        return bool(inputs["strict"])
    return os.environ.get("NOETL_STRICT", "").strip().lower() in ("1", "true", "yes", "on")


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


def _render_set(
    values: Any, context: Mapping[str, Any], dialect: str, step: str = "?", field: str = "set"
) -> tuple[dict, dict]:
    try:
        return _render_set_strict(values, context, dialect, field)
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


def _render_set_strict(
    values: Any, context: Mapping[str, Any], dialect: str, field: str
) -> tuple[dict, dict]:
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
    targets: list[tuple[str, str | None]] = field(default_factory=list)

    def add(self, step: str, task_id: str | None, args: Mapping[str, Any] | None) -> None:
        if step not in self.steps:
            self.steps.append(step)
            self.targets.append((step, task_id))
            # A target without an Airflow task (task_id None) is routed to but not branched to.
            if task_id is not None and task_id not in self.task_ids:
                self.task_ids.append(task_id)
        if args:
            self.args.setdefault(step, {}).update(args)


def _failure_error(outcome: ToolOutcome) -> dict[str, Any]:
    return dict(outcome.error or {"type": "ToolError", "message": "tool call failed"})


class _StepRun:
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
        self.dialect: str = payload.get("dialect") or "canonical"
        self.sleep = sleep
        self.strict = strict_mode(inputs)
        self.execution_id = str(inputs.get("execution_id", 0))
        self.ctx_writes: dict[str, Any] = {}
        self.vars_writes: dict[str, Any] = {}
        self.fired: set[int] = set()
        self.routing = _Routing()
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
            dialect=self.dialect,
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
        run_index = inputs.get("run_index")
        self.step_run_id = self.step + (f"@{run_index}" if run_index else "")
        if self.iteration is not None:
            self.step_run_id += f"#{self.iteration}"
        incoming = inputs.get("args")
        self.incoming_args: dict[str, Any] = dict(incoming) if isinstance(incoming, Mapping) else {}
        self.context["args"] = dict(self.incoming_args)
        if self.dialect == "v1":
            # A v1 `next` entry's `with`/`data`/`args` are the target step's bindings, which its
            # templates read by bare name (`{{ city }}`), as the v1 engine merged them into the
            # step's context.
            self.context = with_bindings(self.context, self.incoming_args)

    # -- events -------------------------------------------------------------------------------

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
        return _render_set(values, context, self.dialect, self.step, where)

    # -- case rules ---------------------------------------------------------------------------

    def match_case(
        self, event: str, context: Mapping[str, Any], *, failed: bool
    ) -> tuple[int, dict[str, Any], dict[str, Any]] | None:
        """First rule matching ``event`` -> (index, merged actions, event context).

        Events: CaseStarted when the rules are evaluated for ``event``, then CaseEvaluated with
        the rule that matched (entity ``<run>:case[i]``) or, when none did, with ``rule: null``
        (entity ``<run>:case``)."""
        rules = self.payload.get("case") or []
        if not rules:
            return None
        self.emit(
            "CaseStarted",
            "case",
            "in_progress",
            entity_id=f"{self.step_run_id}:case",
            data={"event": event, "rules": len(rules)},
        )
        event_context = with_values(context, event={"name": event, "step": self.step})
        for index, rule in enumerate(rules):
            when = rule.get("when")
            if failed and not _addresses_failure(when):
                continue
            if event == "step.enter" and not _mentions(when, constants=("step.enter",)):
                # Before the call only rules written for step.enter run; a rule on, say, the
                # workload alone is meant for the call result and waits for call.done.
                continue
            if event == "loop.done" and not _mentions(when, constants=("loop.done",)):
                continue
            if not evaluate_condition(
                when, event_context, flavor="arc", field=f"case[{index}].when"
            ):
                continue
            if index in self.fired:
                # First match for this event already ran on an earlier event: nothing new.
                self._no_case_match(event, already_fired=index)
                return None
            self.fired.add(index)
            actions = _case_actions(rule.get("then"))
            self.emit(
                "CaseEvaluated",
                "case",
                "success",
                entity_id=f"{self.step_run_id}:case[{index}]",
                data={"event": event, "rule": index, "actions": sorted(actions)},
            )
            return index, actions, event_context
        self._no_case_match(event)
        return None

    def _no_case_match(self, event: str, already_fired: int | None = None) -> None:
        data: dict[str, Any] = {"event": event, "rule": None}
        if already_fired is not None:
            data["already_fired"] = already_fired
        self.emit(
            "CaseEvaluated", "case", "success", entity_id=f"{self.step_run_id}:case", data=data
        )

    def apply_case(
        self, index: int, actions: dict[str, Any], context: Mapping[str, Any], *, routing: bool
    ) -> Mapping[str, Any]:
        """Apply ``set``, ``sink``, ``result``, ``call: {step}`` and ``next`` of a matched rule;
        ``collect``/``retry``/``call: {params}`` belong to the call loop. Returns the context
        the rule's later actions see (after its own ``set``)."""
        where = f"case[{index}].then"
        if "set" in actions:
            ctx_writes, vars_writes = self.render_set(actions["set"], context, f"{where}.set")
            self.write(ctx_writes, vars_writes)
            context = apply_vars_writes(apply_ctx_writes(context, ctx_writes), vars_writes)
        if isinstance(actions.get("result"), Mapping) and "from" in actions["result"]:
            value = render_value(
                actions["result"]["from"], context, strict=False, field=f"{where}.result.from"
            )
            self.result_override = (True, value)
        if "sink" in actions:
            self.run_sink(actions["sink"], context, f"{where}.sink")
        if "log" in actions:
            message = render_value(actions["log"], context, strict=False, field=f"{where}.log")
            log.info("NoETL step %s: %s", self.step, message)
        targets = normalise_case_next(actions.get("next"))
        call = actions.get("call")
        if isinstance(call, Mapping) and isinstance(call.get("step"), str):
            # ``call: {step, args}`` invokes another step, i.e. routes to it with args.
            targets.append({"step": call["step"], "args": call.get("args") or {}})
        for target in targets:
            args = render_value(
                target.get("args") or {}, context, strict=False, field=f"{where}.next"
            )
            if not routing:
                # One loop iteration: NoETL moves on once the loop is done, not per item.
                self.deferred.append({"step": target["step"], "args": args})
                continue
            task_id = (
                target["task_id"]
                if "task_id" in target
                else self.task_id_of.get(target["step"], target["step"])
            )
            self.routing.add(target["step"], task_id, args)
            self.case_routed = True
        return context

    # -- routing arcs -------------------------------------------------------------------------

    def route_arcs(self, context: Mapping[str, Any], *, failed: bool) -> None:
        for index, arc in enumerate(self.arcs):
            when = arc.get("when")
            if failed and not _addresses_failure(when):
                continue
            if not evaluate_condition(
                when, context, flavor="arc", field=f"next.arcs[{index}].when"
            ):
                continue
            group = [arc]
            if self.mode == "exclusive" and arc.get("group") is not None:
                # v1 ``when: .. then: [a, b]``: the arcs of the winning group fire together.
                group += [a for a in self.arcs[index + 1 :] if a.get("group") == arc["group"]]
            for chosen in group:
                self.take_arc(chosen, context, index)
            if failed:
                self.handled = True
            if self.mode == "exclusive":
                return

    def take_arc(self, arc: Mapping[str, Any], context: Mapping[str, Any], index: int) -> None:
        if isinstance(arc.get("set"), Mapping):
            self.write(*self.render_set(arc["set"], context, f"next.arcs[{index}].set"))
        args = render_value(
            arc.get("args") or {}, context, strict=False, field=f"next.arcs[{index}].args"
        )
        self.routing.add(arc["step"], arc_task_id(arc), args)

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
            "SinkStarted",
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
                "SinkProcessed",
                "sink",
                "error",
                entity_id=f"{self.step_run_id}:sink",
                data={"error": outcome.error},
                duration=duration,
            )
            error = _failure_error(outcome)
            error["message"] = f"{where}: {error.get('message', 'sink failed')}"
            raise StepFailed(self.step, error)
        self.sinks.append(dict(outcome.data or {}))
        self.emit(
            "SinkProcessed",
            "sink",
            "success",
            entity_id=f"{self.step_run_id}:sink",
            data=outcome.data,
            duration=duration,
        )

    # -- the call -----------------------------------------------------------------------------

    def call(
        self, step_input: dict[str, Any], overrides: Mapping[str, Any], attempt: int
    ) -> tuple[ToolOutcome, Any, str]:
        """Run tool / pipeline once -> (outcome envelope source, step result, status)."""
        payload = self.payload
        tool = payload.get("tool")
        pipeline = payload.get("pipeline")
        if tool and overrides:
            tool = apply_next_call(tool, overrides)
        if tool and _has_rules(tool):
            pipeline = single_tool_pipeline(self.step, tool)
        if pipeline:
            ran = run_pipeline(
                pipeline,
                self.context,
                step=self.step,
                step_input=step_input,
                sleep=self.sleep,
                events=self,
            )
            self.write(ran.ctx_writes)
            if ran.status == "failed":
                outcome = ToolOutcome.failure(ran.error or {}, data=ran.result)
                return outcome, ran.result, "error"
            return ToolOutcome.success(ran.result), ran.result, ran.status
        if tool:
            outcome = call_tool(
                self.step, self.step, tool, self.context, step_input, events=self, attempt=attempt
            )
            return outcome, outcome_result(outcome), "ok" if outcome.ok else "error"
        # No tool: a pure router (v1 steps without type, v1 ``end``) produces no result.
        return ToolOutcome.success(None), None, "ok"

    def after_call_context(
        self, outcome: ToolOutcome, result: Any, failed: bool, attempt: int
    ) -> None:
        after = dict(self.context)
        after[self.step] = wrap_result(result)
        after = with_values(
            after,
            output=outcome_envelope(outcome, attempt=attempt),
            result=wrap_result(result),
            response=response_view(result),
            # The full envelope (formal spec 3.3), read body first: v1 sinks write
            # `{{ this.profile_score }}` for the result's own field.
            this=response_view(
                {
                    "status": "ok" if not failed else "error",
                    "data": result,
                    "error": outcome.error,
                    "meta": outcome.meta,
                }
            ),
        )
        if failed:
            after["error"] = outcome.error
        else:
            after.pop("error", None)
        # Formal spec 6.3: ``_retry.index`` (1-based try) and ``_retry.count`` (tries so far).
        after["_retry"] = {"index": attempt, "count": attempt}
        self.context = after

    def call_loop(self, step_input: dict[str, Any]) -> tuple[ToolOutcome, Any, str, int]:
        """Call, then decide whether to call again (retry / next call), collecting as it goes."""
        overrides: dict[str, Any] = {}
        collected: dict[str, tuple[Mapping[str, Any], Any]] = {}  # into -> (collect spec, value)
        attempt = 1
        while True:
            outcome, result, status = self.call(step_input, overrides, attempt)
            failed = status == "error"
            self.after_call_context(outcome, result, failed, attempt)
            policy, collect, sink, where = self.choose_repetition(failed, outcome, result, attempt)
            if collect:
                self.collect(collect, collected, where)
            if sink:
                self.run_sink(sink, self.context, f"{where}.sink")
            if policy is None:
                break
            if attempt >= policy.max_attempts:
                if not failed:
                    log.warning(
                        "NoETL step %s: %s still asks for another call after %d calls; "
                        "stopping at max_attempts",
                        self.step,
                        where,
                        attempt,
                    )
                break
            next_call = render_value(
                policy.next_call, self.context, strict=False, field=f"{where}.next_call"
            )
            overrides = (
                apply_next_call(overrides, next_call)
                if isinstance(next_call, Mapping)
                else overrides
            )
            wait = policy.delay(attempt)
            self.emit(
                "RetryStarted",
                "retry",
                "in_progress",
                attempt=attempt + 1,
                entity_id=f"{self.step_run_id}:retry",
                data={
                    "after": "error" if failed else "success",
                    "policy": where,
                    "delay": wait,
                    "error": outcome.error if failed else None,
                },
            )
            if wait > 0:
                self.sleep(wait)
            attempt += 1
            self.fired.clear()  # each call gets its own first match
        if attempt > 1:
            self.emit(
                "RetryProcessed",
                "retry",
                "error" if failed else "success",
                attempt=attempt,
                entity_id=f"{self.step_run_id}:retry",
                data={"calls": attempt},
            )
        if collected:
            result = self.merge_collection(result, collected)
        return outcome, result, status, attempt

    def choose_repetition(
        self, failed: bool, outcome: ToolOutcome, result: Any, attempt: int
    ) -> tuple[Policy | None, Mapping[str, Any] | None, Any, str]:
        """The case rule of this call's event, else the first step-level policy that applies."""
        if self.payload.get("case"):
            event = "call.error" if failed else "call.done"
            matched = self.match_case(event, self.context, failed=failed)
            if matched is None:
                return None, None, None, ""
            index, actions, event_context = matched
            where = f"case[{index}].then"
            repeat = None
            for kind in ("retry", "call"):
                action = actions.get(kind)
                if isinstance(action, Mapping) and not (kind == "call" and "step" in action):
                    repeat = case_policy(action, kind=kind, failed=failed)
            # A rule that decides where to go handles the failure; one that only retries does not
            # handle the failure it finally gives up on.
            if failed and repeat is None:
                self.handled = True
            sink = actions.pop("sink", None)
            collect = actions.get("collect")
            self.apply_case(index, actions, event_context, routing=self.phase == "step")
            return repeat, collect if isinstance(collect, Mapping) else None, sink, where
        context = self.retry_context(failed, outcome, result, attempt)
        for number, policy in enumerate(self.policies):
            if policy.on == "error" and not failed:
                continue
            if policy.on == "success" and failed:
                continue
            where = f"retry[{number}]"
            if policy.stop_when is not None and evaluate_condition(
                policy.stop_when, context, flavor="arc", field=f"{where}.stop_when"
            ):
                return None, None, None, where
            if policy.when is None or evaluate_condition(
                policy.when, context, flavor="arc", field=f"{where}.when"
            ):
                return policy, policy.collect, policy.sink, where
        return None, None, None, ""

    def retry_context(
        self, failed: bool, outcome: ToolOutcome, result: Any, attempt: int
    ) -> dict[str, Any]:
        """What a step-level retry condition sees (spec 3.3: the retry evaluator exposes raw
        fields): ``status_code``, ``error`` (None after a success), ``success``, ``data``,
        ``attempt``, ``result``, on top of the step context."""
        http = outcome.meta.get("http") if isinstance(outcome.meta, Mapping) else None
        status_code = None
        if isinstance(result, Mapping) and "status_code" in result:
            status_code = result["status_code"]
        elif isinstance(http, Mapping):
            status_code = http.get("status")
        elif isinstance(outcome.error, Mapping):
            status_code = outcome.error.get("status_code")
        data = result.get("data", result) if isinstance(result, Mapping) else result
        return with_values(
            self.context,
            status_code=status_code,
            error=outcome.error if failed else None,
            success=not failed,
            data=wrap_result(data),
            attempt=attempt,
            result=wrap_result(result),
        )

    def collect(self, spec: Mapping[str, Any], collected: dict, where: str) -> None:
        into = spec.get("into") or "collected"
        rendered_from = (
            render_value(spec["from"], self.context, strict=False, field=f"{where}.collect.from")
            if "from" in spec
            else None
        )
        value = collect_value(spec, self.context.get("response"), rendered_from)
        previous = collected.get(into, (spec, None))[1]
        merged = merge_collected(
            spec.get("strategy", spec.get("mode")), previous, to_jsonable(value)
        )
        collected[into] = (spec, merged)
        if self.dialect == "case-v2" or "vars" in self.context:
            self.write({}, {into: merged})
        else:
            self.write({into: merged})

    @staticmethod
    def merge_collection(
        result: Any, collected: Mapping[str, tuple[Mapping[str, Any], Any]]
    ) -> Any:
        """The step result after a collecting repetition: the collected value replaces the
        collected path (``data`` of the last response holds every page), as NoETL merges pages."""
        merged = dict(result) if isinstance(result, Mapping) else {"data": result}
        for into, (spec, value) in collected.items():
            merged[into] = value  # formal spec 6.2: "aggregate results into then.collect.into"
            path = spec.get("path") if "from" not in spec else None
            key = path.split(".")[0] if isinstance(path, str) and path else "data"
            if (
                isinstance(merged.get("data"), Mapping)
                and isinstance(path, str)
                and path in merged["data"]
            ):
                key = "data"  # the path was read in the body of an HTTP-shaped result
            merged[key] = value
        return merged


def _has_rules(tool: Mapping[str, Any]) -> bool:
    spec = tool.get("spec")
    policy = spec.get("policy") if isinstance(spec, Mapping) else None
    return isinstance(policy, Mapping) and bool(policy.get("rules"))


def _warn(run: _StepRun, issue: RenderIssue, status: str) -> None:
    """One render issue: a warning in the task log and a ``TemplateWarning`` event."""
    log.warning("NoETL %s", issue.describe(run.step))
    run.emit(
        "TemplateWarning",
        "step",
        status,
        entity_id=f"{run.step_run_id}:{issue.field}",
        data={
            "kind": issue.kind,
            "field": issue.field,
            "expression": issue.expression,
            "cause": issue.cause,
        },
    )


def _report_issues(run: _StepRun, issues: list[RenderIssue]) -> list[str]:
    """Log each issue loudly, report it as an event; in strict mode fail the step."""
    messages = []
    for issue in issues:
        message = issue.describe(run.step)
        messages.append(message)
        _warn(run, issue, "error" if run.strict else "success")
    if messages and run.strict:
        raise StepFailed(
            run.step,
            {
                "kind": "template",
                "type": "StrictTemplateError",
                "message": "; ".join(messages) + " (strict mode)",
                "retryable": False,
            },
        )
    return messages


def _retry_policies(payload: Mapping[str, Any]) -> list[Policy]:
    """Step-level ``retry`` (v1, case-v2), then a ``retry`` inside the tool (the formal spec's
    list form); NoETL ignores ``retry`` on a ``playbook`` call."""
    policies = step_policies(payload.get("retry"))
    tool = payload.get("tool")
    if isinstance(tool, Mapping) and tool.get("kind") not in ("playbook", "playbooks"):
        policies += step_policies(tool.get("retry"))
    return policies


def _observed(run: _StepRun, body: Callable[[], StepOutcome]) -> StepOutcome:
    """Run ``body`` between StepStarted and StepFinished, with render issues collected."""
    started = time.monotonic()
    run.emit("StepStarted", "step", "in_progress", alias="step.enter")
    try:
        with collect_issues() as issues:
            try:
                outcome = body()
            except BaseException:
                _report_issues_quietly(run, issues)
                raise
            outcome.issues = _report_issues(run, issues)
    except Exception as exc:
        error = (
            exc.error
            if isinstance(exc, StepFailed)
            else {"type": type(exc).__name__, "message": str(exc)}
        )
        run.emit(
            "StepFinished",
            "step",
            "error",
            alias="step.exit",
            duration=time.monotonic() - started,
            data={"error": error},
        )
        raise
    run.emit(
        "StepFinished",
        "step",
        "success",
        alias="step.exit",
        attempt=outcome.attempts,
        duration=time.monotonic() - started,
        data={
            "result": outcome.result,
            "next": outcome.next_steps,
            "status": outcome.status,
            "ctx": outcome.ctx_writes,
            "vars": outcome.vars_writes,
        },
    )
    if outcome.next_steps or run.arcs:
        run.emit(
            "NextEvaluated",
            "next",
            "success",
            data={"targets": outcome.next_steps, "args": outcome.next_args},
        )
    return outcome


def _report_issues_quietly(run: _StepRun, issues: list[RenderIssue]) -> None:
    # The step fails anyway: still say (log and event) what was swallowed on the way, which is
    # often why it failed, and never raise a second error.
    for issue in issues:
        _warn(run, issue, "error")


def execute_step(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
    phase: str = "step",
) -> StepOutcome:
    """Run one step of a compiled playbook; see the module docstring for the order of things.

    ``payload``: the compiler's step payload (validated here, see ``payload.validate_payload``).
    ``inputs``: ``{workload, results, ctx, vars, execution_id, args?, loop?, strict?, run_index?,
    step_names?}`` pulled by the caller. ``phase``: ``step`` or ``iteration`` (one loop iteration:
    no routing). ``sleep``: used for retry backoff (tests inject a recorder).
    Raises :class:`StepFailed` for an unhandled failure, ``ToolNotAvailable`` for a tool kind this
    runtime cannot execute.
    """
    validate_payload(payload)
    payload = with_defaults(payload)  # the DAG file leaves default-valued keys out
    run = _StepRun(payload, inputs, sleep, phase=phase, policies=_retry_policies(payload))
    return _observed(run, lambda: _execute(run))


def _execute(run: _StepRun) -> StepOutcome:
    payload, step = run.payload, run.step
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

    if run.phase == "step" and not run.case_routed:
        run.route_arcs(
            with_values(
                run.context, event={"name": "call.error" if failed else "call.done", "step": step}
            ),
            failed=failed,
        )

    if failed and not run.handled:
        raise StepFailed(step, outcome.error, to_jsonable(result))
    return _outcome(run, result, status, outcome.error if failed else None, attempts)


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
) -> StepOutcome:
    """The end of a step whose result was produced elsewhere: ``event`` case rules (``loop.done``
    for a loop's aggregated result, ``call.done`` for a child playbook's result), ``step.exit``
    rules, then the arcs; ``set``/``vars`` apply to the result as after a call. For a loop,
    ``step.exit`` rules already ran per iteration; the targets they chose (``deferred``) are
    taken now unless a ``loop.done`` rule routes."""
    validate_payload(payload)
    payload = with_defaults(payload)  # the DAG file leaves default-valued keys out
    run = _StepRun(payload, inputs, sleep)

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
                task_id = run.task_id_of.get(target["step"], target["step"])
                run.routing.add(target["step"], task_id, target.get("args"))
            run.case_routed = True
        if not run.case_routed:
            run.route_arcs(loop_context, failed=False)
        return _outcome(run, result, "ok", None, 1)

    return _observed(run, body)


def routing_targets(payload: Mapping[str, Any]) -> list[str]:
    """Every task id this step may route to (arcs and case ``next``), in payload order."""
    ids: list[str] = []
    arcs = (payload.get("routing") or {}).get("arcs") or []
    task_id_of = {a["step"]: arc_task_id(a) for a in arcs}
    for arc in arcs:
        ids.append(arc_task_id(arc))
    for rule in payload.get("case") or []:
        actions = _case_actions(rule.get("then"))
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
