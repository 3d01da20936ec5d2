"""Data dependencies of the lowering: reaching definitions and the analyses check shares with it."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from noetl_compile.analyze.flowgraph import StepGraph
from noetl_compile.check import check_results, read_file
from noetl_compile.compile import compile_result
from noetl_compile.lower.dataflow import reaching_definitions


def _by_search(graph: nx.DiGraph, writes: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """The definition, one writer at a time: a write of x at W reaches S when a route of at least
    one edge leads from W to S through no other writer of x."""
    found: dict[str, dict[str, set[str]]] = {}
    for writer, names in writes.items():
        for var in names:
            seen: set[str] = set()
            frontier = list(graph.successors(writer))
            while frontier:
                node = frontier.pop()
                if node in seen:
                    continue
                seen.add(node)
                found.setdefault(node, {}).setdefault(var, set()).add(writer)
                if var not in writes.get(node, ()):
                    frontier.extend(graph.successors(node))
    return found


@pytest.mark.parametrize("seed", range(8))
def test_reaching_definitions_match_the_definition_on_random_graphs(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        size = rng.randint(1, 30)
        graph = nx.gnp_random_graph(
            size, rng.random() * 0.25, directed=True, seed=rng.randrange(2**32)
        )
        graph = nx.relabel_nodes(graph, {i: f"s{i}" for i in graph})
        for i in range(size):
            if rng.random() < 0.1:
                graph.add_edge(f"s{i}", f"s{i}")  # a step that routes to itself
        writes = {
            f"s{i}": {rng.choice("xyz") for _ in range(rng.randint(1, 2))}
            for i in range(size)
            if rng.random() < 0.3
        }
        everything = {node: "xyz" for node in graph}
        assert reaching_definitions(graph, writes, everything) == _by_search(graph, writes)
        # asked about some steps and variables only: the same answers for those, no others
        wanted = {
            node: rng.sample("xyz", rng.randint(0, 3)) for node in graph if rng.random() < 0.4
        }
        expected = {
            node: {
                var: found
                for var, found in _by_search(graph, writes).get(node, {}).items()
                if var in names
            }
            for node, names in wanted.items()
        }
        expected = {node: table for node, table in expected.items() if table}
        assert reaching_definitions(graph, writes, wanted) == expected


def test_a_loop_back_carries_a_write_around_and_a_rewrite_stops_it() -> None:
    graph = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "b"), ("c", "d"), ("d", "e")])
    got = reaching_definitions(
        graph, {"a": {"x"}, "c": {"x"}, "d": {"y"}}, {node: "xy" for node in graph}
    )
    assert got["b"] == {"x": {"a", "c"}}  # first pass from a, later ones from c
    assert got["c"] == {"x": {"a", "c"}}
    assert got["d"] == {"x": {"c"}}  # c rewrote x on every route to d
    assert got["e"] == {"x": {"c"}, "y": {"d"}}
    assert "a" not in got  # nothing reaches the entry


def test_no_writes_reach_nothing() -> None:
    graph = nx.DiGraph([(f"s{i}", f"s{i + 1}") for i in range(1000)])
    assert reaching_definitions(graph, {}, {node: "x" for node in graph}) == {}


def test_a_long_chain_of_writes_each_read_by_the_next_step() -> None:
    # The dense analysis carried every variable to every later step: quadratic in the chain.
    size = 20_000
    graph = nx.DiGraph([(f"s{i}", f"s{i + 1}") for i in range(size)])
    writes = {f"s{i}": {f"v{i}"} for i in range(size)}
    wanted = {f"s{i + 1}": [f"v{i}"] for i in range(size)}
    got = reaching_definitions(graph, writes, wanted)
    assert got == {f"s{i + 1}": {f"v{i}": {f"s{i}"}} for i in range(size)}


PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: shared, path: tests/shared}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    next:
      - step: page
  - step: page
    tool: {kind: python, args: {n: "{{ start }}"}, code: "result = n"}
    next:
      - step: page
        when: "{{ page.result < 3 }}"
      - step: end
  - step: end
    tool: {kind: noop}
"""


def test_check_and_compile_share_one_step_graph_and_replacing_the_steps_renews_it(
    tmp_path,
) -> None:
    path = tmp_path / "shared.yaml"
    path.write_text(PLAYBOOK, encoding="utf-8")
    result = read_file(str(path))
    check_results([result])
    playbook = result.playbook
    assert playbook is not None
    graph = StepGraph.of(playbook)
    assert graph.cycles == [["page"]]  # found by check (F402)
    text, ir = compile_result(result, "shared.yaml")
    assert StepGraph.of(playbook) is graph  # compile reused it
    assert [unit.kind for unit in ir.units] == ["step", "region", "step"]
    assert "NoetlRegionOperator" in text
    playbook.steps = playbook.steps[:1]
    assert StepGraph.of(playbook) is not graph
    assert playbook.step_names == ["start"]


CTX_READS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: ctxreads, path: tests/ctxreads}
workload: {items: [1, 2]}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'r': 1}"}
    next: [{step: each}]
  - step: each
    loop: {in: "{{ workload.items }}", iterator: it}
    tool: {kind: python, input: {i: "{{ it }}"}, code: "result = i"}
    next: [{step: field}]
  - step: field
    tool: {kind: python, input: {r: "{{ ctx.start.r }}"}, code: "result = r"}
    next: [{step: whole}]
  - step: whole
    tool: {kind: python, input: {c: "{{ ctx }}"}, code: "result = sorted(c)"}
"""


def test_canonical_ctx_reads_pull_step_results_and_loop_variables(tmp_path) -> None:
    """NoETL's canonical variables hold each finished step's result and a loop's iterator and
    loop_index (138c10ed): `ctx.<step>` pulls that step's result, `{{ ctx }}` whole every
    earlier one and the loop's last item; a loop's own iterator is never pulled."""
    path = tmp_path / "ctxreads.yaml"
    path.write_text(CTX_READS, encoding="utf-8")
    result = read_file(str(path))
    check_results([result])
    _, ir = compile_result(result, "ctxreads.yaml")
    reads = {unit.steps[0]: unit.reads for unit in ir.units}
    assert reads["field"] == {"results": {"start": "start"}}
    assert set(reads["whole"]["results"]) == {"start", "each", "field"}
    assert set(reads["whole"]["ctx"]) == {"it", "loop_index"}
    assert "ctx" not in reads["each"]
