"""What a case-v2 rule's parts mean to the upgrade: a `then` list merged into one mapping of
actions, and whether python code's `result` can hold a `data` mapping (which case-v2's
`response` reads first). Used by case_v2.py."""

from __future__ import annotations

import ast
import re
from typing import Any

# `{{ event.name == 'step.exit' }}` alone, or followed by `and <rest>`. Anchored, no nested
# quantifiers over overlapping classes: linear.
_STEP_EXIT = re.compile(
    r"\{\{\s*event\.name\s*==\s*(['\"])(?P<event>step\.exit|call\.done|loop\.done)\1\s*"
    r"(?:and\s+(?P<rest>[^\n]*?))?\s*\}\}"
)
# A rule on a failed call, alone: `{{ event.name == 'call.error' }}` (anchored; linear).
_CALL_ERROR = re.compile(r"\{\{\s*event\.name\s*==\s*(['\"])call\.error\1\s*\}\}")
# `response is defined` as the first term after the exit test: after a tool call the runtime
# always binds `response` (null for no result), so at a tool step's exit the term is true.
_RESPONSE_DEFINED = re.compile(r"response\s+is\s+defined(?:\s+and\s+(?P<rest>.*))?", re.DOTALL)


def no_data_key(code: str) -> bool:
    """Is every value the python code gives `result` a dict literal whose keys are strings other
    than `data`, `result` never read or changed after? (Anything else: not known, False.)"""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    values, stores = [], 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "result":
            if not isinstance(node.ctx, ast.Store):
                return False
            stores += 1
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "result" for t in node.targets
        ):
            values.append(node.value)
    if not values or stores != len(values):
        return False  # also an augmented or annotated assignment, a loop target, ...
    return all(
        isinstance(v, ast.Dict)
        and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in v.keys)
        and all(k.value != "data" for k in v.keys)
        for v in values
    )


def merged(then: Any) -> dict | None:
    """A `then` as one mapping of actions: a list of action mappings merges in order, its
    `next` lists joined (as the case-v2 engine reads it); None for anything else."""
    if isinstance(then, dict):
        return then
    if not isinstance(then, list) or not all(isinstance(a, dict) for a in then):
        return None
    merged: dict = {}
    for action in then:
        for key, value in action.items():
            if key == "next" and "next" in merged:
                first = merged["next"] if isinstance(merged["next"], list) else [merged["next"]]
                merged["next"] = first + (value if isinstance(value, list) else [value])
            elif key in merged:
                return None  # the same action twice: which wins is the engine's detail
            else:
                merged[key] = value
    return merged
