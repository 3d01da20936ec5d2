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

from ..analyze.flowgraph import StepGraph
from ..ast import Playbook

__all__ = ["V1LoopBody", "cyclic_regions", "v1_loop_bodies"]


def cyclic_regions(playbook: Playbook, graph: nx.DiGraph) -> list[list[str]]:
    """SCCs with more than one step or a self-loop, each sorted and listed in workflow order.

    The step graph's cycles (which check has already found) restricted to ``graph``: it holds the
    steps reachable from the entry, and a cycle through one of them lies wholly among them.
    """
    return [members for members in StepGraph.of(playbook).cycles if members[0] in graph]


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
    ends_of: dict[str, list[str]] = {}  # loop step -> its `end_loop` steps, in workflow order
    for step in playbook.steps:
        if isinstance(step.end_loop, str) and step.name in graph:
            ends_of.setdefault(step.end_loop, []).append(step.name)
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
        ends = ends_of.get(step.name, [])
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
