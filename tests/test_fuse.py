"""Step fusion's rule (lower/fuse.py), its task counts on the bundled examples, and fused DAG files
that the DAG processor imports. Fused and unfused runs agree: tests/corpus_run/test_fusion.py."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

from noetl_compile.check import check_paths
from noetl_compile.cli import main
from noetl_compile.compile import lower_result
from noetl_compile.lower.fuse import fused_runs, loop_folds
from noetl_compile.rules import Severity

ROOT = Path(__file__).resolve().parent.parent
PLAYBOOKS = ROOT / "playbooks"


def _runs(edges, *, nodes=(), fusable=lambda n: True, entry="a"):
    graph = nx.DiGraph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from(edges)
    order = sorted(graph)
    return fused_runs(graph, order, fusable=fusable, entry=entry)


def test_a_chain_fuses_whole():
    assert _runs([("a", "b"), ("b", "c"), ("c", "d")]) == [["a", "b", "c", "d"]]


def test_a_step_that_is_not_plain_splits_the_chain():
    runs = _runs([("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")], fusable=lambda n: n != "c")
    assert runs == [["a", "b"], ["d", "e"]]


def test_fan_out_and_join_bound_runs():
    # a -> (b | c) -> d -> e: a routes two ways, d is a join: only d's successor chain fuses,
    # and d itself stays a task of its own (entered by two routes, it runs once).
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e"), ("e", "f")]
    assert _runs(edges) == [["e", "f"]]


def test_a_join_head_is_left_out_but_the_rest_fuses():
    edges = [("a", "j"), ("x", "j"), ("j", "k"), ("k", "l")]
    assert _runs(edges, entry="a") == [["k", "l"]]


def test_the_entry_step_is_never_a_later_member():
    # Something routes back into the entry: it is a head, never a member.
    assert _runs([("z", "a"), ("a", "b")], entry="a") == [["a", "b"]]


def test_a_single_plain_step_is_not_a_run():
    assert _runs([], nodes=["a"]) == []


def _folds(edges, *, loops=("l",), fusable=lambda n: True, lead_ok=lambda n, loop: True,
           trail_ok=lambda n: True, entry="a"):  # fmt: skip
    graph = nx.DiGraph()
    graph.add_edges_from(edges)
    return loop_folds(
        graph,
        sorted(graph),
        loops=lambda n: n in loops,
        fusable=lambda n: n not in loops and fusable(n),
        lead_ok=lead_ok,
        trail_ok=trail_ok,
        entry=entry,
    )


def test_a_loop_folds_its_entry_and_the_chain_after_it():
    # a -> l -> t -> u: the head runs a, the tail runs t then u.
    assert _folds([("a", "l"), ("l", "t"), ("t", "u")]) == {"l": (["a"], ["t", "u"])}


def test_only_the_entry_step_leads_and_only_when_it_routes_to_the_loop_alone():
    # z -> a -> l: `a` is not the entry; a -> (l | x): a routes two ways.
    assert _folds([("z", "a"), ("a", "l")], entry="z") == {}
    assert _folds([("a", "l"), ("a", "x")]) == {}
    # The rule of the lowering (a bare noop whose arc hands the loop nothing) decides too.
    assert _folds([("a", "l"), ("l", "t")], lead_ok=lambda n, loop: False) == {"l": ([], ["t"])}


def test_the_trail_stops_at_a_join_a_fan_out_a_loop_and_a_step_routing_a_failure():
    assert _folds([("a", "l"), ("l", "t"), ("x", "t")], lead_ok=lambda n, loop: False) == {}
    # t routes two ways: it ends the trail, its targets stay tasks of their own.
    assert _folds([("a", "l"), ("l", "t"), ("t", "u"), ("t", "v")]) == {"l": (["a"], ["t"])}
    assert _folds([("a", "l"), ("l", "m")], loops=("l", "m")) == {"l": (["a"], [])}
    folds = _folds([("a", "l"), ("l", "t"), ("t", "u")], trail_ok=lambda n: n != "u")
    assert folds == {"l": (["a"], ["t"])}
    # A loop that routes two ways has no trail.
    assert _folds([("a", "l"), ("l", "t"), ("l", "u")]) == {"l": (["a"], [])}


def test_a_fused_loop_lowers_its_lead_and_trail_into_its_group(tmp_path):
    (result,), _ = check_paths([str(PLAYBOOKS / "large_loop.yaml")])
    ir = lower_result(result, "large_loop.yaml", fuse=True)
    (unit,) = ir.units
    assert unit.steps == ["start", "square", "total"]
    assert [t.operator for t in unit.tasks] == [
        "NoetlFusedLoopHeadOperator",
        "NoetlLoopBodyOperator",
        "NoetlFusedLoopTailOperator",
    ]
    assert [s["step"] for s in unit.payload["lead"]] == ["start"]
    assert list(unit.payload["trail"]["steps"]) == ["total"]
    assert unit.payload["trail"]["exits"] == []
    # Its `metadata.noetlc.fuse: false`: one unit per step, five levels, as before.
    path = tmp_path / "large_loop.yaml"
    path.write_text(
        (PLAYBOOKS / "large_loop.yaml").read_text().replace("fuse: true", "fuse: false")
    )
    (result,), _ = check_paths([str(path)])
    plain = lower_result(result, path.name, fuse=True)
    assert [u.steps for u in plain.units] == [["start"], ["square"], ["total"]]


def test_a_lead_that_does_work_or_sets_values_is_not_folded(tmp_path):
    text = (PLAYBOOKS / "large_loop.yaml").read_text()
    for old, new in [
        ("    tool: {kind: noop}\n", "    tool: {kind: python, code: 'result = 1'}\n"),
        ("        - step: square\n", "        - step: square\n          set: {k: 1}\n"),
    ]:
        assert old in text
        path = tmp_path / "large_loop.yaml"
        path.write_text(text.replace(old, new, 1))
        (result,), _ = check_paths([str(path)])
        units = lower_result(result, path.name, fuse=True).units
        assert [u.steps for u in units] == [["start"], ["square", "total"]], old


def _units(name: str, fuse: bool):
    (result,), _ = check_paths([str(PLAYBOOKS / f"{name}.yaml")])
    ir = lower_result(result, f"{name}.yaml", fuse=fuse)
    return [(u.kind, u.steps) for u in ir.units]


@pytest.mark.parametrize(
    ("name", "before", "after"),
    [
        ("hello_world", 3, 1),  # start -> greet -> end
        ("postgres_upsert", 4, 1),
        ("branching", 7, 7),  # every step routes two ways or is a join
        ("loop_parallel", 3, 1),  # its head runs the bare start, its tail the report
        ("pagination_region", 3, 3),  # a cycle is already one region; around it no chain
        ("gates", 6, 6),  # a gate is a boundary
    ],
)
def test_task_counts_of_examples(name, before, after):
    unfused, fused = _units(name, False), _units(name, True)
    assert len(unfused) == before and len(fused) == after, fused
    # Every reachable step is in exactly one unit either way.
    assert sorted(s for _, steps in unfused for s in steps) == sorted(
        s for _, steps in fused for s in steps
    )


def test_fusion_is_off_by_default(tmp_path):
    assert main(["compile", str(PLAYBOOKS), "-o", str(tmp_path / "plain")]) == 0
    for path in sorted((tmp_path / "plain").glob("*.py")):
        assert path.read_text() == (ROOT / "dags" / path.name).read_text(), path.name
        assert "fused_" not in path.read_text()


def _with_option(tmp_path: Path, name: str, value: str) -> Path:
    text = (PLAYBOOKS / f"{name}.yaml").read_text()
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        text.replace("\nmetadata:\n", f"\nmetadata:\n  noetlc:\n    fuse: {value}\n", 1)
    )
    return path


def _fused_units(path: Path, fuse: bool):
    (result,), _ = check_paths([str(path)])
    assert not [d for d in result.diagnostics if d.severity >= Severity.ERROR], result.diagnostics
    return [u.steps for u in lower_result(result, path.name, fuse=fuse).units]


def test_the_playbook_level_option_decides_over_the_flag(tmp_path):
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    on = _with_option(tmp_path / "on", "hello_world", "true")
    off = _with_option(tmp_path / "off", "hello_world", "false")
    assert _fused_units(on, fuse=False) == [["start", "greet", "end"]]  # on without --fuse
    assert len(_fused_units(off, fuse=True)) == 3  # off, even with --fuse
    # The option reaches `noetlc compile`: the DAG file has the one fused task.
    assert main(["compile", str(on), "-o", str(tmp_path / "out")]) == 0
    (dag,) = (tmp_path / "out").glob("*.py")
    assert 'task_id="fused_start"' in dag.read_text()


def test_the_documented_option_fuses_the_documented_chain(tmp_path):
    import re

    text = (ROOT / "docs" / "speed.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if "noetlc:" in b]
    path = tmp_path / "nightly_chain.yaml"
    path.write_text(block)
    (result,), _ = check_paths([str(path)])
    assert [d for d in result.diagnostics if d.severity >= Severity.WARNING] == []
    assert _fused_units(path, fuse=False) == [["start", "double"]]


def test_a_non_boolean_fuse_option_is_an_error_at_its_value(tmp_path):
    path = _with_option(tmp_path, "hello_world", '"yes"')
    (result,), _ = check_paths([str(path)])
    (found,) = [d for d in result.diagnostics if d.code == "S102"]
    assert "`metadata.noetlc.fuse` must be a boolean" in found.message
    line = path.read_text().splitlines()[found.position.line - 1]
    assert line.strip() == 'fuse: "yes"' and found.position.col == line.index('"yes"') + 1


def test_fused_dag_files_import(tmp_path):
    pytest.importorskip("airflow")
    from tests.test_compiles_imports import _dagbag

    out = tmp_path / "fused"
    assert main(["compile", str(PLAYBOOKS), "-o", str(out), "--fuse"]) == 0
    texts = [p.read_text() for p in out.glob("*.py")]
    assert sum('NoetlRegionOperator(\n        task_id="fused_' in t for t in texts) >= 8
    bag = _dagbag(out)
    assert not bag.import_errors, bag.import_errors
    assert len(bag.dags) == len(texts)
    hello = bag.dags["examples.hello_world"]
    # The chain is one task; the run's NoETL outcome is the other (operators/outcome.py).
    assert [t.task_id for t in hello.tasks] == ["fused_start", "noetl_outcome"]


def test_noetlc_run_fused_reports_steps_and_names_the_failing_member(tmp_path):
    """A fused chain start -> boom -> after under `noetlc run --fuse`: the report lists steps, not
    the one task; the member whose call fails is named, the run goes on along its unconditional
    arc (NoETL's canonical engine) and ends failed."""
    pytest.importorskip("airflow")
    from tests.harness.run_cli import noetlc_run, report_of, write_playbook
    from tests.noetlc_run.playbook_texts import DIVIDE

    playbook = write_playbook(tmp_path, "divide", DIVIDE)
    result = noetlc_run(tmp_path / "home", playbook, "--fuse", "--json")
    assert result.returncode == 1, result.stderr
    report = report_of(result)
    assert report["state"] == "failed"
    steps = report["steps"]
    assert steps["start"]["state"] == "success" and steps["start"]["result"] == {"ok": True}
    assert steps["boom"]["state"] == "failed"
    assert "division by zero" in json.dumps(steps["boom"])
    assert steps["after"]["state"] == "success" and steps["after"]["result"] == {"after": True}
    assert [e["task"] for e in report["errors"]] == ["noetl_outcome"]
    assert {t for s in steps.values() for t in s.get("tasks", {})} == {"fused_start"}
