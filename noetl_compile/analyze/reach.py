"""Is there a path from one step to another? Answered without an ancestor set per step.

Ancestor sets per step are quadratic in time and memory on long chains (a 100k-step chain holds
five billion pairs). A reader usually reads a step a few hops up, so a short backward search
answers almost every question; a step asked about from far away gets its descendants computed
once and kept. Total cost: linear for the usual shapes, and one graph walk per distant producer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

Edges = Callable[[str], Iterable[str]]


class Reachability:
    SHORT = 256  # nodes a backward search may visit before it falls back to the source's closure

    def __init__(self, nodes: Iterable[str], predecessors: Edges, successors: Edges) -> None:
        self._nodes = set(nodes)
        self._predecessors = predecessors
        self._successors = successors
        self._descendants: dict[str, set[str]] = {}

    def reaches(self, source: str, target: str) -> bool:
        """A path of at least one edge leads from ``source`` to ``target``."""
        if source not in self._nodes or target not in self._nodes:
            return False
        if source in self._descendants:
            return target in self._descendants[source]
        seen, frontier = {target}, [target]
        while frontier and len(seen) <= self.SHORT:
            for pred in self._predecessors(frontier.pop()):
                if pred == source:
                    return True
                if pred not in seen:
                    seen.add(pred)
                    frontier.append(pred)
        if not frontier:
            return False  # every ancestor of target was visited
        return target in self.descendants(source)

    def descendants(self, source: str) -> set[str]:
        if source not in self._descendants:
            seen: set[str] = set()
            stack = [source]
            while stack:
                for nxt in self._successors(stack.pop()):
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            self._descendants[source] = seen
        return self._descendants[source]
