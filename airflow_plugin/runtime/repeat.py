"""Unified retry: error retries and success-driven repetition (formal spec section 6).

One step invocation may call its tool several times: to recover from an error (``retry`` on a
failed call) or to continue after a success (pagination, polling: ``next_call`` / case-v2
``retry.params`` / ``call.params``), collecting results as it goes. Every generation spells it
differently; :func:`step_policies` reads them all into :class:`Policy` objects that the step runtime
evaluates after each call, first match wins:

* v1 dict: ``retry: {max_attempts, initial_delay, backoff_multiplier, max_delay, retry_when,
  stop_when}`` (an error retry; ``retry: true`` / ``retry: 3`` are shorthands);
* v1 split dict: ``retry: {on_error: {when, ...}, on_success: {while, next_call, collect, ...}}``;
* list form: ``retry: [{when, then: {max_attempts, ..., next_call, collect, sink}}]``;
* case-v2 actions: a matching case rule whose ``then`` holds ``retry`` (``params`` = the next call's
  params) or ``call`` (re-invoke with ``params``) — evaluated by the step runtime, which builds the
  :class:`Policy` with :func:`case_policy`.

Delays: ``initial_delay * backoff_multiplier ** (attempt - 1)``, capped by ``max_delay``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .policy import backoff_wait

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "Policy",
    "apply_next_call",
    "case_policy",
    "collect_value",
    "extract_path",
    "merge_collected",
    "step_policies",
]

DEFAULT_MAX_ATTEMPTS = 3
# A success-driven repetition without a bound would page forever on a server that always says
# "more"; NoETL bounds it too.
DEFAULT_MAX_REPEATS = 100


@dataclass(frozen=True)
class Policy:
    """One retry policy: when it applies and what the next call looks like.

    ``on``: ``error`` (only after a failed call), ``success`` (only after a successful one) or
    ``any``; ``when``: the guard (``None`` = always), ``stop_when``: a guard that ends it;
    ``next_call``: tool-config overrides for the next call (``params``, ``headers``, ``body``...),
    rendered after each call; ``collect``: ``{strategy, path | from, into}``; ``sink``: a
    per-iteration sink block.
    """

    on: str
    when: Any = None
    stop_when: Any = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    initial_delay: float = 0.0
    backoff_multiplier: float = 1.0
    max_delay: float | None = None
    next_call: Mapping[str, Any] = field(default_factory=dict)
    collect: Mapping[str, Any] | None = None
    sink: Mapping[str, Any] | None = None

    def delay(self, attempt: int) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` is 1-based)."""
        wait = backoff_wait(
            attempt, self.initial_delay, self.backoff_multiplier, cap=self.max_delay
        )
        return max(wait, 0.0)


def _number(value: Any, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


# Keys of a retry/call action that describe the next call rather than the policy itself
# (case-v2 writes ``retry: {max_attempts, params: {...}}``; ``params`` is by far the most common).
_CALL_KEYS = ("params", "headers", "body", "payload", "data", "input", "args", "url", "endpoint")


def _policy(on: str, spec: Mapping[str, Any], *, when: Any = None, default_max: int) -> Policy:
    next_call = spec.get("next_call")
    if not isinstance(next_call, Mapping):
        next_call = {key: spec[key] for key in _CALL_KEYS if key in spec}
    collect = spec.get("collect")
    sink = spec.get("sink") or spec.get("per_iteration")
    return Policy(
        on=on,
        when=when,
        stop_when=spec.get("stop_when"),
        max_attempts=_int(spec.get("max_attempts"), default_max),
        initial_delay=_number(spec.get("initial_delay", spec.get("delay")), 0.0),
        backoff_multiplier=_number(spec.get("backoff_multiplier"), 1.0),
        max_delay=_number(spec["max_delay"], 0.0) if spec.get("max_delay") is not None else None,
        next_call=dict(next_call),
        collect=dict(collect) if isinstance(collect, Mapping) else None,
        sink=dict(sink) if isinstance(sink, Mapping) else None,
    )


def step_policies(retry: Any) -> list[Policy]:
    """The step-level ``retry`` block of any generation as an ordered policy list."""
    if retry is None or retry is False:
        return []
    if retry is True:
        return [Policy(on="error")]
    if isinstance(retry, int) and not isinstance(retry, bool):
        return [Policy(on="error", max_attempts=retry)]
    if isinstance(retry, list):
        policies = []
        for entry in retry:
            if not isinstance(entry, Mapping):
                continue
            raw_then = entry.get("then")
            then: Mapping[str, Any] = raw_then if isinstance(raw_then, Mapping) else {}
            # A list policy with a success-side action repeats on success; otherwise it is an
            # error retry (the unified form's two uses, told apart by what they do).
            on = "success" if (then.get("next_call") or then.get("collect")) else "error"
            policies.append(
                _policy(on, then, when=entry.get("when"), default_max=DEFAULT_MAX_ATTEMPTS)
            )
        return policies
    if not isinstance(retry, Mapping):
        return []
    policies = []
    if isinstance(retry.get("on_error"), Mapping):
        spec = retry["on_error"]
        policies.append(
            _policy("error", spec, when=spec.get("when"), default_max=DEFAULT_MAX_ATTEMPTS)
        )
    if isinstance(retry.get("on_success"), Mapping):
        spec = retry["on_success"]
        policies.append(
            _policy(
                "success",
                spec,
                when=spec.get("while", spec.get("when")),
                default_max=DEFAULT_MAX_REPEATS,
            )
        )
    if not policies:
        # v1 ``retry_when`` decides by itself (``{{ error != None or status_code >= 500 }}``);
        # without it, a v1 retry block retries failures.
        guard = retry.get("retry_when", retry.get("when"))
        policies.append(
            _policy(
                "any" if guard is not None else "error",
                retry,
                when=guard,
                default_max=DEFAULT_MAX_ATTEMPTS,
            )
        )
    return policies


def case_policy(action: Mapping[str, Any], *, kind: str, failed: bool) -> Policy:
    """A case-v2 ``then.retry`` / ``then.call`` action as the policy for the next call."""
    spec = dict(action) if isinstance(action, Mapping) else {}
    default = DEFAULT_MAX_ATTEMPTS if failed else DEFAULT_MAX_REPEATS
    if kind == "call" and "max_attempts" not in spec:
        default = DEFAULT_MAX_REPEATS
    return _policy("error" if failed else "success", spec, default_max=default)


def apply_next_call(tool: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The tool block for the next call: mappings (``params``, ``headers``...) are merged, other
    values replaced."""
    merged = dict(tool)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def extract_path(value: Any, path: Any) -> Any:
    """``a.b.0.c`` inside ``value`` (mappings by key, lists by index); None when absent."""
    if not isinstance(path, str) or not path:
        return value
    current = value
    for part in path.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.lstrip("-").isdigit():
            index = int(part)
            if -len(current) <= index < len(current):
                current = current[index]
            else:
                return None
        else:
            return None
    return current


def collect_value(collect: Mapping[str, Any], response: Any, rendered_from: Any = None) -> Any:
    """What one call contributes: the rendered ``from`` if given, else ``path`` in the response."""
    if "from" in collect:
        return rendered_from
    return extract_path(response, collect.get("path"))


def merge_collected(strategy: Any, collected: Any, value: Any) -> Any:
    """Fold one contribution into the accumulator: append (lists are extended), replace, merge."""
    strategy = strategy or "append"
    if strategy == "replace":
        return value
    if strategy == "merge":
        if isinstance(collected, Mapping) and isinstance(value, Mapping):
            return {**collected, **value}
        return value if collected is None else collected
    items = list(collected) if isinstance(collected, list) else []
    if isinstance(value, list):
        items.extend(value)
    elif value is not None:
        items.append(value)
    return items
