"""The unsafe fixes of a case-v2 playbook's `retry` (unsafe.py, `retry-policy`): a step's,
its tool's or a `call.error` rule's retry mapping becomes the tool's `spec.policy.rules`
(retry_policy.py); the step's other rules are then rewritten exactly by case_v2.py."""

from __future__ import annotations

from typing import Any

from . import case_vars
from .case_rules import _RESPONSE_DEFINED, _STEP_EXIT
from .retry_policy import policy_spec

RETRY_REASON = (
    "the canonical retry (`tool.spec.policy.rules`) makes the tool a one-task pipeline, so the "
    "step's result becomes the pipeline record `{status, _prev, results, ctx}` (the call's result "
    "under `_prev`, its `status` shadowed), and NoETL's canonical engine retries only errors it "
    "classes retryable (a python exception is not: 1 call with `attempts: 3`)"
)
SINK_REASON = (
    "canonical has no sink: a pipeline task would make the step's result the pipeline record, "
    "and a step of its own would add a step, its result and its events"
)


class CaseV2UnsafeFixes:
    """Mixed into CaseV2Upgrade (a Rewriter): ``policies`` holds the steps whose tool took a
    retry policy (one per tool)."""

    policies: set[str]
    vars_problem: str | None

    def retry(self, item: Any, holder: Any, end: int, where: str, label: str) -> None:
        """A step's (or its tool's) `retry` mapping -> the tool's retry policy (unsafe)."""
        spec = policy_spec(holder["retry"])
        reason = f"{where}: {RETRY_REASON}"
        if spec is None or str(item.get("step")) in self.policies:
            self.inexact(holder, "retry", reason)
            return
        if not self.unsafe_fix(holder, "retry", "retry-policy", reason):
            return
        stop = self.region(holder, "retry", end)[1]
        self.edits.replace(holder.lc.key("retry")[0], stop, [])
        self.policies.add(str(item.get("step")))
        self.tool_spec(item, end, spec, label)

    def retry_rule(self, item: Any, rule: Any, then: dict, where: str, end: int) -> bool | None:
        """A case rule that only retries a failed call (`call.error`) -> the tool's retry
        policy (unsafe), the rule kept as a comment. None: not such a rule; True: applied;
        False: left (U801 given)."""
        when = rule.get("when")
        failure = isinstance(when, str) and ("call.error" in when or "error is defined" in when)
        if set(then) != {"retry"} or not failure:
            return None
        spec = policy_spec(then["retry"])
        name = str(item.get("step"))
        if spec is None or name in self.policies:
            return None
        then_key = "then" if "then" in rule else "else"
        column = rule.lc.key("when")[1]
        kept = self.as_comment("when", when, column) + self.as_comment(
            then_key, rule[then_key], column
        )
        reason = f"`retry` in {where}: {RETRY_REASON}"
        if not self.unsafe_fix(rule, then_key, "retry-policy", reason, kept):
            return False
        self.policies.add(name)
        return self.tool_spec(item, end, spec, f"step {name!r}")

    def call_done_set(self, item: Any, rule: Any, then: dict, where: str) -> dict | None:
        """A `call.done` rule's `set` reading `result`, which case-v2 leaves unbound there, as
        the arc's `set` reading the step's result by its name (unsafe: `call-done-result`)."""
        if self.vars_problem is not None:
            return None
        values = case_vars.ctx_set(then["set"])
        moved = None if values is None else self.own_values(item, values, "step.exit")
        if moved is None:
            return None
        then_key = "then" if "then" in rule else "else"
        reason = f"`set` in {where} reads `result`, unbound at `call.done`"
        return moved if self.unsafe_fix(rule, then_key, "call-done-result", reason) else None

    def drop_actions(self, rule: Any, then_key: str, then: dict, where: str) -> dict | None:
        """A rule's `sink` and `result` actions, which no canonical arc has, kept as comments
        (unsafe: `sink-removed`, `result-action-dropped`); ``then`` without them, or None when
        they are left (U801 given)."""
        column = rule.lc.key(then_key)[1] + 2
        for key, name, why in (
            ("sink", "sink-removed", SINK_REASON),
            (
                "result",
                "result-action-dropped",
                "canonical has no action replacing the step's result",
            ),
        ):
            if key not in then:
                continue
            kept = self.as_comment(key, then[key], column)
            if not self.unsafe_fix(rule, then_key, name, f"`{key}` in {where}: {why}", kept):
                return None
            then = {k: v for k, v in then.items() if k != key}
        return then

    def per_item(self, item: Any) -> bool:
        """A loop step whose rules wait for an item's `step.exit`/`call.done` (besides its
        `loop.done` ones): the unsafe fix `per-iteration-rule` makes them all its arcs, chosen
        once at the loop's end."""
        if "loop" not in item:
            return False
        events = set()
        for rule in item["case"] or []:
            when = rule.get("when") if isinstance(rule, dict) else None
            match = _STEP_EXIT.fullmatch(str(when).strip()) if isinstance(when, str) else None
            events.add(match.group("event") if match else None)
        per_item = {"step.exit", "call.done"}
        return bool(events & per_item) and events <= per_item | {"loop.done"}

    def per_item_guard(self, rule: Any, where: str, match: Any) -> Any:
        """A per-item rule's guard as a loop step's arc guard: only a rule that holds for every
        item's result (`response is defined` at most), so the arc is unguarded; False (U801
        given) for any other condition, which would read one item's result."""
        rest = match.group("rest") if match else None
        if rest is not None:
            defined = _RESPONSE_DEFINED.fullmatch(rest.strip())
            rest = defined.group("rest") if defined else rest
        if rest is None:
            return None
        self.inexact(rule, "when", f"`when` of {where} reads one item's result")
        return False
