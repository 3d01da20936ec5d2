"""Rule family F: what the routing graph implies — unreachable steps, cycles, and ctx variables
that are read but never written or written by branches that run at the same time."""

from __future__ import annotations

from ..analyze.dataflow import ctx_reads, ctx_writes
from .context import CheckContext


def check(ctx: CheckContext) -> None:
    flow = ctx.flow
    playbook = ctx.playbook
    # An arc to an unknown step (R201) is probably the route that was meant to reach the
    # orphan; reporting it unreachable as well would only repeat that mistake.
    broken_routing = any(
        arc.target not in ctx.step_names for s in playbook.steps for arc in s.router.arcs
    )
    for step in playbook.steps:
        if broken_routing:
            break
        if step.name not in flow.reachable and not _closes_reachable_loop(ctx, step):
            ctx.report(
                "F401",
                step.span.position,
                f"step {step.name!r} is unreachable from the entry step {playbook.entry!r}",
            )
    for cycle in flow.cycles:
        first = playbook.step(cycle[0])
        if len(cycle) == 1:
            what = f"step {cycle[0]!r} routes back to itself"
        else:
            what = f"steps {', '.join(repr(n) for n in cycle)} form a cycle ({' -> '.join(cycle + [cycle[0]])})"
        ctx.report("F402", first.span.position, f"{what}; it compiles to one region task")
    _check_ctx(ctx)


def _closes_reachable_loop(ctx: CheckContext, step) -> bool:
    """A v1 `end_loop` step is reached through its loop even when no arc names it."""
    return step.end_loop is not None and step.end_loop in ctx.flow.reachable


def _check_ctx(ctx: CheckContext) -> None:
    writes = ctx_writes(ctx.playbook)
    workload = set(ctx.playbook.workload or {})
    for read in ctx_reads(ctx.playbook, ctx.sites):
        if read.name in workload or read.guarded:
            continue
        if read.name not in writes:
            ctx.report(
                "F403",
                ctx.position_in_string(read.value, read.offset),
                f"`ctx.{read.name}` is read in step {read.step!r} but no step writes it "
                "and it is not a workload key",
            )
        elif read.step in ctx.flow.reachable and not _written_before(
            ctx, read.step, writes[read.name]
        ):
            names = sorted({repr(w.step) for w in writes[read.name] if w.step})
            verb = "runs" if len(names) == 1 else "run"
            ctx.report(
                "F403",
                ctx.position_in_string(read.value, read.offset),
                f"`ctx.{read.name}` is read in step {read.step!r} but written only by "
                f"{', '.join(names)}, which never {verb} before it",
            )
    for name, writers in sorted(writes.items()):
        first_write = {}
        for w in writers:
            if w.step:
                first_write.setdefault(w.step, w)
        steps = sorted(first_write)
        # Each writer is reported once, with the first writer it races: n findings, not n^2
        # (a fan-out of thousands of writers would otherwise print millions of lines).
        for i, second in enumerate(steps):
            race = (steps[j] for j in range(i) if ctx.flow.may_run_in_parallel(steps[j], second))
            first = next(race, None)
            if first is not None:
                where = first_write[second]
                ctx.report(
                    "F404",
                    where.position,
                    f"`ctx.{name}` is written by steps {first!r} and {second!r}, "
                    "which can run in parallel; the last writer wins at random",
                )


def _written_before(ctx: CheckContext, step: str, writers) -> bool:
    """Some writer is the step itself or can run before it (a path reaches it from the writer)."""
    flow = ctx.flow
    return any(w.step is None or w.step == step or flow.is_ancestor(w.step, step) for w in writers)
