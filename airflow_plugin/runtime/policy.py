"""The two decisions every retry and rule vocabulary of the runtime shares, made once.

``first_match``: rules are tried in order and the first that holds wins; nothing after it is
evaluated (evaluating a guard can report issues and events). Case rules (``step_case``), step
retry policies (``step_calls``) and tool-pipeline rules (``pipeline``) each say only what
"holds" means for them.

``backoff_wait``: seconds before the next try. Geometric, ``initial * multiplier ** (attempt -
1)`` (multiplier 1: a fixed delay, 2: NoETL's ``exponential``), or linear, ``initial *
attempt``; optionally capped. Pipeline ``backoff`` names and v1/case ``retry`` numbers both map
onto it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["backoff_wait", "first_match"]

R = TypeVar("R")


def first_match(rules: Sequence[R], holds: Callable[[int, R], bool]) -> tuple[int, R] | None:
    """``(index, rule)`` of the first rule ``holds`` accepts, or None."""
    for index, rule in enumerate(rules):
        if holds(index, rule):
            return index, rule
    return None


def backoff_wait(
    attempt: int,
    initial: float,
    multiplier: float = 1.0,
    *,
    linear: bool = False,
    cap: float | None = None,
) -> float:
    """Seconds to wait after failed try number ``attempt`` (1-based)."""
    wait = initial * attempt if linear else initial * (multiplier ** (attempt - 1))
    return min(wait, cap) if cap is not None else wait
