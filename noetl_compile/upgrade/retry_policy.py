"""The closest canonical form of an older generation's `retry` (unsafe fix `retry-policy`).

case-v2 (`then: {retry: {...}}` on `call.error`, step or `tool.retry`) and v1 (step `retry`)
write a retry as `{max_attempts, initial_delay, backoff_multiplier, max_delay, jitter,
retry_when, stop_when}`; the canonical generation retries only through the tool's
`spec.policy.rules` (NoETL 138c10ed models.py TaskPolicy). The rule written here retries a call
that failed, `max_attempts` tries in all (3 by default, as both), waiting `initial_delay`
doubled per try when a `backoff_multiplier` is given (`exponential`), else the plain delay
(`fixed`). What that changes is declared once, in unsafe.py (`retry-policy`).
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from .edits import flow

FAILED = "{{ output.status == 'error' }}"
KNOWN = {
    "max_attempts", "initial_delay", "backoff_multiplier", "max_delay", "jitter", "retry_when",
    "stop_when", "enabled",
}  # fmt: skip


def policy_spec(retry: Any) -> CommentedMap | None:
    """`{policy: {rules: [...]}}` for a retry mapping (or `true`/an attempt count, v1's short
    forms); None for anything else (a list of conditional retries, a template, unknown keys)."""
    if retry is True:
        retry = {}
    elif isinstance(retry, int) and not isinstance(retry, bool) and retry > 0:
        retry = {"max_attempts": retry}
    if not isinstance(retry, dict) or set(retry) - KNOWN or retry.get("enabled", True) is not True:
        return None
    then: dict = {"do": "retry", "attempts": retry.get("max_attempts", 3)}
    if not isinstance(then["attempts"], int):
        return None
    delay = retry.get("initial_delay")
    if delay is not None:
        if not isinstance(delay, (int, float)):
            return None
        then["backoff"] = "exponential" if retry.get("backoff_multiplier") else "fixed"
        then["delay"] = delay
    rule = CommentedMap({"when": DoubleQuotedScalarString(FAILED), "then": flow(then)})
    return CommentedMap({"policy": CommentedMap({"rules": CommentedSeq([rule])})})
