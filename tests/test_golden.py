"""Golden tests: ``golden/<case>/playbook.yaml`` -> ``golden/<case>/expected.py``, and every
example ``playbooks/<name>.yaml`` -> ``dags/<name>.py`` (the committed DAGs are the examples'
goldens: one copy of each file, no ``golden/examples_*``).

Every case is compiled and compared byte for byte with its expected DAG file; a diff is
reviewed like code. Regenerate after an intended change with

    NOETLC_REGEN_GOLDEN=1 python -m pytest tests/test_golden.py

(for the examples that rewrites ``dags/``, as ``noetlc compile playbooks/ -o dags/`` does).

The cases cover every lowering row of the design brief's table, all three dialects, our own
example playbooks and every file of the shared corpus' ``seeds`` folder (checked below).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from noetl_compile.check import check_results, read_file
from noetl_compile.compile import compile_result
from noetl_compile.diagnostics import Severity
from tests.corpus import CORPUS

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "golden"
SEEDS = CORPUS / "seeds"
REGENERATE = os.environ.get("NOETLC_REGEN_GOLDEN") == "1"
PLAYBOOKS = ROOT / "playbooks"
DAGS = ROOT / "dags"
EXAMPLE = "examples/"  # a case named examples/<name>: playbooks/<name>.yaml -> dags/<name>.py
CASES = sorted(p.name for p in GOLDEN.iterdir() if (p / "playbook.yaml").is_file()) + sorted(
    f"{EXAMPLE}{p.stem}" for p in PLAYBOOKS.glob("*.yaml")
)


def _paths(case: str) -> tuple[Path, Path]:
    """(playbook, expected DAG file) of a case."""
    if case.startswith(EXAMPLE):
        name = case.removeprefix(EXAMPLE)
        return PLAYBOOKS / f"{name}.yaml", DAGS / f"{name}.py"
    return GOLDEN / case / "playbook.yaml", GOLDEN / case / "expected.py"


def _compile(case: str):
    path, _ = _paths(case)
    result = read_file(str(path))
    check_results([result])
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert not errors, f"golden case {case} does not pass check: {errors}"
    return compile_result(result, path.relative_to(ROOT).as_posix())


@pytest.mark.parametrize("case", CASES)
def test_golden_case(case: str) -> None:
    text, _ = _compile(case)
    _, expected = _paths(case)
    if REGENERATE or not expected.exists():
        expected.write_text(text, encoding="utf-8")
        if not REGENERATE:
            pytest.fail(f"{expected} did not exist; it was written, review it and commit it")
    assert text == expected.read_text(encoding="utf-8"), (
        f"generated DAG for {case} differs from {expected.relative_to(ROOT)}; if the change is "
        "intended, "
        "regenerate with NOETLC_REGEN_GOLDEN=1"
    )
    ast.parse(text)


def test_enough_cases() -> None:
    assert len(CASES) >= 40, CASES


@pytest.mark.corpus
def test_every_seed_has_an_identical_golden_case() -> None:
    for seed in sorted(SEEDS.glob("*.yaml")):
        case = GOLDEN / f"seeds_{seed.stem}" / "playbook.yaml"
        assert case.is_file(), f"no golden case for {seed}"
        assert case.read_bytes() == seed.read_bytes(), f"{case} is not a copy of {seed}"


def test_every_example_playbook_is_a_case_with_no_copy_in_golden() -> None:
    # The examples' goldens are dags/: a copy under golden/ could drift from either side.
    examples = sorted(PLAYBOOKS.glob("*.yaml"))
    assert examples and all(_paths(f"{EXAMPLE}{e.stem}")[1].is_file() for e in examples)
    assert not [p.name for p in GOLDEN.iterdir() if p.name.startswith("examples_")]


def test_cases_cover_every_lowering_and_dialect() -> None:
    kinds: set[str] = set()
    dialects: set[str] = set()
    features: set[str] = set()
    for case in CASES:
        _, ir = _compile(case)
        dialects.add(ir.dialect)
        for unit in ir.units:
            kinds.add(unit.kind)
            if unit.trigger_rule:
                features.add("join")
            if unit.kind == "loop" and len(unit.steps) > 1:
                features.add("v1 loop body")
            if any(t.kwargs.get("max_active_tis_per_dagrun") for t in unit.tasks):
                features.add("max_in_flight")
        for _, _, data in ir.graph.edges(data=True):
            for arc in data["arcs"]:
                features.add(f"mode:{arc['mode']}")
                if arc["event"] == "loop.done":
                    features.add("loop.done")
        if ir.excluded:
            features.add("unreachable steps")
    assert dialects == {"v1", "case-v2", "canonical"}
    assert kinds == {"step", "loop", "loop_seq", "cursor", "region", "nested", "gate"}
    assert {
        "join",
        "v1 loop body",
        "max_in_flight",
        "mode:exclusive",
        "mode:inclusive",
        "loop.done",
        "unreachable steps",
    } <= features
