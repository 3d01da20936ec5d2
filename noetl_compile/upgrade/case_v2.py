"""case-v2 -> canonical, construct by construct, each with the exact canonical equivalent.

| case-v2 | canonical | why it is the same |
|---|---|---|
| step `args` | step `input` | both are the step input the runtime renders (payload `input`) |
| `loop: {in, iterator, mode}` | `loop: {in, iterator, spec: {mode}}` (`async` -> `parallel`) | the loop payload is the same; noetlc runs `async` as `parallel`. Exact within NoETL's canonical result bound (128 results of 64 KiB): U804 says so on each loop |
| `next: [a, b]` (one group) | `next: {spec: {mode: inclusive}, arcs: [{step: a}, {step: b}]}` | case-v2 fires every target of its `next`; a canonical list is exclusive |
| `case: [{when: "{{ event.name == 'step.exit' and X }}", then: {next: [t]}}]` + `next` | `next: {spec: {mode: exclusive}, arcs: [{step: t, when: "{{ X }}"}, ...]}` | rules run first, first match wins, then `next`: the same order as exclusive arcs; at step exit `event.name == 'step.exit'` is true, so `True and X` is `X` |
| `result.f` / `response.f` in a `step.exit` guard | `<step>.f` | the exit event carries the step's result as `result`, and as `response` since it has no `response` of its own (NoETL dc55c492's worker and engine); a canonical arc reads it by the step's name. `response` only where case-v2 gives the result itself (no `data` mapping it reads first) |
| `response.f` of an HTTP step (or one whose result may hold a `data` mapping) | `(<step>.data.f if <step>.data is mapping and 'f' in <step>.data else <step>.f)` | case-v2's `response` reads the body first, then the envelope (``body_first``) |
| a step's one rule firing several steps (no `next`, no `set`) | `next: {spec: {mode: inclusive}, arcs: [...]}`, each arc with the rule's guard | the rule fires all its targets or none; inclusive arcs under one guard do the same |
| `then: [{next: ...}, ...]` | one mapping | the engine merges a `then` list in order |
| `loop.done` rules on a loop step | its arcs | canonical arcs of a loop step are chosen once, at its end |
| step `vars`, a routing rule's `set`, `vars.x` reads | step `set`, arc `set`, `ctx.x` (``case_vars``) | case-v2's `vars` is the execution's variable store |
| `args` along a case rule's `next` (the target's only way in, no step `args` of its own) | the target's `input`, `response`/`result` read by the step's name | dc55c492 renders them when the rule fires and lays them over the target's tool `args`, as canonical lays `input` over them (``pass_as_input``) |
| `call.done` rules (all of the step's, no `next`, no retry) | its arcs | the call is done once, just before the exit (`response` is the result; `result` is unbound there) |
"""

from __future__ import annotations

from typing import Any

from ..analyze.expressions import scan_template
from ..ast import Playbook
from . import case_vars
from .case_rules import _CALL_ERROR, _RESPONSE_DEFINED, _STEP_EXIT, merged, no_data_key
from .case_v2_unsafe import RETRY_REASON, SINK_REASON, CaseV2UnsafeFixes
from .edits import flow, render, seq
from .guards import addressable, rebind, rebind_body_first
from .rewriter import Rewriter

EXACT_THEN = {"next"}
ROUTE_ONLY = "canonical arcs only route (no action runs on a route)"
# Why each case action has no exact canonical form (what the nearest one would change).
# NoETL 138c10ed engine.py: _LOOP_RESULT_MAX_ITEMS (NOETL_LOOP_RESULT_MAX_ITEMS, 128) and
# NOETL_LOOP_RESULT_MAX_BYTES (65536); dc55c492 keeps every result (docs/semantics.md) and
# iterates a string `in` by character (airflow_plugin/runtime/loop.py `_as_list`, recorded).
LOOP_BOUND = (
    "a canonical loop result keeps only the last 128 results, previews any over 64 KiB and adds "
    "`omitted_results_count` (NoETL's NOETL_LOOP_RESULT_MAX_ITEMS/_BYTES), and takes a string "
    "`in` as one item; case-v2 kept every result whole and iterated a string by character: the "
    "same for a list of up to 128 items of up to 64 KiB"
)
# dc55c492 engine.py issues `collection[completed_count]`, one item per completed one, whatever
# the mode; 138c10ed runs a parallel loop's items concurrently.
LOOP_CONCURRENCY = (
    "case-v2's engine ran `{mode}` items one at a time, a canonical `parallel` loop runs them "
    "together"
)
# dc55c492's postgres tool keys its result by statement (`command_0`, ...); 138c10ed's returns
# the last statement's result (recorded: tests/differential/cases/tools_case_v2, tools_postgres).
POSTGRES_REASON = (
    "a case-v2 postgres step's result holds one entry per statement (`command_0`, `command_1`, "
    "...), a canonical one only the last statement's result (`rows`, `row_count`, ...): no "
    "canonical tool returns the per-statement form"
)
ACTION_REASONS = {
    "retry": RETRY_REASON,
    "call": RETRY_REASON,
    "sink": SINK_REASON,
    "set": "a rule's `set` is its arc's `set` only when the rule routes to one step, its values "
    "read the step's result as an arc does (an HTTP `response` only as `response.f`) and its "
    "variables can live in ctx; a step `set` would apply whichever arc is taken",
    "collect": "canonical has no page collection across calls",
    "result": "canonical has no action replacing the step's result",
}


class CaseV2Upgrade(CaseV2UnsafeFixes, Rewriter):
    def step(self, item: Any, end: int) -> None:
        name = str(item.get("step"))
        label = f"step {name!r}"
        ast_step = self.playbook.step(name)
        if "vars" in item:
            self.step_vars(item, label, end)
        if "sink" in item:
            reason = f"`sink` of {label} has no exact canonical equivalent ({SINK_REASON})"
            if self.unsafe_fix(item, "sink", "sink-removed", reason) and not self.comment_out(
                item, "sink", end, None
            ):
                self.inexact(item, "sink", f"`sink` of {label} opens its item's line")
        tool = item.get("tool")
        for holder in (item, tool):
            if isinstance(holder, dict) and "retry" in holder:
                where = "`retry`" if holder is item else "`tool.retry`"
                self.retry(item, holder, end, f"{where} of {label}", label)
        if isinstance(tool, dict) and str(tool.get("kind", "")).strip().lower() == "postgres":
            reason = f"`tool.kind` of {label}: {POSTGRES_REASON}"
            one = _one_statement(tool) and addressable(name)
            if self.unsafe_fix(tool, "kind", "postgres-result", reason) and one:
                # One statement: its `command_0` is the last statement's result, which the
                # canonical tool returns as the step's result.
                self.findings.renames.append((f"{name}.command_0", name))
        self.read_vars(item, label, ast_step)
        if "args" in item:
            self.rename(item, "args", "input")
        if isinstance(item.get("loop"), dict):
            self.loop(item, label, end)
        if "case" in item:
            self.case_and_next(item, label, end)
        elif "next" in item:
            self.next_only(item, label, end)

    def run(self) -> None:
        self.vars_names, self.vars_problem = case_vars.plan(self.playbook)
        self.policies: set[str] = set()  # steps whose tool took a retry policy
        super().run()

    def step_vars(self, item: Any, label: str, end: int) -> None:
        """A step's `vars` block -> its `set` of ctx variables (``case_vars``)."""
        problem = self.vars_problem
        if problem is None and "loop" in item:
            problem = "a loop step's `vars` are rendered per iteration"
        if problem is None and "set" in item:
            problem = "the step has a `set` of its own"
        values = case_vars.ctx_set({"vars": item["vars"]}) if problem is None else None
        if values is not None:
            values = self.own_values(item, values, "step.exit")
        if values is None:
            reason = problem or "a value reads what the step's `set` would not see"
            self.inexact(item, "vars", f"`vars` of {label}: {reason}")
            return
        self.replace_keys(item, ["vars"], end, "set", _map(values))

    def rule_set(self, item: Any, block: Any, event: str) -> dict | None:
        """A case rule's `set` as its arc's `set` (applied when the arc is taken, before its
        target starts, as the rule's set before its `next`); None when not the same."""
        if self.vars_problem is not None:
            return None
        values = case_vars.ctx_set(block)
        return None if values is None else self.own_values(item, values, event)

    def own_values(self, item: Any, values: dict, event: str) -> dict | None:
        """``values`` with `result`/`response` read from the step's result by its name, as at
        ``event``; None when a value reads another event-bound name."""
        known = set(self.arc_names) | {"vars"}
        step = str(item.get("step"))
        out = {}
        for key, value in values.items():
            if not isinstance(value, str):
                if case_vars.foreign_roots(value, known):
                    return None
                out[key] = value
                continue
            value = self.body_first(item, value, event)
            scan = scan_template(value)
            foreign = {r.root for r in scan.references if r.root not in known}
            own = self.own_result_names(item, scan, foreign, event) if foreign else frozenset()
            if scan.error is not None or foreign - own:
                return None
            rebound = rebind(value, own, step) if own else value
            if rebound is None:
                return None
            out[key] = type(value)(rebound) if type(value) is not str else rebound
        return out

    def read_vars(self, item: Any, label: str, ast_step: Any) -> None:
        if ast_step is None or (self.vars_names and self.vars_problem is None):
            return  # none read, or every read is renamed to ctx (case_vars.rename_reads)
        for site in self.playbook.analysis("upgrade_sites", _sites_by_step).get(ast_step.name, []):
            if any(ref.root == "vars" for ref in scan_template(site).references):
                self.inexact(
                    item,
                    "step",
                    f"{label} reads the case-v2 `vars` namespace, which a canonical "
                    "playbook does not have",
                )
                return

    def loop(self, item: Any, label: str, end: int) -> None:
        loop = item["loop"]
        if "spec" in loop or "cursor" in loop:
            return
        mode = str(loop.get("mode", "sequential"))
        self.bounded(item, label, mode)
        if "mode" not in loop:
            return
        new = type(loop)()
        for key, value in loop.items():
            if key != "mode":
                new[key] = value
        # `async` runs as `parallel` does (noetlc lowers every mode but `sequential` to
        # concurrent instances, lower/build.py); NoETL's case-v2 engine ran both one item at a
        # time (U804 says so).
        new["spec"] = flow({"mode": "parallel" if mode == "async" else loop["mode"]})
        self.replace_keys(item, ["loop"], end, "loop", new)

    def bounded(self, item: Any, label: str, mode: str) -> None:
        """A case-v2 loop's result is every iteration's result, whole; the canonical engine
        bounds it (U804: exact within the bound, which the upgrade cannot see)."""
        message = f"loop of {label}: {LOOP_BOUND}"
        if mode != "sequential":
            message += f"; {LOOP_CONCURRENCY.format(mode=mode)}"
        self.within_bound(item, "loop", message)

    def next_only(self, item: Any, label: str, end: int) -> None:
        targets = self.targets(item, "next", label)
        if targets is None or len(targets) <= 1:
            return  # a name, one entry or nothing: the same in canonical
        arcs = seq([flow({"step": t}) for t in targets])
        router = {"spec": flow({"mode": "inclusive"}), "arcs": arcs}
        self.replace_keys(item, ["next"], end, "next", _map(router))

    def targets(
        self,
        holder: Any,
        key: str,
        where: str,
        value: Any = None,
        rule_of: tuple[Any, str] | None = None,
    ) -> list | None:
        """Targets of a case-v2 `next` (a name, a list, or `{step, args}` entries); None when one
        passes `args` along, which a canonical arc cannot, and they cannot move to the target's
        `input` (``rule_of``: the step and event of the case rule whose `next` this is).
        ``value`` when it is not ``holder[key]`` (the merged actions of a `then` list;
        ``holder`` gives the position)."""
        value = holder[key] if value is None else value
        items = value if isinstance(value, list) else [value] if value is not None else []
        targets = []
        for entry in items:
            if isinstance(entry, dict):
                extra = set(entry) - {"step"}
                if (
                    extra == {"args"}
                    and rule_of is not None
                    and self.pass_as_input(entry, *rule_of)
                ):
                    targets.append(entry["step"])
                    continue
                if extra:
                    extra = ", ".join(f"`{k}`" for k in entry if k != "step")
                    self.inexact(
                        holder,
                        key,
                        f"{extra} passed along `next` of {where}: a canonical arc "
                        "passes no arguments (its target would not receive them)",
                    )
                    return None
                targets.append(entry["step"])
            else:
                targets.append(entry)
        return targets

    def pass_as_input(self, entry: dict, source: Any, event: str) -> bool:
        """The `args` a case rule passes along its `next` become the target's `input` when that
        is the same: NoETL's case-v2 engine renders them when the rule fires, with the step's
        result as `result`/`response`, and lays them over the target's own args (dc55c492
        engine.py `_create_command_for_step`, worker `{**tool_config.args, **args}`), as a
        canonical step's `input` is laid over its tool's `args`. So: the rule is the target's
        only way in, the target binds no step `args` of its own and is no loop, its tool's other
        `args` read no passed name, and the values read the step's result (by its name now),
        other step results and the workload. Writes the target's `input`; False when not."""
        target = str(entry.get("step"))
        values = entry.get("args")
        holder = self.workflow_item(target)
        if not isinstance(values, dict) or holder is None or self.playbook.step(target) is None:
            return False
        if self.playbook.entry == target or any(k in holder for k in ("args", "input", "loop")):
            return False
        if self.ways_in(target) != 1 or holder.fa.flow_style():
            return False
        tool = holder.get("tool")
        own = tool.get("args") if isinstance(tool, dict) else None
        passed = {str(k) for k in values}
        for name, template in (own or {}).items() if isinstance(own, dict) else ():
            if str(name) not in passed and case_vars.foreign_roots(template, set()) & passed:
                return False  # a setting of the tool that reads a passed value
        moved = self.own_values(source, dict(values), event)
        if moved is None:
            return False
        line, column = holder.lc.key("step")
        self.edits.replace(line + 1, line + 1, render("input", _map(moved), column))
        return True

    def exit_event(self, item: Any) -> str | None:
        """The event whose rules are exactly a canonical router's arcs on this step: `loop.done`
        on a loop step (canonical arcs of a loop step are chosen once, at its end);
        `call.done` when every rule waits for it and the step has no `next` (without a retry
        the call is done once, just before the exit, and the engine fires a `next` at the exit
        besides a target chosen at call.done); `step.exit` otherwise. None: no such event."""
        events = set()
        for rule in item["case"] or []:
            when = rule.get("when") if isinstance(rule, dict) else None
            match = _STEP_EXIT.fullmatch(str(when).strip()) if isinstance(when, str) else None
            if match is not None:
                events.add(match.group("event"))
        if "loop" in item:
            return "loop.done" if events == {"loop.done"} else None
        if events == {"call.done"} and "next" not in item:
            return "call.done"
        return "step.exit"

    def case_and_next(self, item: Any, label: str, end: int) -> None:
        event = self.exit_event(item)
        reason = (
            f"`case` of the loop {label}: rules other than `loop.done` run per iteration, "
            "which canonical arcs do not"
        )
        if event is None and self.per_item(item):
            if not self.unsafe_fix(item, "case", "per-iteration-rule", reason):
                return
            event = "per-item"
        if event is None:
            self.inexact(item, "case", reason)
            return
        arcs: list[Any] = []
        fallback: list = []
        ok = True
        inclusive = False
        for index, rule in enumerate(item["case"] or []):
            where = f"case rule {index + 1} of {label}"
            if not isinstance(rule, dict):
                return
            then_key = "then" if "then" in rule else "else"
            then = merged(rule.get(then_key))
            if then is None:
                self.inexact(rule, then_key, f"`{then_key}` of {where} is not a mapping of actions")
                ok = False
                continue
            retried = self.retry_rule(item, rule, then, where, end)
            if retried is not None:
                ok = ok and retried
                continue
            dropped = self.drop_actions(rule, then_key, then, where)
            if dropped is None:
                ok = False
                continue
            then = dropped
            written = None
            if "set" in then and "next" in then:
                written = self.rule_set(item, then["set"], event)
                if written is None and event == "call.done":
                    written = self.call_done_set(item, rule, then, where)
            others = sorted(set(then) - EXACT_THEN - ({"set"} if written is not None else set()))
            if others:
                self.inexact(
                    rule,
                    "then" if "then" in rule else "else",
                    f"{', '.join(f'`{k}`' for k in others)} in {where}: "
                    + "; ".join(ACTION_REASONS.get(k, ROUTE_ONLY) for k in others),
                )
                ok = False
                continue
            guard = self.guard(rule, where, item, event)
            if guard is False:
                ok = False
                continue
            targets = (
                self.targets(rule, then_key, where, then["next"], (item, event))
                if "next" in then
                else []
            )
            if targets is None:
                ok = False
                continue
            if len(targets) > 1 and self.fans_out(item, written):
                inclusive = True
            elif len(targets) > 1:
                self.inexact(
                    rule,
                    "then" if "then" in rule else "else",
                    f"{where} routes to {len(targets)} steps at once: an exclusive canonical "
                    "router fires one arc per match",
                )
                ok = False
                continue
            for target in targets:
                arc = {"step": target}
                if guard is not None:
                    arc["when"] = guard
                if written is not None:
                    arc["set"] = flow(written)
                arcs.append(flow(arc))
        if "next" in item:
            fallback = self.targets(item, "next", label)
            if fallback is None:
                ok = False
            elif len(fallback) > 1:
                self.inexact(
                    item,
                    "next",
                    f"`next` of {label} after its `case` fires {len(fallback)} "
                    "steps at once: an exclusive canonical router fires one arc per match",
                )
                ok = False
        if not ok:
            return
        arcs += [flow({"step": t}) for t in fallback or []]
        mode = "inclusive" if inclusive else "exclusive"
        router = {"spec": flow({"mode": mode}), "arcs": seq(arcs)}
        keys = ["case", "next"] if "next" in item else ["case"]
        order = sorted(keys, key=lambda k: item.lc.key(k)[0])
        self.replace_keys(item, order, end, "next", _map(router))

    @staticmethod
    def fans_out(item: Any, written: Any) -> bool:
        """Is a rule firing several steps the step's only way on (its one rule, no `next`, no
        `set`)? Then an inclusive router whose arcs all carry the rule's guard fires the same
        steps, all or none, as the rule does."""
        return len(item["case"] or []) == 1 and "next" not in item and written is None

    def guard(self, rule: Any, where: str, item: Any, event: str) -> Any:
        """The arc guard of a case rule (None: unguarded), or False when there is none exact."""
        has_tool = "tool" in item and event != "loop.done"
        if "else" in rule and "when" not in rule:
            return None
        when = rule.get("when")
        if when is True:
            return None
        match = _STEP_EXIT.fullmatch(str(when).strip()) if isinstance(when, str) else None
        if event == "per-item":
            return self.per_item_guard(rule, where, match)
        failure = isinstance(when, str) and _CALL_ERROR.fullmatch(when.strip()) is not None
        if match is None and failure and has_tool:
            reason = (
                f"`when` of {where} waits for another event than `{event}` (a failed call): "
                "canonical arcs are chosen once, at the step's exit"
            )
            if not self.unsafe_fix(rule, "when", "failure-arc", reason):
                return False
            return _double_quoted("{{ event.name == 'call.error' }}")
        if match is None or match.group("event") != event:
            self.inexact(
                rule,
                "when",
                f"`when` of {where} waits for another event than `{event}` "
                "(or not for an event at all); canonical arcs are chosen once, at the step's "
                "exit",
            )
            return False
        rest = match.group("rest")
        if rest is not None and has_tool:
            defined = _RESPONSE_DEFINED.fullmatch(rest.strip())
            if defined is not None:
                rest = defined.group("rest")
        if rest is None:
            return None
        if any(mark in rest for mark in ("{{", "}}", "{%", "%}", "{#")):
            self.inexact(rule, "when", f"`when` of {where} holds more than one template")
            return False
        guard = "{{ " + rest.strip() + " }}"
        written, foreign, error = self.arc_guard(item, guard, event)
        if (error or foreign) and event == "call.done" and self.findings.unsafe:
            # Read as at the step's exit (noetlc's case-v2 runtime binds both alike).
            written, foreign, error = self.arc_guard(item, guard, "step.exit")
            reason = f"`when` of {where} reads the call's result at `call.done`"
            if not (error or foreign) and not self.unsafe_fix(
                rule, "when", "call-done-result", reason
            ):
                return False
        if error or foreign:
            self.inexact(
                rule,
                "when",
                f"`when` of {where} reads {', '.join(foreign) or 'a template'} "
                "that a canonical arc guard does not see as a case rule does",
            )
            return False
        return _double_quoted(written)

    def arc_guard(self, item: Any, guard: str, event: str) -> tuple[str, list[str], bool]:
        """``guard`` with the event's names read from the step's result by its name; the names
        left that an arc does not see, and whether the text failed to parse."""
        guard = self.body_first(item, guard, event)
        scan = scan_template(guard)
        foreign = sorted({r.root for r in scan.references if r.root not in self.arc_names})
        own = self.own_result_names(item, scan, set(foreign), event)
        if own:
            rebound = rebind(guard, own, str(item.get("step")))
            if rebound is not None:
                guard, foreign = rebound, sorted(set(foreign) - own)
                scan = scan_template(guard)
        return guard, foreign, scan.error is not None

    def body_first(self, item: Any, template: str, event: str) -> str:
        """``template`` with a tool step's `response.k` reads at its exit written out as
        case-v2 reads them, body first (guards.rebind_body_first): an HTTP result, or any result
        not known to lack a `data` mapping (those read `response.k` as `step.k`, see
        own_result_names); as it was otherwise."""
        tool = item.get("tool")
        step = str(item.get("step"))
        if (
            event != "step.exit"
            or not isinstance(tool, dict)
            or not addressable(step)
            or "response" not in template
        ):
            return template
        kind = str(tool.get("kind"))
        if kind in _NO_DATA_KINDS or (kind == "python" and no_data_key(str(tool.get("code", "")))):
            return template
        rebound = rebind_body_first(template, step)
        return template if rebound is None else type(template)(rebound)

    def own_result_names(
        self, item: Any, scan: Any, foreign: set[str], event: str
    ) -> frozenset[str]:
        """Which of `result`/`response` this step.exit guard may read from the step's result by
        its name: `result` always (it is the step's result), `response` where the case-v2
        runtime gives the same value (a result never holding a `data` mapping, which case-v2's
        `response` reads first: postgres, duckdb and snowflake rows, python code whose `result`
        is only ever a dict literal without a `data` key)."""
        # At call.done the event carries `response` only; a loop's end reads neither as the
        # step's result.
        bound = {"step.exit": {"result", "response"}, "call.done": {"response"}}.get(event, set())
        names = bound & foreign
        step = str(item.get("step"))
        if not names or not addressable(step):
            return frozenset()
        if any(r.root in names and r.path[:1] == ("result",) for r in scan.references):
            return frozenset()  # `result.result`: a different fallback in each generation
        if "response" in names:
            tool = item.get("tool")
            kind = str(tool.get("kind")) if isinstance(tool, dict) else None
            code = str(tool.get("code", "")) if isinstance(tool, dict) else ""
            if not (kind in _NO_DATA_KINDS or (kind == "python" and no_data_key(code))):
                names.discard("response")
        return frozenset(names)


_NO_DATA_KINDS = ("postgres", "duckdb", "snowflake")


def _one_statement(tool: Any) -> bool:
    """Does the postgres tool run one statement (its SQL holds no `;` but a final one)? A `;`
    inside a literal counts too: then it is not known to be one, and False."""
    sql = next((tool[k] for k in ("command", "query", "sql") if k in tool), None)
    if not isinstance(sql, str) or not sql.strip():
        return False
    return ";" not in sql.strip().rstrip(";")


def _map(values: dict) -> Any:
    from ruamel.yaml.comments import CommentedMap

    return CommentedMap(values)


def _double_quoted(text: str) -> Any:
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    return DoubleQuotedScalarString(text)


def _sites_by_step(playbook: Playbook) -> dict[str, list]:
    from ..analyze.sites import template_sites

    out: dict[str, list] = {}
    for site in template_sites(playbook):
        if site.step is not None:
            out.setdefault(site.step, []).append(site.value)
    return out
