"""Where a D9xx finding points, and what a template or guard mentions: shared by the
difference detectors of every generation (``differences``, ``differences_v1``,
``difference_reads``)."""

from __future__ import annotations

from typing import Any

from ..analyze.expressions import scan_template
from ..ast import Arc, Step
from ..spans import YList, YMap, YStr
from .context import CheckContext


def mentions(when: Any, word: str) -> bool:
    return isinstance(when, str) and word in when


def reads(text: str, name: str) -> bool:
    return any(ref.root == name for ref in scan_template(text).references)


def step_pos(ctx: CheckContext, step: Step):
    raw = step.raw
    if isinstance(raw, YMap) and "step" in raw:
        return ctx.pos(raw, "step")
    return ctx.pos(step, None)


def arc_pos(ctx: CheckContext, arc: Arc):
    if isinstance(arc.when, YStr):
        return ctx.pos(arc.when)
    return ctx.pos(arc, None)


def pos_of(ctx: CheckContext, value: Any, fallback: Any):
    if isinstance(value, (YStr, YMap, YList)):
        return ctx.pos(value)
    return ctx.pos(fallback, None)
