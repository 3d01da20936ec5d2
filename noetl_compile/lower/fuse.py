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

Off by default: the unfused DAG shows one task per step, which is what a reader of the Airflow UI
expects, and fusion trades that view for latency.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import networkx as nx

__all__ = ["FUSED_PREFIX", "fused_runs"]

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
