"""Rule family F: what the routing graph implies — unreachable steps, cycles, and ctx variables
that are read but never written or written by branches that run at the same time."""

from __future__ import annotations

from ..analyze.dataflow import ctx_reads, ctx_writes
from ..analyze.names import name_table
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
                f"step {step.name!r} is unreachable from the entry step {playbook.entry!r}"
                + (
                    " (NoETL's local runtime runs it when it is named as the target step; the "
                    "DAG always starts at the entry)"
                    if playbook.profile == "local"
                    else ""
                ),
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
    names = name_table(ctx.playbook)
    for read in ctx_reads(ctx.playbook, ctx.sites):
        if read.name in workload or read.guarded:
            continue
        if read.name not in writes:
            if names.namespace_typo(read.name):
                continue  # a misspelt name: T307 says so, with the name meant
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
    budget = _RaceBudget()
    for name, writers in sorted(writes.items()):
        first_write = {}
        for w in writers:
            if w.step:
                first_write.setdefault(w.step, w)
        # Each writer is reported once, with the first writer (in name order) it races: n
        # findings, not n^2 (a fan-out of thousands of writers would print millions of lines).
        for second, first in _races(ctx.flow, sorted(first_write), budget):
            ctx.report(
                "F404",
                first_write[second].position,
                f"`ctx.{name}` is written by steps {first!r} and {second!r}, "
                "which can run in parallel; the last writer wins at random",
            )
        if budget.exhausted:
            ctx.report(
                "F405",
                next(iter(first_write.values())).position,
                f"the search for parallel writes stopped at `ctx.{name}` after "
                f"{_RaceBudget.LIMIT:,} comparisons of writers: races of it and of the ctx "
                "variables after it in name order are not reported",
            )
            return


class _RaceBudget:
    """Comparisons of writer pairs the race search may make in one playbook. Writers in
    different branches of one fork race without a comparison; only writers after a join (in
    several branches at once) need one, and thousands of those, each following the other,
    would take a comparison per pair."""

    LIMIT = 200_000

    def __init__(self) -> None:
        self.used = 0
        self.exhausted = False

    def take(self) -> bool:
        self.used += 1
        self.exhausted = self.used > self.LIMIT
        return not self.exhausted


def _races(flow, steps: list[str], budget: _RaceBudget):
    """(writer, the first writer before it in ``steps`` it may run in parallel with).

    Two writers each in exactly one branch of a fork, different ones, always race (neither can
    reach the other: the later would be in both branches), so per fork the first two writers
    with different single branches answer for all such pairs. A writer in several branches of
    a fork (after a join) races only with what it neither follows nor precedes: those pairs
    are compared one by one, in name order, up to the race already found."""
    first_single: dict[int, list[tuple[str, str]]] = {}  # fork -> up to 2 (writer, branch)
    earlier: list[str] = []  # writers in some fork's branches, in name order
    joined: list[str] = []  # those in several branches of some fork
    for step in steps:
        branches = flow.fork_branches(step)
        if not branches:
            continue  # in no fork's branches: parallel with nothing
        found = None
        for fork, targets in branches.items():
            if len(targets) != 1:
                continue
            (target,) = targets
            for writer, branch in first_single.get(fork, ()):
                if branch != target:
                    found = writer if found is None else min(found, writer)
                    break
        in_several = any(len(targets) > 1 for targets in branches.values())
        for other in earlier if in_several else joined:
            if found is not None and other >= found:
                break
            if not budget.take():
                return
            if flow.may_run_in_parallel(other, step):
                found = other
                break
        if found is not None:
            yield step, found
        for fork, targets in branches.items():
            if len(targets) == 1:
                kept = first_single.setdefault(fork, [])
                (target,) = targets
                if len(kept) < 2 and all(branch != target for _, branch in kept):
                    kept.append((step, target))
        earlier.append(step)
        if in_several:
            joined.append(step)


def _written_before(ctx: CheckContext, step: str, writers) -> bool:
    """Some writer is the step itself or can run before it (a path reaches it from the writer)."""
    flow = ctx.flow
    return any(w.step is None or w.step == step or flow.is_ancestor(w.step, step) for w in writers)
