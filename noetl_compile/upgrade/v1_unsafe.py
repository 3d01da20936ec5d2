"""The unsafe fixes of a v1 playbook (unsafe.py): a step's `save`/`sink` kept as a comment, its
`retry` as its tool's retry policy (retry_policy.py), `pass` kept as a comment, a toolless step's
`result` as a python tool, and a loop body of one step folded into a canonical loop
(v1_loop.py). Mixed into V1Upgrade (v1.py), which rewrites the rest exactly."""

from __future__ import annotations

from typing import Any

from . import v1_loop
from .case_v2_unsafe import RETRY_REASON, SINK_REASON
from .retry_policy import policy_spec

# NoETL 0d51146e's broker skips a step whose `pass` renders true (v1.py LEFT says the same).
PASS_REASON = "NoETL 0d51146e's broker skips the step when it renders true; canonical has no skip"
LOOP_REASON = (
    "a v1 loop routes into body steps closed by `end_loop`; canonical loops run the step "
    "itself per item"
)
NO_TOOL = ("end", "start", "router")


def kind_of(item: Any) -> str | None:
    """A v1 step's tool kind as written (`type`, or `tool` as a string)."""
    kind = item.get("type", item.get("tool") if isinstance(item.get("tool"), str) else None)
    return None if kind is None else str(kind)


class V1UnsafeFixes:
    """Mixed into V1Upgrade (a Rewriter); ``folds`` are the loop bodies v1_loop.plan found."""

    folds: dict[str, v1_loop.LoopBody]

    def fold(self, item: Any, name: str, label: str, end: int) -> set[str]:
        """The v1 loop bodies folded into canonical loop steps (unsafe: v1_loop.py); the keys
        it rewrote. Returns {"*"} when the whole step is done."""
        for fold in self.folds.values():
            if name == fold.loop:
                reason = f"`loop` of {label}: {LOOP_REASON}"
                if self.unsafe_fix(item, "loop", "loop-body", reason):
                    v1_loop.loop_step(self, item, fold, end)
                return {"*"}
            if not self.findings.unsafe:
                continue  # body and end steps: their own U801s, as without a fold
            if name == fold.body:
                v1_loop.body_step(self, item, fold)
                return set()
            if name == fold.end:
                v1_loop.end_step(self, item, fold, end)
                return {"end_loop", "result"}
        return set()

    def unsafe_keys(self, item: Any, label: str, end: int) -> tuple[Any, set[str]]:
        """A step's `save`/`sink` (kept as a comment) and `retry` (a retry policy for its tool)
        as unsafe fixes; returns the policy (None: none) and the keys tried, whose U801 (when
        the fix is not applied) ``unsafe_fix`` gave already."""
        attempted: set[str] = set()
        if "pass" in item:
            attempted.add("pass")
            reason = f"`pass` of {label}: {PASS_REASON}"
            if self.unsafe_fix(item, "pass", "pass-dropped", reason) and not self.comment_out(
                item, "pass", end, None
            ):
                self.inexact(item, "pass", f"`pass` of {label} opens its item's line")
        if "result" in item and "end_loop" not in item and kind_of(item) in (None, *NO_TOOL):
            attempted.add("result")
            reason = f"`result` of {label}: a v1 loop's per-item result, or a step's own"
            if self.unsafe_fix(item, "result", "result-as-tool", reason):
                v1_loop.result_tool(self, item, [k for k in ("type",) if k in item], end)
        for key in ("save", "sink"):
            if key not in item:
                continue
            attempted.add(key)
            reason = f"`{key}` of {label}: {SINK_REASON}"
            if self.unsafe_fix(item, key, "sink-removed", reason) and not self.comment_out(
                item, key, end, None
            ):
                self.inexact(item, key, f"`{key}` of {label} opens its item's line")
        policy = policy_spec(item["retry"]) if "retry" in item else None
        if policy is None:
            return None, attempted
        attempted.add("retry")
        if not self.unsafe_fix(
            item, "retry", "retry-policy", f"`retry` of {label}: {RETRY_REASON}"
        ):
            return None, attempted
        start, stop = self.region(item, "retry", end)
        self.edits.replace(start, stop, [])
        return policy, attempted
