"""The check's own graph algorithms (kept networkx-free for start-up time) agree with networkx
on every playbook we have: reachability, immediate dominators (and dominance), cycles and ancestors."""

from __future__ import annotations

import random
import re

import networkx as nx
import pytest

from noetl_compile.analyze.flowgraph import StepGraph
from noetl_compile.check import check_paths
from tests.corpus import CORPUS, ROOT


@pytest.mark.corpus
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


def _random_playbook(rng: random.Random) -> str:
    """Steps with random routes (some inclusive forks, some joins, some cycles) and random
    writes of ctx.x / ctx.y."""
    size = rng.randint(2, 24)
    names = ["start"] + [f"s{i}" for i in range(1, size)]
    lines = ["apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: r, path: r}\nworkflow:\n"]
    for index, name in enumerate(names):
        lines.append(f"  - step: {name}\n    tool: {{kind: noop}}\n")
        written = [v for v in "xy" if rng.random() < 0.35]
        if written:
            lines.append("    set: {" + ", ".join(f"ctx.{v}: 1" for v in written) + "}\n")
        later = names[index + 1 :] if rng.random() < 0.9 else names
        targets = sorted(set(rng.sample(later, min(len(later), rng.randint(0, 3)))))
        if not targets:
            continue
        mode = "inclusive" if len(targets) > 1 and rng.random() < 0.7 else "exclusive"
        lines.append(f"    next:\n      spec: {{mode: {mode}}}\n      arcs:\n")
        lines += [f"        - step: {t}\n" for t in targets]
    return "".join(lines)


def _races_by_definition(graph: StepGraph, writers: list[str]) -> dict[str, str]:
    """Each writer with the first writer before it in name order that may run in parallel."""
    found = {}
    for i, second in enumerate(writers):
        for first in writers[:i]:
            if graph.may_run_in_parallel(first, second):
                found[second] = first
                break
    return found


@pytest.mark.parametrize("seed", range(6))
def test_parallel_writes_are_the_pairs_the_definition_finds(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    pattern = re.compile(r"`ctx\.(\w)` is written by steps '(\w+)' and '(\w+)'")
    races = 0
    for round_ in range(60):
        path = tmp_path / f"p{round_}.yaml"
        path.write_text(_random_playbook(rng), encoding="utf-8")
        results, _ = check_paths([str(path)])
        (result,) = results
        graph = StepGraph.of(result.playbook)
        expected = {}
        for var in "xy":
            writers = sorted(
                s.name
                for s in result.playbook.steps
                if isinstance(s.raw.get("set"), dict) and f"ctx.{var}" in s.raw["set"]
            )
            for second, first in _races_by_definition(graph, writers).items():
                expected[(var, second)] = first
        reported = {
            (m.group(1), m.group(3)): m.group(2)
            for d in result.diagnostics
            if d.code == "F404" and (m := pattern.search(d.message))
        }
        assert reported == expected, path.read_text()
        races += len(reported)
    assert races >= 20, races  # the random playbooks race often enough to test something
