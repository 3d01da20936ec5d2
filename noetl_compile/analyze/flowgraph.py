"""The step graph of a playbook: which step can route to which, and what that implies.

Shared by the flow and template checks (reachability, dominators, cycles, parallel branches)
and by lowering. Edges come from router arcs (v1 `next` groups, v2 case/next, canonical arcs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import networkx as nx

from ..ast import Playbook


@dataclass
class StepGraph:
    playbook: Playbook
    _ancestor_cache: dict[str, set[str]] = field(default_factory=dict, repr=False)

    @cached_property
    def graph(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        names = set(self.playbook.step_names)
        graph.add_nodes_from(self.playbook.step_names)
        for step in self.playbook.steps:
            for arc in step.router.arcs:
                if arc.target in names:
                    graph.add_edge(step.name, arc.target)
        return graph

    @cached_property
    def reachable(self) -> set[str]:
        entry = self.playbook.entry
        if entry is None or entry not in self.graph:
            return set(self.graph)  # no entry: do not cascade "unreachable" onto every step
        return {entry} | nx.descendants(self.graph, entry)

    @cached_property
    def dominators(self) -> dict[str, str]:
        entry = self.playbook.entry
        if entry is None or entry not in self.graph:
            return {}
        return nx.immediate_dominators(self.graph, entry)

    def dominates(self, upstream: str, step: str) -> bool:
        """True when every path from the entry to ``step`` passes through ``upstream``."""
        node = step
        seen = set()
        while node in self.dominators and node not in seen:
            seen.add(node)
            parent = self.dominators[node]
            if parent == upstream:
                return True
            if parent == node:
                return False
            node = parent
        return False

    def is_ancestor(self, upstream: str, step: str) -> bool:
        return upstream in self.ancestors(step)

    def ancestors(self, step: str) -> set[str]:
        if step not in self._ancestor_cache:
            self._ancestor_cache[step] = nx.ancestors(self.graph, step) if step in self.graph else set()
        return self._ancestor_cache[step]

    @cached_property
    def cycles(self) -> list[list[str]]:
        """Strongly connected components that loop (size > 1 or a self-loop), in workflow order."""
        order = {name: i for i, name in enumerate(self.playbook.step_names)}
        found = []
        for component in nx.strongly_connected_components(self.graph):
            if len(component) > 1 or any(self.graph.has_edge(n, n) for n in component):
                found.append(sorted(component, key=order.__getitem__))
        return sorted(found, key=lambda c: order[c[0]])

    @cached_property
    def inclusive_forks(self) -> list[tuple[str, list[str]]]:
        """Steps that can start several successors at once, with those successors."""
        forks = []
        for step in self.playbook.steps:
            arcs = step.router.arcs
            if step.router.mode == "inclusive":
                targets = sorted({a.target for a in arcs})
            else:  # exclusive: one group fires; a group with several targets is a fan-out
                groups: dict[int, set[str]] = {}
                for arc in arcs:
                    groups.setdefault(arc.group, set()).add(arc.target)
                targets = sorted(max(groups.values(), key=len)) if groups else []
            if len(targets) > 1:
                forks.append((step.name, targets))
        return forks

    def may_run_in_parallel(self, a: str, b: str) -> bool:
        """Both steps can be active in one run without one following the other."""
        if a == b or self.is_ancestor(a, b) or self.is_ancestor(b, a):
            return False
        for _, targets in self.inclusive_forks:
            for i, first in enumerate(targets):
                for second in targets[i + 1:]:
                    if (self._on_branch(first, a) and self._on_branch(second, b)) or (
                            self._on_branch(first, b) and self._on_branch(second, a)):
                        return True
        return False

    def _on_branch(self, branch_head: str, step: str) -> bool:
        return step == branch_head or self.is_ancestor(branch_head, step)
