"""The numbers a playbook call's settings give: how often a waited-for child is looked at
(``poll_interval``) and which execution the child records as its parent
(``parent_execution_id``).

Its own module, standard library only: ``operators/nested.py`` reads ``poll_interval`` in its
constructor, on every DAG parse, where importing ``runtime.nested`` (the interpreter's events,
the tool registry) would cost the parse about ten modules it never runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["parent_of", "poll_interval", "whole_number"]


def whole_number(value: Any) -> int | None:
    """``int(value)``, or None where it is not one."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def poll_interval(config: Mapping[str, Any]) -> int | None:
    """Seconds between two looks at a child that the call waits for: the call's
    ``poll_interval`` (playbook.rs:402: ``unwrap_or(2).max(1)``), None where it gives none or
    one that is not a whole number (the waiter keeps its own default)."""
    value = config.get("poll_interval")
    if isinstance(value, bool):
        return None
    seconds = whole_number(value)
    return None if seconds is None else max(seconds, 1)


def parent_of(config: Mapping[str, Any], caller: Any) -> int | None:
    """The parent recorded for the child: the call's ``parent_execution_id`` where it is a
    positive id, else the caller's execution (playbook.rs:343: ``unwrap_or(ctx.execution_id)``,
    only a positive one sent)."""
    given = whole_number(config.get("parent_execution_id"))
    parent = given if given is not None else whole_number(caller)
    return parent if parent is not None and parent > 0 else None
