"""D907, D916, D923, D926, D944: template references whose value differs on NoETL's engine
(a result-store envelope where noetlc hands the result, a name one engine lacks).

Read from the template scans check already made (``ctx.sites``); once per code and step.
"""

from __future__ import annotations

from ..analyze.expressions import scan_template
from .context import CheckContext


def references(
    ctx: CheckContext, dialect: str, loop_steps: set[str], pipeline_steps: set[str]
) -> None:
    """D907, D916, D923, D926, D944: what a template reads, once per construct and step."""
    if dialect == "v1":
        return
    steps = ctx.step_names
    said: set[tuple[str, str | None]] = set()
    for site in ctx.sites:
        for ref in scan_template(site.value).references:
            code = _reference_code(ref.root, ref.path, dialect, steps, loop_steps, pipeline_steps)
            if code is None or (code, site.step) in said:
                continue
            said.add((code, site.step))
            ctx.report(code, ctx.position_in_string(site.value, ref.offset), _MESSAGES[code](ref))


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
    if root == "output" and path[:1] in (("ref",), ("context",)):
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
    ),
    "D926": lambda ref: (
        "`ctx` in a case-v2 template: dc55c492 has no `ctx` in its render context (the template "
        "stays text there); noetlc keeps `ctx`"
    ),
}
