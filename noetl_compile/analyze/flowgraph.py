"""The step graph of a playbook: which step can route to which, and what that implies.

Shared by the flow and template checks (reachability, dominators, cycles, parallel branches).
Edges come from router arcs (v1 `next` groups, v2 case/next, canonical arcs).

This module deliberately does not import networkx: `noetlc check` must start fast, and
importing networkx alone costs ~135 ms of the 1 s budget for checking the whole corpus. The
graphs here have tens of nodes, so the textbook algorithms below are small and exact; the IR
in ``lower/`` (which runs only for `compile`) is a networkx graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from ..ast import Playbook
from .reach import Reachability


@dataclass
class StepGraph:
    playbook: Playbook

    @staticmethod
    def of(playbook: Playbook) -> StepGraph:
        """The playbook's one StepGraph: its cached properties are then computed once for
        check and compile together."""
        return playbook.analysis("step_graph", StepGraph)

    @cached_property
    def successors(self) -> dict[str, list[str]]:
        names = self.playbook.step_names
        known = set(names)
        edges: dict[str, list[str]] = {name: [] for name in names}
        for step in self.playbook.steps:
            targets = dict.fromkeys(a.target for a in step.router.arcs if a.target in known)
            edges[step.name] += [t for t in targets if t not in edges[step.name]]
        return edges

    @cached_property
    def predecessors(self) -> dict[str, list[str]]:
        preds: dict[str, list[str]] = {name: [] for name in self.successors}
        for source, targets in self.successors.items():
            for target in targets:
                preds[target].append(source)
        return preds

    @staticmethod
    def _closure(start: Iterable[str], edges: dict[str, list[str]]) -> set[str]:
        seen: set[str] = set()
        stack = list(start)
        while stack:
            node = stack.pop()
            for nxt in edges.get(node, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    @cached_property
    def reachable(self) -> set[str]:
        entry = self.playbook.entry
        if entry is None or entry not in self.successors:
            return set(self.successors)  # no entry: do not cascade "unreachable" onto every step
        return {entry} | self._closure([entry], self.successors)

    @cached_property
    def dominators(self) -> dict[str, str]:
        """Immediate dominators from the entry (Cooper, Harvey & Kennedy's iterative algorithm)."""
        entry = self.playbook.entry
        if entry is None or entry not in self.successors:
            return {}
        order: list[str] = []  # reverse postorder
        seen = {entry}
        stack = [(entry, iter(self.successors[entry]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                order.append(node)
            elif child not in seen:
                seen.add(child)
                stack.append((child, iter(self.successors[child])))
        order.reverse()
        index = {node: i for i, node in enumerate(order)}
        idom: dict[str, str] = {entry: entry}

        def intersect(a: str, b: str) -> str:
            while a != b:
                while index[a] > index[b]:
                    a = idom[a]
                while index[b] > index[a]:
                    b = idom[b]
            return a

        changed = True
        while changed:
            changed = False
            for node in order[1:]:
                preds = [p for p in self.predecessors[node] if p in idom]
                new = preds[0]
                for pred in preds[1:]:
                    new = intersect(pred, new)
                if idom.get(node) != new:
                    idom[node] = new
                    changed = True
        return idom

    @cached_property
    def _dominator_intervals(self) -> dict[str, tuple[int, int]]:
        """Pre- and post-order numbers in the dominator tree: a dominates b exactly when a's
        interval holds b's, so each question is O(1) instead of a walk up the tree."""
        children: dict[str, list[str]] = {}
        root = None
        for node, parent in self.dominators.items():
            if node == parent:
                root = node
            else:
                children.setdefault(parent, []).append(node)
        intervals: dict[str, tuple[int, int]] = {}
        if root is None:
            return intervals
        clock, enter = 0, {}
        stack = [(root, iter(children.get(root, ())))]
        enter[root] = clock
        while stack:
            node, rest = stack[-1]
            child = next(rest, None)
            if child is None:
                stack.pop()
                clock += 1
                intervals[node] = (enter[node], clock)
            else:
                clock += 1
                enter[child] = clock
                stack.append((child, iter(children.get(child, ()))))
        return intervals

    def dominates(self, upstream: str, step: str) -> bool:
        """True when every path from the entry to ``step`` passes through ``upstream``."""
        intervals = self._dominator_intervals
        if upstream == step or upstream not in intervals or step not in intervals:
            return False
        (up_in, up_out), (in_, out) = intervals[upstream], intervals[step]
        return up_in < in_ and out <= up_out

    @cached_property
    def _reach(self) -> Reachability:
        return Reachability(
            self.successors, self.predecessors.__getitem__, self.successors.__getitem__
        )

    def is_ancestor(self, upstream: str, step: str) -> bool:
        """A path leads from ``upstream`` to ``step`` (``step`` itself only on a cycle)."""
        return self._reach.reaches(upstream, step)

    @cached_property
    def cycles(self) -> list[list[str]]:
        """Strongly connected components that loop (size > 1 or a self-loop), in workflow order."""
        order = {name: i for i, name in enumerate(self.playbook.step_names)}
        found = [
            sorted(c, key=order.__getitem__)
            for c in self._components()
            if len(c) > 1 or c[0] in self.successors[c[0]]
        ]
        return sorted(found, key=lambda c: order[c[0]])

    def _components(self) -> list[list[str]]:
        """Tarjan's strongly connected components, iteratively (deep chains exist in the wild)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        on_stack: set[str] = set()
        stack: list[str] = []
        components: list[list[str]] = []
        for root in self.successors:
            if root in index:
                continue
            work = [(root, iter(self.successors[root]))]
            index[root] = low[root] = len(index)
            stack.append(root)
            on_stack.add(root)
            while work:
                node, children = work[-1]
                child = next(children, None)
                if child is not None:
                    if child not in index:
                        index[child] = low[child] = len(index)
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(self.successors[child])))
                    elif child in on_stack:
                        low[node] = min(low[node], index[child])
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
        return components

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

    @cached_property
    def _branches(self) -> dict[str, dict[int, set[str]]]:
        """step -> fork index -> the fork's targets whose branch holds the step (the target
        itself or a step after it). One walk per fork target, not one per pair of steps."""
        found: dict[str, dict[int, set[str]]] = {}
        for index, (_, targets) in enumerate(self.inclusive_forks):
            for target in targets:
                if target not in self.successors:
                    continue
                for step in self._reach.descendants(target) | {target}:
                    found.setdefault(step, {}).setdefault(index, set()).add(target)
        return found

    def fork_branches(self, step: str) -> dict[int, set[str]]:
        """fork index -> the targets of that fork whose branch holds ``step`` (empty: the step is
        in no branch of an inclusive fork, so it runs in parallel with nothing)."""
        return self._branches.get(step, {})

    def may_run_in_parallel(self, a: str, b: str) -> bool:
        """Both steps can be active in one run without one following the other: some fork
        starts a branch holding one and another branch holding the other."""
        if a == b:
            return False
        mine, theirs = self._branches.get(a, {}), self._branches.get(b, {})
        forked = any(  # two different targets of one fork, one leading to each step
            len(mine[fork] | theirs[fork]) > 1 for fork in mine.keys() & theirs.keys()
        )
        return forked and not self.is_ancestor(a, b) and not self.is_ancestor(b, a)
