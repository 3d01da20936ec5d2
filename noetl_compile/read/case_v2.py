"""Reader for the v2 "case" generation of the formal specification (../seeds/001).

`tool: {kind}`, `case: [{when, then}]` whose `then` holds next/sink/set/retry/collect/result,
`next` as a name, a list or `{step, args}` entries (never `when`/`then`), `vars`, `sink`, `args`.
Tools are read as in the canonical generation, which kept the tool block.
"""

from __future__ import annotations

from typing import ClassVar

from ..ast import Arc, CaseRule, Loop, Playbook, Router, Step
from ..diagnostics import Severity
from ..load import YList, YMap, empty_map, list_of_one, span_of
from .base import LOOP_MODES, TOOL_SETTING_KEYS, event_of
from .canonical import CanonicalReader

STEP_KEYS = {
    "step",
    "desc",
    "args",
    "vars",
    "loop",
    "tool",
    "case",
    "next",
    "sink",
    "retry",
    "spec",
}
E = Severity.ERROR
# Step forms of the other generations; the v2 engine drops them, so they are errors.
STEP_FOREIGN = {
    "set": ("the engine drops it; put `set` inside a `case` rule's `then`", E),
    "input": ("the engine drops it; use `args`", E),
    "type": ("the engine drops it; use `tool: {kind: ...}`", E),
    "with": ("the engine drops it; use `args`", E),
}
# `then: {step: x}` is the v1 `{when, step}` shorthand; a v2 `then` routes only through `next`.
THEN_FOREIGN = {"step": ("the engine drops it; route with `then: {next: [{step: ...}]}`", E)}
CANONICAL_ROUTER_ADVICE = (
    "`next: {spec, arcs}` is the canonical router, which the v2 engine does not read; use "
    "`case: [{when, then: {next: [{step: ...}]}}]` for conditions and `next: [{step, args}]`"
)
THEN_ACTIONS = {"next", "sink", "set", "retry", "collect", "result", "call", "log", "vars", "fail"}
LOOP_KEYS = {"in", "iterator", "mode", "spec"}


class CaseV2Reader(CanonicalReader):
    dialect = "case-v2"
    root_foreign: ClassVar[dict[str, tuple[str, Severity]]] = {}

    def read(self, root: YMap) -> Playbook:
        playbook = super(CanonicalReader, self).read(root)
        self.require_entry(playbook, root, "the v2 specification starts at a step named `start`")
        return playbook

    def entry_step(self, playbook: Playbook) -> str | None:
        return "start" if playbook.step("start") else None

    def read_step(self, item: YMap, name: str) -> Step:
        step, label = self.open_step(item, name, STEP_KEYS, STEP_FOREIGN, TOOL_SETTING_KEYS)
        if "tool" in item:
            self.read_step_tool(item, step, label)
        if "args" in item:
            step.input = self.mapping(item, "args", f"`args` of {label}")
        if "vars" in item:
            step.vars = self.mapping(item, "vars", f"`vars` of {label}")
        if "sink" in item:
            step.sink = item["sink"]
        if "retry" in item:
            step.retry = item["retry"]
        if "loop" in item:
            step.loop = self.read_loop(item, label)
        arcs: list[Arc] = []
        if "case" in item:
            step.case, arcs = self.read_case(item, label)
        if "next" in item:
            arcs += self.read_v2_next(item, label, group=len(step.case))
        # First matching rule wins; `next` is the fallback group after the case rules.
        step.router = Router(mode="exclusive", arcs=arcs)
        if step.tool is None and "next" not in item and "case" not in item:
            self.report(
                "S107", self.pos(item, "step"), f"{label} has none of `tool`, `next` or `case`"
            )
        return step

    def read_loop(self, item: YMap, label: str) -> Loop | None:
        loop = self.mapping(item, "loop", f"`loop` of {label}")
        if loop is None:
            return None
        if "cursor" in loop or "spec" in loop:  # the cursor-loop surface is shared with canonical
            return super().read_loop(item, label)
        self.check_keys(loop, LOOP_KEYS | {"cursor"}, f"the loop of {label}")
        if "in" not in loop or "iterator" not in loop:
            missing = " and ".join(k for k in ("in", "iterator") if k not in loop)
            self.report("S108", self.pos(item, "loop"), f"the loop of {label} needs {missing}")
        mode = self.choice(  # the loop operator checks its mode when the DAG is parsed
            loop,
            "mode",
            LOOP_MODES,
            f"loop mode of {label}",
            allow_template=False,
        )
        return Loop(
            span=span_of(loop),
            iterator=self.iterator_name(loop, "iterator", f"loop iterator of {label}"),
            iterator_span=self.span(loop, "iterator"),
            collection=loop.get("in"),
            mode=mode or "sequential",
        )

    # -- case and next -------------------------------------------------------------------------
    def read_case(self, item: YMap, label: str) -> tuple[list[CaseRule], list[Arc]]:
        rules_value = self.sequence(item, "case", f"`case` of {label}") or []
        rules, arcs = [], []
        for index, rule in enumerate(rules_value):
            where = f"case rule {index + 1} of {label}"
            if not isinstance(rule, YMap):
                self.expect(rules_value, index, (dict,), where)
                continue
            self.check_keys(rule, ("when", "then", "else"), where)
            if "when" not in rule and "else" not in rule:
                self.report("S101", self.pos(rules_value, index), f"{where} needs `when`")
            when = rule.get("when")
            if when is not None and not isinstance(when, (str, bool)):
                self.report(
                    "S102", self.pos(rule, "when"), f"`when` of {where} must be a template string"
                )
            then = self.merge_then(rule, where)
            rules.append(CaseRule(span=span_of(rule), when=when, then=then))
            if then is not None and "next" in then:
                for arc in self.read_v2_next(then, where, group=index, origin="case"):
                    arc.when, arc.event = when, event_of(when)
                    arcs.append(arc)
        return rules, arcs

    def merge_then(self, rule: YMap, where: str) -> YMap | None:
        """`then` is a mapping of actions or a list of such mappings; merge into one view."""
        then = rule.get("then", rule.get("else"))
        for part in then if isinstance(then, YList) else [then]:
            if isinstance(part, YMap) and "result" in part and ("next" in part or "set" in part):
                beside = "next" if "next" in part else "set"
                self.report(
                    "S117",
                    self.key_pos(part, "result"),
                    f"`result` beside `{beside}` in one action of `then` of {where}: the case-v2 "
                    "engine applies only the `next`/`set`, so the step keeps its tool's result",
                    hint="make it an action of its own: then: [{result: ...}, {next: [...]}]",
                )
            if isinstance(part, YMap) and "set" in part and "next" in part:
                # One action mapping is one action, `next` first (dc55c492
                # _process_then_actions), so that engine never writes these variables. noetlc
                # still applies the `set` (corpus playbooks such as vars_test/test_vars_block
                # state outcomes that need it) and says where the engines part.
                self.report(
                    "S117",
                    self.key_pos(part, "set"),
                    f"`set` beside `next` in one action of `then` of {where}: the case-v2 "
                    "engine applies only the `next` and never writes these variables "
                    "(noetlc still writes them)",
                    hint="make it an action of its own, before the `next`: "
                    "then: [{set: {...}}, {next: [...]}]",
                )
        if isinstance(then, YList):
            merged = empty_map(then.span)
            for index, part in enumerate(then):
                if not isinstance(part, YMap):
                    self.expect(then, index, (dict,), f"action {index + 1} of {where}")
                    continue
                self.check_keys(part, THEN_ACTIONS, f"`then` of {where}", foreign=THEN_FOREIGN)
                for key, value in part.items():
                    merged[key] = value
                    merged.key_spans[key] = part.key_spans.get(key)
                    merged.value_spans[key] = part.value_spans.get(key)
            return merged
        if isinstance(then, YMap):
            self.check_keys(then, THEN_ACTIONS, f"`then` of {where}", foreign=THEN_FOREIGN)
            return then
        if "then" in rule or "else" in rule:
            self.expect(
                rule, "then" if "then" in rule else "else", (dict, list), f"`then` of {where}"
            )
        else:
            self.report("S101", self.pos(rule), f"{where} needs `then`")
        return None

    def read_v2_next(
        self, holder: YMap, label: str, *, group: int, origin: str = "next"
    ) -> list[Arc]:
        value = holder["next"]
        where = f"`next` of {label}"
        if value is None:
            return []
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            arc = self.arc_from_name(holder, "next", where, group=group, origin=origin)
            return [arc] if arc else []
        if isinstance(value, YMap) and ("arcs" in value or "spec" in value):
            key = "arcs" if "arcs" in value else "spec"
            self.report(
                "S114", self.key_pos(value, key), f"`{key}` in {where}: {CANONICAL_ROUTER_ADVICE}"
            )
            return []
        if isinstance(value, YMap):
            value = self.single_entry_list(holder)
        if not isinstance(value, YList):
            self.expect(holder, "next", (str, list), where)
            return []
        arcs = []
        for index, entry in enumerate(value):
            entry_where = f"entry {index + 1} of {where}"
            if isinstance(entry, YMap):
                if "when" in entry or "then" in entry or "else" in entry:
                    key = next(k for k in ("when", "then", "else") if k in entry)
                    self.report(
                        "S111",
                        self.key_pos(entry, key),
                        f"`{key}` inside {where}: the v2 dialect routes conditionally with `case`",
                    )
                    continue
                self.check_keys(entry, ("step", "args", "with"), entry_where)
                args = entry.get("args")
                if origin == "next" and args:
                    # dc55c492 issues a structural `next` target's command with no args
                    # (engine.py, the fallback after the case rules); only a case rule's
                    # `then.next[].args` reach the target (recorded: case_v2/next_args).
                    self.report(
                        "S117",
                        self.key_pos(entry, "args"),
                        f"`args` of {entry_where}: the case-v2 engine starts a step's plain "
                        "`next` target with no args, so the target never sees them",
                        hint='route through a case rule: case: [{when: "{{ event.name == '
                        "'call.done' }}\", then: {next: [{step: ..., args: {...}}]}}]",
                    )
                    args = None
                arc = self.arc(entry, entry_where, args=args, group=group, origin=origin)
            else:
                arc = self.arc_from_name(value, index, entry_where, group=group, origin=origin)
            if arc:
                arcs.append(arc)
        return arcs

    @staticmethod
    def single_entry_list(holder: YMap) -> YList:
        return list_of_one(holder["next"], holder.value_span("next"))
