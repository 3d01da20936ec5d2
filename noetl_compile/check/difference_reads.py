"""D907, D916, D923, D926, D944, D948-D950: template references whose value differs on NoETL's
engine (a result-store envelope where noetlc hands the result, a name one engine lacks or
binds otherwise).

Read from the template scans check already made (``ctx.sites``); once per code and step.
"""

from __future__ import annotations

from typing import Any

from ..analyze.expressions import scan_template
from ..analyze.sites import TemplateSite
from .context import CheckContext


def references(
    ctx: CheckContext, dialect: str, loop_steps: set[str], pipeline_steps: set[str]
) -> None:
    """D907, D916, D923, D926, D944, D948-D950: what a template reads, once per code and
    step."""
    if dialect == "v1":
        return
    steps = ctx.step_names
    after_failure = _reached_after_failure(ctx) if dialect == "canonical" else {}
    said: set[tuple[str, str | None]] = set()
    for site in ctx.sites:
        for ref in scan_template(site.value).references:
            failed_before = after_failure.get(site.step, set())
            code = _site_code(ref, site, dialect, steps, loop_steps, failed_before)
            code = code or _reference_code(
                ref.root, ref.path, dialect, steps, loop_steps, pipeline_steps
            )
            if code is None or (code, site.step) in said:
                continue
            said.add((code, site.step))
            ctx.report(code, ctx.position_in_string(site.value, ref.offset), _MESSAGES[code](ref))


# The loop context's position fields that NoETL's engines do not advance with the item
# (table (b): 138c10ed engine.py:866-906, dc55c492 engine.py:401; recorded
# template_names/c_loop_fields_dict, s_loop_dict).
_LOOP_POSITION = {("loop", "first"), ("loop", "index"), ("iter", "_first"), ("iter", "_index")}


def _site_code(
    ref: Any,
    site: TemplateSite,
    dialect: str,
    steps: frozenset[str],
    loop_steps: set[str],
    failed_before: set[str],
) -> str | None:
    """The codes that depend on where the reference is: D948 in a loop step's own templates,
    D949 in a case-v2 tool's `args`, D950 in a step an earlier step's failure reaches."""
    head = ref.path[0] if ref.path and isinstance(ref.path[0], str) else None
    if site.step in loop_steps and (
        (ref.root, head) in _LOOP_POSITION or (ref.root, head) == ("iter", "loop_event_id")
    ):
        return "D948"
    in_args = site.field.startswith(("tool.args.", "args."))
    if dialect == "case-v2" and in_args and ref.root in steps and ref.root != site.step:
        return "D949"
    if ref.root in failed_before:
        return "D950"
    return None


def _reached_after_failure(ctx: CheckContext) -> dict[str, set[str]]:
    """step -> the steps whose failed call routes to it: an arc whose `when` reads the failure
    (`error`, `call.error`, `output.status`). 138c10ed takes an arc without `when` after a
    failed call too, but any call can fail: marking every step a plain arc reaches would say
    nothing."""
    out: dict[str, set[str]] = {}
    for step in ctx.playbook.steps:
        for arc in step.router.arcs:
            when = arc.when
            if isinstance(when, str) and any(word in when for word in _FAILURE_WORDS):
                out.setdefault(arc.target, set()).add(step.name)
    return out


_FAILURE_WORDS = ("error", "output.status")


def _reference_code(
    root: str,
    path: tuple,
    dialect: str,
    steps: frozenset[str],
    loop_steps: set[str],
    pipeline_steps: set[str],
) -> str | None:
    if dialect == "case-v2":
        return "D926" if root == "ctx" else None
    if root == "ctx" and (not path or path[0] in steps):
        return "D923"
    if root == "output" and (path[:1] in (("ref",), ("context",)) or tuple(path) == ("data",)):
        return "D944"
    if root in loop_steps and path[:1] == ("results",):
        return "D907"
    if root in steps and (not path or root in pipeline_steps):
        return "D916"
    return None


_MESSAGES = {
    "D907": lambda ref: (
        f"`{ref.root}.results` of a loop: NoETL hands templates one result-store record per "
        "iteration (an item's fields fail there); noetlc hands the iteration results"
    ),
    "D916": lambda ref: (
        f"`{ref.root}` rendered whole: NoETL renders the step's result-store envelope (ref, "
        "_ref, context, ...), '' for a failed step; noetlc renders the result"
        if not ref.path
        else f"a field of pipeline step `{ref.root}`: NoETL hands templates its result-store "
        "envelope, whose `context` flattens the record (the field renders ''); noetlc reads the "
        "field, the last task's fields laid under the record"
    ),
    "D923": lambda ref: (
        "a step's result read through `ctx`: NoETL's `ctx.<step>` is the result-store envelope "
        "(the result's keys plus ref, _ref, data, status, ...); noetlc's is the result itself"
    ),
    "D944": lambda ref: (
        f"`output.{ref.path[0]}`: 138c10ed fills it from the worker's result-store record (a "
        "mapping after every call, failed or not); noetlc keeps no result store, so it is none"
        if ref.path[0] != "data"
        else "`output.data` read whole: after a failed call 138c10ed's is the worker's "
        "result-store record's `context` (a mapping); noetlc's is none"
    ),
    "D948": lambda ref: (
        f"`{ref.root}.{ref.path[0]}` in a loop item: NoETL's engine renders it before its counter "
        "follows the item (recorded: `loop.first` false and `loop.index` 0 on the item it "
        "records; `iter.loop_event_id` is its own event id); noetlc's follows the item"
    ),
    "D949": lambda ref: (
        f"step `{ref.root}` in a case-v2 `args` value: dc55c492 does not bind its result there "
        "(recorded: a comparison with it is false, the value arrives as text); noetlc binds "
        "the result"
    ),
    "D950": lambda ref: (
        f"step `{ref.root}` read where its failure routes: 138c10ed keeps no result for a "
        "failed call, so the name is undefined there; noetlc binds its error document"
    ),
    "D926": lambda ref: (
        "`ctx` in a case-v2 template: dc55c492 has no `ctx` in its render context (the template "
        "stays text there); noetlc keeps `ctx`"
    ),
}
