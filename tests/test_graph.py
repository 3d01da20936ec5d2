"""`noetlc graph`: Mermaid and DOT drawings of the IR; SVG/PNG through graphviz when present."""

from __future__ import annotations

import shutil
from pathlib import Path

from noetl_compile.cli import main

ROOT = Path(__file__).resolve().parents[1]
PLAYBOOKS = ROOT / "playbooks"


def test_mermaid_shows_steps_guards_modes_and_joins(capsys) -> None:
    assert main(["graph", str(PLAYBOOKS / "branching.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flowchart TD\n")
    assert 'n6["summary<br>python<br>join"]' in out
    assert 'n0 -->|"start.large"| n2' in out  # exclusive arc with its guard
    assert 'n0 -->|"else"| n1' in out
    assert 'n2 ==>|"amount #gt; 200"| n3' in out  # inclusive arcs are thick


def test_regions_and_loops_are_drawn(capsys) -> None:
    assert main(["graph", str(PLAYBOOKS / "pagination_region.yaml")]) == 0
    out = capsys.readouterr().out
    assert 'subgraph c0["cyclic region: one task"]' in out
    assert main(["graph", str(PLAYBOOKS / "loop_parallel.yaml"), "--format", "dot"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('digraph "examples.loop_parallel" {')
    assert "loop over city (parallel, max 2)" in out
    assert 'label="loop.done"' in out


def test_fused_units_are_named_for_what_they_are(capsys, tmp_path) -> None:
    # large_loop opts in to fusion: its loop's head and tail run `start` and `total`.
    assert main(["graph", str(PLAYBOOKS / "large_loop.yaml")]) == 0
    out = capsys.readouterr().out
    assert 'subgraph c0["fused loop: head and tail run the steps around it"]' in out
    assert "v1 loop" not in out
    fused = tmp_path / "hello_world.yaml"
    text = (PLAYBOOKS / "hello_world.yaml").read_text()
    fused.write_text(text.replace("\nmetadata:\n", "\nmetadata:\n  noetlc:\n    fuse: true\n", 1))
    assert main(["graph", str(fused)]) == 0
    out = capsys.readouterr().out
    assert 'subgraph c0["fused chain: one task"]' in out and "cyclic region" not in out


def test_gates_and_nested_playbooks_have_their_own_shapes(capsys) -> None:
    assert main(["graph", str(PLAYBOOKS / "gates.yaml")]) == 0
    assert '{{"approve<br>gate: approve"}}' in capsys.readouterr().out
    assert main(["graph", str(PLAYBOOKS / "nested_parent.yaml")]) == 0
    assert '[["call_child<br>playbook examples/nested_child"]]' in capsys.readouterr().out


def test_output_file(tmp_path: Path) -> None:
    target = tmp_path / "g.mmd"
    assert main(["graph", str(PLAYBOOKS / "hello_world.yaml"), "-o", str(target)]) == 0
    assert target.read_text().startswith("flowchart TD")


def test_svg_without_graphviz_is_a_clear_usage_error(monkeypatch, capsys) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["graph", str(PLAYBOOKS / "hello_world.yaml"), "--format", "svg"]) == 2
    assert "graphviz is not installed" in capsys.readouterr().err


def test_svg_and_png_with_graphviz(tmp_path: Path) -> None:
    # scripts/test.sh installs graphviz; without it this feature is untested, so fail loudly.
    assert shutil.which("dot"), "graphviz (`dot`) is required for this test: run scripts/test.sh"
    png = tmp_path / "g.png"
    assert (
        main(["graph", str(PLAYBOOKS / "branching.yaml"), "--format", "png", "-o", str(png)]) == 0
    )
    assert png.read_bytes().startswith(b"\x89PNG")
    target = tmp_path / "g.svg"
    assert (
        main(["graph", str(PLAYBOOKS / "branching.yaml"), "--format", "svg", "-o", str(target)])
        == 0
    )
    assert "<svg" in target.read_text()


def test_a_playbook_with_errors_is_not_drawn(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: b}\nworkflow:\n"
        "  - step: start\n    tool: {kind: noop}\n    next: strat\n"
    )
    assert main(["graph", str(bad)]) == 1
    assert "R201" in capsys.readouterr().err
    assert main(["graph", str(tmp_path / "missing.yaml")]) == 2
