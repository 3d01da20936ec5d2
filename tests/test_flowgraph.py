"""The check's own graph algorithms (kept networkx-free for start-up time) agree with networkx
on every playbook we have: reachability, immediate dominators (and dominance), cycles and ancestors."""

from __future__ import annotations

import networkx as nx

from noetl_compile.analyze.flowgraph import StepGraph
from noetl_compile.check import check_paths
from tests.corpus import CORPUS, ROOT


def test_step_graph_matches_networkx():
    results, _ = check_paths(
        [str(CORPUS), str(ROOT / "tests" / "invalid"), str(ROOT / "playbooks")]
    )
    compared = 0
    for result in results:
        playbook = result.playbook
        if playbook is None:
            continue
        ours = StepGraph(playbook)
        reference = nx.DiGraph()
        reference.add_nodes_from(playbook.step_names)
        reference.add_edges_from((s, t) for s, targets in ours.successors.items() for t in targets)
        if playbook.entry in reference:
            assert ours.reachable == {playbook.entry} | nx.descendants(reference, playbook.entry)
            expected = nx.immediate_dominators(reference, playbook.entry)
            expected.pop(playbook.entry, None)
            assert {k: v for k, v in ours.dominators.items() if k != playbook.entry} == expected
        loops = [
            sorted(c)
            for c in nx.strongly_connected_components(reference)
            if len(c) > 1 or any(reference.has_edge(n, n) for n in c)
        ]
        assert sorted(loops) == sorted(sorted(c) for c in ours.cycles), result.path
        names = list(dict.fromkeys(playbook.step_names))
        for name in names:
            ancestors = nx.ancestors(reference, name)
            for other in names:
                if other != name:
                    assert ours.is_ancestor(other, name) == (other in ancestors), (other, name)
        if playbook.entry in reference:
            idom = nx.immediate_dominators(reference, playbook.entry)
            idom[playbook.entry] = playbook.entry  # networkx 3.5 leaves the start out
            for name in idom:
                strict, node = set(), name
                while idom[node] != node:
                    node = idom[node]
                    strict.add(node)
                for other in idom:
                    assert ours.dominates(other, name) == (other in strict), (other, name)
        compared += 1
    assert compared > 300
