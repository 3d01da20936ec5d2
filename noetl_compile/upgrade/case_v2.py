"""case-v2 -> canonical, construct by construct, each with the exact canonical equivalent.

| case-v2 | canonical | why it is the same |
|---|---|---|
| step `args` | step `input` | both are the step input the runtime renders (payload `input`) |
| `loop: {in, iterator, mode}` | `loop: {in, iterator, spec: {mode}}` | the loop payload is the same; `async` has no canonical mode (left, U801) |
| `next: [a, b]` (one group) | `next: {spec: {mode: inclusive}, arcs: [{step: a}, {step: b}]}` | case-v2 fires every target of its `next`; a canonical list is exclusive |
| `case: [{when: "{{ event.name == 'step.exit' and X }}", then: {next: [t]}}]` + `next` | `next: {spec: {mode: exclusive}, arcs: [{step: t, when: "{{ X }}"}, ...]}` | rules run first, first match wins, then `next`: the same order as exclusive arcs; at step exit `event.name == 'step.exit'` is true, so `True and X` is `X` |

Everything else (`vars`, `sink`, `retry`, case actions other than `next`, `args` passed along an
arc, guards reading the call's `response`/`result`/`error` or another event, a case rule on a
loop step, a rule firing several targets at once) has no exact canonical form: it is left as
written under a `# noetlc upgrade:` comment and reported as U801.
"""

from __future__ import annotations

import re
from typing import Any

from ..analyze.expressions import scan_template
from ..ast import Playbook
from .edits import flow, seq
from .rewriter import Rewriter

# `{{ event.name == 'step.exit' }}` alone, or followed by `and <rest>`. Anchored, no nested
# quantifiers over overlapping classes: linear.
_STEP_EXIT = re.compile(
    r"\{\{\s*event\.name\s*==\s*(['\"])step\.exit\1\s*(?:and\s+(?P<rest>[^\n]*?))?\s*\}\}"
)
EXACT_THEN = {"next"}
# `response is defined` as the first term after the exit test: after a tool call the runtime
# always binds `response` (null for no result), so at a tool step's exit the term is true.
_RESPONSE_DEFINED = re.compile(r"response\s+is\s+defined(?:\s+and\s+(?P<rest>.*))?", re.DOTALL)


class CaseV2Upgrade(Rewriter):
    def step(self, item: Any, end: int) -> None:
        name = str(item.get("step"))
        label = f"step {name!r}"
        ast_step = self.playbook.step(name)
        for key in ("vars", "sink", "retry"):
            if key in item:
                self.inexact(
                    item,
                    key,
                    f"`{key}` of {label} has no exact canonical equivalent "
                    + {
                        "vars": "(canonical `set` writes ctx, not the `vars` namespace)",
                        "sink": "(canonical has no step sink; a pipeline task would write it)",
                        "retry": "(canonical retries with `tool.spec.policy.rules`, per task)",
                    }[key],
                )
        tool = item.get("tool")
        if isinstance(tool, dict) and "retry" in tool:
            self.inexact(
                tool,
                "retry",
                f"`tool.retry` of {label}: canonical retries with "
                "`tool.spec.policy.rules`, whose conditions see the task output, not `response`",
            )
        self.read_vars(item, label, ast_step)
        if "args" in item:
            self.rename(item, "args", "input")
        if isinstance(item.get("loop"), dict):
            self.loop(item, label, end)
        if "case" in item:
            self.case_and_next(item, label, end)
        elif "next" in item:
            self.next_only(item, label, end)

    def read_vars(self, item: Any, label: str, ast_step: Any) -> None:
        if ast_step is None:
            return
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
        if "mode" not in loop or "spec" in loop or "cursor" in loop:
            return
        mode = loop["mode"]
        if str(mode) == "async":
            self.inexact(loop, "mode", f"loop mode `async` of {label} has no canonical mode")
            return
        new = type(loop)()
        for key, value in loop.items():
            if key != "mode":
                new[key] = value
        new["spec"] = flow({"mode": mode})
        self.replace_keys(item, ["loop"], end, "loop", new)

    def next_only(self, item: Any, label: str, end: int) -> None:
        targets = self.targets(item, "next", label)
        if targets is None or len(targets) <= 1:
            return  # a name, one entry or nothing: the same in canonical
        arcs = seq([flow({"step": t}) for t in targets])
        router = {"spec": flow({"mode": "inclusive"}), "arcs": arcs}
        self.replace_keys(item, ["next"], end, "next", _map(router))

    def targets(self, holder: Any, key: str, where: str) -> list | None:
        """Targets of a case-v2 `next` (a name, a list, or `{step, args}` entries); None when one
        passes `args` along, which a canonical arc cannot."""
        value = holder[key]
        items = value if isinstance(value, list) else [value] if value is not None else []
        targets = []
        for entry in items:
            if isinstance(entry, dict):
                if set(entry) - {"step"}:
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

    def case_and_next(self, item: Any, label: str, end: int) -> None:
        if "loop" in item:
            self.inexact(
                item,
                "case",
                f"`case` of the loop {label}: its rules run per iteration and at "
                "the loop's end, which canonical arcs do not",
            )
            return
        arcs: list[Any] = []
        fallback: list = []
        ok = True
        for index, rule in enumerate(item["case"] or []):
            where = f"case rule {index + 1} of {label}"
            if not isinstance(rule, dict):
                return
            then = rule.get("then", rule.get("else"))
            if isinstance(then, list) or not isinstance(then, dict):
                self.inexact(rule, "then" if "then" in rule else "else", f"`then` list of {where}")
                ok = False
                continue
            others = sorted(set(then) - EXACT_THEN)
            if others:
                self.inexact(
                    rule,
                    "then" if "then" in rule else "else",
                    f"{', '.join(f'`{k}`' for k in others)} in {where}: canonical arcs only "
                    "route (no sink, set, retry, collect, result, call or log on a route)",
                )
                ok = False
                continue
            guard = self.guard(rule, where, has_tool="tool" in item)
            if guard is False:
                ok = False
                continue
            targets = self.targets(then, "next", where) if "next" in then else []
            if targets is None:
                ok = False
                continue
            if len(targets) > 1:
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
        router = {"spec": flow({"mode": "exclusive"}), "arcs": seq(arcs)}
        keys = ["case", "next"] if "next" in item else ["case"]
        order = sorted(keys, key=lambda k: item.lc.key(k)[0])
        self.replace_keys(item, order, end, "next", _map(router))

    def guard(self, rule: Any, where: str, *, has_tool: bool) -> Any:
        """The arc guard of a case rule (None: unguarded), or False when there is none exact."""
        if "else" in rule and "when" not in rule:
            return None
        when = rule.get("when")
        if when is True:
            return None
        match = _STEP_EXIT.fullmatch(str(when).strip()) if isinstance(when, str) else None
        if match is None:
            self.inexact(
                rule,
                "when",
                f"`when` of {where} waits for another event than the step's exit "
                "(or not for an event at all); canonical arcs are chosen at the step's exit",
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
        scan = scan_template(guard)
        foreign = sorted({r.root for r in scan.references if r.root not in self.arc_names})
        if scan.error is not None or foreign:
            self.inexact(
                rule,
                "when",
                f"`when` of {where} reads {', '.join(foreign) or 'a template'} "
                "that a canonical arc guard does not see as a case rule does",
            )
            return False
        return _double_quoted(guard)


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
