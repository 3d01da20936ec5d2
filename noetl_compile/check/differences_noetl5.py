"""D956-D958, D962-D963: NoETL 5 constructs whose run on Airflow differs from their run on NoETL 5
(docs/semantics.md section 1, table "NoETL 5: where noetlc departs from its source"; each case
under tests/noetl5/cases/ names the Rust line).

Infos, as the other D9xx: the playbook is valid and noetlc runs it as the row says; a team moving
it from NoETL 5 sees the difference at the construct before the run. The other rows of that table
a playbook's text triggers are refusals or warnings of their own families (C512, X601, S116,
S125, C514, S114).
"""

from __future__ import annotations

from ..analyze.expressions import scan_template
from ..ast import Arc, Step
from ..spans import YMap
from .context import CheckContext
from .difference_sites import pos_of

# A statement NoETL 5's postgres tool reads rows from (noetl/tools ded94546 postgres.rs:326:
# the trimmed text, upper-cased, starts with SELECT or WITH).
_ROW_STATEMENTS = ("SELECT", "WITH")


def check_noetl5(ctx: CheckContext) -> None:
    cursor_steps: set[str] = set()
    for step in ctx.playbook.steps:
        cursor = step.loop.cursor if step.loop is not None else None
        if isinstance(cursor, YMap):
            cursor_steps.add(step.name)
            _claim(ctx, step, cursor)
        for task in step.tasks:
            if task.kind == "transfer" and isinstance(task.config, YMap):
                _target_query(ctx, step, task.config)
        if step.loop is not None and ctx.playbook.profile == "local":
            _local_loop(ctx, step)
        for arc in step.router.arcs:
            _templated_args(ctx, step, arc)
    if cursor_steps:
        _cursor_result_reads(ctx, cursor_steps)


def _local_loop(ctx: CheckContext, step: Step) -> None:
    """D963: the CLI's local runtime (the runtime `executor.profile: local` names) runs no loop."""
    raw = step.raw
    ctx.report(
        "D963",
        ctx.key_pos(raw, "loop") if isinstance(raw, YMap) else ctx.pos(step, None),
        f"step {step.name!r} loops: NoETL 5's CLI (`noetl run -r local`) does not read `loop:` and "
        "runs the tool once with the item's tag as text; noetlc runs one call per item, as "
        "NoETL 5's server does",
    )


def _templated_args(ctx: CheckContext, step: Step, arc: Arc) -> None:
    """D962, at each templated value of a target's `args`: NoETL 5 hands it on unrendered."""
    if not isinstance(arc.args, YMap):
        return
    for key, value in arc.args.items():
        if isinstance(value, str) and "{{" in value:
            ctx.report(
                "D962",
                ctx.pos(arc.args, key),
                f"`args.{key}` of the arc {step.name!r} -> {arc.target!r} is a template: NoETL 5 "
                "hands the target its text unrendered; noetlc renders it where the arc is taken",
            )


def _claim(ctx: CheckContext, step: Step, cursor: YMap) -> None:
    """D956: a postgres claim that is no SELECT/WITH returns no rows on NoETL 5."""
    claim = cursor.get("claim")
    if cursor.get("kind") != "postgres" or not isinstance(claim, str):
        return
    if claim.strip().upper().startswith(_ROW_STATEMENTS):
        return
    ctx.report(
        "D956",
        pos_of(ctx, claim, cursor),
        f"the claim of cursor step {step.name!r} starts with "
        f"{(claim.strip().split(None, 1) or [''])[0]!r}: NoETL 5's postgres tool returns no rows "
        "for it, so NoETL 5 drains the loop at its first claim; noetlc works every row it returns",
    )


def _target_query(ctx: CheckContext, step: Step, config: YMap) -> None:
    """D957: NoETL 5's transfer never reads `target.query`."""
    target = config.get("target")
    if not isinstance(target, YMap) or "query" not in target:
        return
    ctx.report(
        "D957",
        ctx.pos(target, "query"),
        f"`target.query` of transfer step {step.name!r}: NoETL 5 never reads it (the rows go into "
        "`target.table`, and a target without one fails); noetlc runs the statement once per row",
    )


def _cursor_result_reads(ctx: CheckContext, cursor_steps: set[str]) -> None:
    """D958, once per reading step: a template reading a cursor step's result, which is
    `{cursor: drained, frames}` on NoETL 5 and the loop aggregate on noetlc."""
    said: set[str | None] = set()
    for site in ctx.sites:
        if site.step in said:
            continue
        for ref in scan_template(site.value).references:
            if ref.root in cursor_steps and ref.root != site.step:
                said.add(site.step)
                ctx.report(
                    "D958",
                    ctx.position_in_string(site.value, ref.offset),
                    f"`{ref.root}` is a cursor loop step: its result is `{{cursor: drained, "
                    "frames}` on NoETL 5 and the loop's aggregate (`results`, `stats`) on noetlc",
                )
                break
