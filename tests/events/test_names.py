"""One catalogue of event names (airflow_plugin/events/names.py): docs/events.md describes
exactly its names, and no module of the plugin spells an event name as a string of its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from airflow_plugin.events import names

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_events_are_the_catalogue() -> None:
    # The first column of the table: a name, names joined by " / ", maybe a "(note)".
    table = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    cells = re.findall(
        r"^\| ([A-Z][A-Za-z]+(?: / [A-Z][A-Za-z]+)*)(?: \([^)|]*\))? \|", table, re.MULTILINE
    )
    assert {name for cell in cells for name in cell.split(" / ")} == names.ALL


def _spelled_names(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names.ALL and id(node) not in docstrings
    ]


def test_no_module_spells_an_event_name_of_its_own() -> None:
    catalogue = ROOT / "airflow_plugin" / "events" / "names.py"
    spelled = {
        f"{path.relative_to(ROOT)}:{line}: {value}"
        for path in (ROOT / "airflow_plugin").rglob("*.py")
        if path != catalogue
        for line, value in _spelled_names(path)
    }
    assert spelled == set()


def test_a_spelled_name_would_be_found(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text('"""StepStarted in a docstring is prose."""\nX = "StepStarted"\n')
    assert _spelled_names(planted) == [(2, "StepStarted")]
