"""A step's case rules (case-v2 ``case:``): per event the first matching rule fires, its
``then`` actions apply (set, vars, collect, sink, retry/call, next), and routing arcs follow
when no rule chose a target. Which rules may handle a failure is decided here too
(``addresses_failure``: a condition that names ``error`` or compares with a failure event).

``CaseRules`` is one object of a step run (``step._StepRun`` builds it from the typed step),
given the rules and arcs it reads and the run state it changes (``step_state``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from jinja2 import TemplateSyntaxError, nodes

from noetl_compile.engine_behaviours import EngineProfile
from noetl_compile.step_model import Arc, CaseRule

from ..events import names
from ..templating.context import apply_ctx_writes, apply_vars_writes, with_values
from ..templating.render import environment, evaluate_condition, render_value
from .payload import normalise_case_next
from .policy import first_match
from .step_state import RunState, SinkRunner, StepEvents, render_set

__all__ = ["CaseRules", "addresses_failure", "case_actions"]

log = logging.getLogger(__name__)


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


def addresses_failure(when: Any) -> bool:
    """Does a condition explicitly look at the failure (``error`` or a ``call.error`` check)?"""
    return _mentions(when, names=("error",), constants=("call.error", "error"))


def case_actions(then: Any) -> dict[str, Any]:
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


class CaseRules:
    """The case rules and routing arcs of one step run. Given what it reads (the typed step's
    rules and arcs, the engine profile) and what it changes (the run's :class:`RunState`), how
    it reports (:class:`StepEvents`) and writes sinks (:class:`SinkRunner`)."""

    def __init__(
        self,
        *,
        rules: Sequence[CaseRule],
        arcs: Sequence[Arc],
        mode: str,
        profile: EngineProfile,
        state: RunState,
        events: StepEvents,
        sinks: SinkRunner,
    ) -> None:
        self.rules = rules
        self.arcs = arcs
        self.mode = mode
        self.profile = profile
        self.state = state
        self.events = events
        self.sinks = sinks
        # step name -> task id, so case ``next`` targets find their Airflow task.
        self.task_id_of: dict[str, str | None] = {a.step: a.task_id for a in arcs}

    def match_case(
        self, event: str, context: Mapping[str, Any], *, failed: bool
    ) -> tuple[int, dict[str, Any], dict[str, Any]] | None:
        """First rule matching ``event`` -> (index, merged actions, event context).

        Events: CaseStarted when the rules are evaluated for ``event``, then CaseEvaluated with
        the rule that matched (entity ``<run>:case[i]``) or, when none did, with ``rule: null``
        (entity ``<run>:case``)."""
        rules = self.rules
        if not rules:
            return None
        self.events.emit(
            names.CASE_STARTED,
            "case",
            "in_progress",
            entity_id=f"{self.events.step_run_id}:case",
            data={"event": event, "rules": len(rules)},
        )
        event_context = with_values(context, event={"name": event, "step": self.events.step})

        def holds(index: int, rule: CaseRule) -> bool:
            when = rule.when
            if failed and not addresses_failure(when):
                return False
            if event == "step.enter" and not _mentions(when, constants=("step.enter",)):
                # Before the call only rules written for step.enter run; a rule on, say, the
                # workload alone is meant for the call result and waits for call.done.
                return False
            if event == "loop.done" and not _mentions(when, constants=("loop.done",)):
                return False
            return evaluate_condition(
                when, event_context, flavor="arc", field=f"case[{index}].when"
            )

        found = first_match(rules, holds)
        if found is None:
            self._no_case_match(event)
            return None
        index, rule = found
        if index in self.state.fired:
            # First match for this event already ran on an earlier event: nothing new.
            self._no_case_match(event, already_fired=index)
            return None
        self.state.fired.add(index)
        actions = case_actions(rule.then)
        self.events.emit(
            names.CASE_EVALUATED,
            "case",
            "success",
            entity_id=f"{self.events.step_run_id}:case[{index}]",
            data={"event": event, "rule": index, "actions": sorted(actions)},
        )
        return index, actions, event_context

    def _no_case_match(self, event: str, already_fired: int | None = None) -> None:
        data: dict[str, Any] = {"event": event, "rule": None}
        if already_fired is not None:
            data["already_fired"] = already_fired
        self.events.emit(
            names.CASE_EVALUATED,
            "case",
            "success",
            entity_id=f"{self.events.step_run_id}:case",
            data=data,
        )

    def apply_case(
        self, index: int, actions: dict[str, Any], context: Mapping[str, Any], *, routing: bool
    ) -> Mapping[str, Any]:
        """Apply ``set``, ``sink``, ``result``, ``call: {step}`` and ``next`` of a matched rule;
        ``collect``/``retry``/``call: {params}`` belong to the call loop. Returns the context
        the rule's later actions see (after its own ``set``)."""
        where = f"case[{index}].then"
        if "set" in actions:
            ctx_writes, vars_writes = render_set(
                actions["set"], context, self.events.step, f"{where}.set"
            )
            self.state.write(ctx_writes, vars_writes)
            context = apply_vars_writes(apply_ctx_writes(context, ctx_writes), vars_writes)
        if self.profile.case_result_own_action:
            self._case_v2_result(index, context)
        elif isinstance(actions.get("result"), Mapping) and "from" in actions["result"]:
            value = render_value(
                actions["result"]["from"], context, strict=False, field=f"{where}.result.from"
            )
            self.state.result_override = (True, value)
        if "sink" in actions:
            self.sinks.run(actions["sink"], context, f"{where}.sink")
        if "log" in actions:
            message = render_value(actions["log"], context, strict=False, field=f"{where}.log")
            log.info("NoETL step %s: %s", self.events.step, message)
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
                # The target's task id travels with it: fused into a region, a step's task is
                # not named after the step.
                deferred = {"step": target["step"], "args": args}
                if "task_id" in target:
                    deferred["task_id"] = target["task_id"]
                self.state.deferred.append(deferred)
                continue
            task_id = (
                target["task_id"]
                if "task_id" in target
                else self.task_id_of.get(target["step"], target["step"])
            )
            self.state.routing.add(target["step"], task_id, args)
            self.state.case_routed = True
        return context

    def _case_v2_result(self, index: int, context: Mapping[str, Any]) -> None:
        """case-v2 ``then.result`` as dc55c492 applies it (``_process_then_actions``): each action
        mapping is one of ``next`` / ``set`` / ``result`` / ... in that order, so a ``result``
        beside a ``next`` or a ``set`` in the same mapping is never applied and the step keeps
        its tool's result (``case_v2/result_from``); a ``result`` of its own sets the step's
        result: ``{from: NAME}`` to the execution variable NAME (a plain name, not a template;
        nothing when there is none), any other value as written."""
        then = self.rules[index].then if index < len(self.rules) else None
        for action in then if isinstance(then, list) else [then]:
            if not isinstance(action, Mapping) or "result" not in action:
                continue
            if "next" in action or "set" in action:
                log.warning(
                    "NoETL step %s: case[%d].then.result sits beside `next`/`set` in one action; "
                    "the case-v2 engine never applies it, so the step keeps its tool's result "
                    "(write it as its own action in a `then` list)",
                    self.events.step,
                    index,
                )
                continue
            spec = action["result"]
            if isinstance(spec, Mapping) and "from" in spec:
                variables = {**(context.get("vars") or {}), **(context.get("workload") or {})}
                if isinstance(spec["from"], str) and spec["from"] in variables:
                    self.state.result_override = (True, variables[spec["from"]])
            else:
                self.state.result_override = (True, spec)

    def route_arcs(self, context: Mapping[str, Any], *, failed: bool) -> None:
        # After a failed call the canonical engine (138c10ed) evaluates the arcs as after a
        # successful one: an arc without `when` matches, a condition sees
        # `event.name == 'call.error'` (final_status/unconditional_next_*). The older engines
        # take only an arc that addresses the failure (``profile.failed_call_takes_every_arc``).
        every_arc = self.profile.failed_call_takes_every_arc
        aliases = self.profile.guard_workload_aliases
        if aliases:
            # 58c2a16b's broker renders `when` and an arc's args with the workload also under
            # `work` and `context` (build_evaluation_context; recorded:
            # template_names/b_aliases_dict); a step result of that name keeps it.
            workload = context.get("workload", {})
            context = {**{a: workload for a in aliases}, **context}
        for index, arc in enumerate(self.arcs):
            when = arc.when
            if failed and not every_arc and not addresses_failure(when):
                continue
            if not evaluate_condition(
                when, context, flavor="arc", field=f"next.arcs[{index}].when"
            ):
                continue
            group = [arc]
            if self.mode == "exclusive" and arc.group is not None:
                # v1 ``when: .. then: [a, b]``: the arcs of the winning group fire together.
                group += [a for a in self.arcs[index + 1 :] if a.group == arc.group]
            for chosen in group:
                self.take_arc(chosen, context, index)
            if failed:
                self.state.handled = True
            if self.mode == "exclusive":
                return

    def take_arc(self, arc: Arc, context: Mapping[str, Any], index: int) -> None:
        if arc.set is not None:
            self.state.write(
                *render_set(arc.set, context, self.events.step, f"next.arcs[{index}].set")
            )
        args = render_value(arc.args or {}, context, strict=False, field=f"next.arcs[{index}].args")
        self.state.routing.add(arc.step, arc.task_id, args)
