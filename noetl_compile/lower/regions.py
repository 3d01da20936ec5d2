"""Parts of the step graph that cannot be one Airflow task per step.

* cyclic regions: strongly connected components that loop (pagination, queues, retry arcs).
  A static DAG has no cycles, so each becomes one task that interprets the region;
* v1 loop bodies: a `loop` step without an action routes each item into body steps that an
  `end_loop` step closes; the body runs once per item (a mapped task) and the `end_loop` step
  is the loop's tail.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from ..ast import Playbook

__all__ = ["V1LoopBody", "cyclic_regions", "v1_loop_bodies"]


def cyclic_regions(graph: nx.DiGraph, order: dict[str, int]) -> list[list[str]]:
    """SCCs with more than one step or a self-loop, each sorted and listed in workflow order."""
    found = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1 or any(graph.has_edge(n, n) for n in component):
            found.append(sorted(component, key=order.__getitem__))
    return sorted(found, key=lambda members: order[members[0]])


@dataclass
class V1LoopBody:
    loop_step: str
    body: list[str]  # steps run once per item, workflow order
    end_step: str | None  # the `end_loop` step, or None when the playbook has none


def v1_loop_bodies(
    playbook: Playbook, graph: nx.DiGraph, taken: set[str], order: dict[str, int]
) -> list[V1LoopBody]:
    """v1 loops that route into body steps (``Loop.body_via_next`` and no action of their own)."""
    bodies = []
    for step in playbook.steps:
        loop = step.loop
        if (
            loop is None
            or not loop.body_via_next
            or step.tool is not None
            or step.pipeline is not None
            or step.name not in graph
            or step.name in taken
        ):
            continue
        ends = [s.name for s in playbook.steps if s.end_loop == step.name and s.name in graph]
        end = ends[0] if ends else None
        stop = {step.name} | ({end} if end else set())
        body: set[str] = set()
        frontier = [t for t in graph.successors(step.name) if t not in stop]
        while frontier:
            node = frontier.pop()
            if node in body or node in stop:
                continue
            body.add(node)
            if end is None:
                continue  # without `end_loop` only the direct targets are the body
            frontier.extend(graph.successors(node))
        members = body | stop
        if members & taken or not body:
            continue
        # Every way into the body must come from the loop step itself.
        if any(p not in members for b in body for p in graph.predecessors(b)):
            continue
        taken |= members
        bodies.append(V1LoopBody(step.name, sorted(body, key=order.__getitem__), end))
    return bodies
