"""Step fusion: maximal chains of plain steps lowered onto one task (``noetlc compile --fuse``).

On a deployed Airflow each task pays a scheduler loop and a task process start (seconds on a
LocalExecutor), while a small NoETL step runs in milliseconds, so a chain of ten python steps
spends nearly all its time between tasks. A fused run is one acyclic region: the compiler gives it
one ``NoetlRegionOperator`` task, which runs its member steps one after another with the same
step runtime (``runtime.interpreter``) a cyclic region uses. Each member still records its own
events, keeps its own retry policy and its own result (downstream tasks read it from the fused
task's ``results``), so the NoETL view, ``noetlc run``'s report and ``noetlc status`` show
steps, not tasks.

Which steps fuse (the rule): a link ``a -> b`` joins two steps into one run when

* both are plain steps: they run in the task's process (no loop, cursor loop or v1 loop body, no
  nested playbook, no gate) and belong to no cyclic region;
* ``a`` routes to no other step (one way out) and ``b`` is reached from no other step (one way
  in) and is not the entry step: the run is a chain, so the interpreter runs each member at most
  once, exactly as the unfused tasks would run.

A run is a maximal chain of such links with at least two steps. Its head may be entered from
outside (one upstream task, or none for the entry step); a join (a step with several ways in)
never heads a run, because an interpreter entered by two routes would run it twice where the
join task runs once.

A loop over ``in`` is a boundary of chains, and fusion folds its neighbours into its task group
instead (:func:`loop_folds`): the loop's head runs a bare entry step before it renders the
collection, and its tail runs the chain of plain steps after it (``operators/loop_fused.py``).
A fused loop so costs the three levels of the DAG a person would write (a task making the
batches, the mapped work, a task summing up), not five: each level is a scheduling round.

Off by default: the unfused DAG shows one task per step, which is what a reader of the Airflow UI
expects, and fusion trades that view for latency.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import networkx as nx

__all__ = ["FUSED_PREFIX", "fused_runs", "loop_folds"]

# Fused units are named after their first step: `fused_<step>`.
FUSED_PREFIX = "fused"


def fused_runs(
    graph: nx.DiGraph,
    steps: Iterable[str],
    *,
    fusable: Callable[[str], bool],
    entry: str | None,
) -> list[list[str]]:
    """The fused runs of ``graph``: chains of at least two fusable steps, in workflow order.

    ``steps``: the reachable steps in workflow order; ``fusable``: whether a step may be a member
    (a plain, in-process step outside every region and loop body).
    """
    ok = {name for name in steps if name in graph and fusable(name)}
    nxt: dict[str, str] = {}
    has_prev: set[str] = set()
    for a in ok:
        if graph.out_degree(a) != 1:
            continue
        (b,) = graph.successors(a)
        if b == a or b not in ok or b == entry or graph.in_degree(b) != 1:
            continue
        nxt[a] = b
        has_prev.add(b)
    runs: list[list[str]] = []
    for name in steps:
        if name not in nxt or name in has_prev:
            continue  # not the head of a chain
        run = [name]
        while run[-1] in nxt:
            run.append(nxt[run[-1]])
        if graph.in_degree(run[0]) > 1:
            run = run[1:]  # a join runs once: it stays its own task
        if len(run) >= 2:
            runs.append(run)
    return runs


def loop_folds(
    graph: nx.DiGraph,
    steps: Iterable[str],
    *,
    loops: Callable[[str], bool],
    fusable: Callable[[str], bool],
    lead_ok: Callable[[str, str], bool],
    trail_ok: Callable[[str], bool],
    entry: str | None,
) -> dict[str, tuple[list[str], list[str]]]:
    """Loop step -> (its lead, its trail): the plain steps its loop's head runs before the
    collection and its tail runs after the loop, so a fused loop costs the levels of the
    hand-written DAG (batches -> mapped work -> total) and not two more.

    * the lead: the entry step, when it routes only to the loop and ``lead_ok`` (a bare
      ``noop`` whose arc carries nothing: what the head runs is its events);
    * the trail: the chain from the loop's one target, by the fusion rule (one way into each
      member, one way out of each but the last) while ``trail_ok`` (its routing never takes a
      failure, which would need the trigger rules of a task of its own).

    ``loops``: whether a step is a loop over ``in`` this lowering may fold; ``fusable``: as for
    :func:`fused_runs`."""
    folds: dict[str, tuple[list[str], list[str]]] = {}
    claimed: set[str] = set()
    for name in steps:
        if name not in graph or not loops(name):
            continue
        lead: list[str] = []
        preds = list(graph.predecessors(name))
        if len(preds) == 1:
            (first,) = preds
            if (
                first == entry
                and graph.in_degree(first) == 0
                and graph.out_degree(first) == 1
                and first not in claimed
                and fusable(first)
                and lead_ok(first, name)
            ):
                lead = [first]
        trail: list[str] = []
        current = name
        while graph.out_degree(current) == 1:
            (target,) = graph.successors(current)
            if (
                target in claimed
                or target == entry
                or target == name
                or target in trail
                or graph.in_degree(target) != 1
                or not fusable(target)
                or not trail_ok(target)
            ):
                break
            trail.append(target)
            current = target
        if lead or trail:
            folds[name] = (lead, trail)
            claimed.update(lead, trail, [name])
    return folds
