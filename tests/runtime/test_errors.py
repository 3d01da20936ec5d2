"""One root for the runtime's errors: every exception class of the runtime floors derives from
NoetlRuntimeError through a family that keeps the builtin base it always had."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from airflow_plugin.errors import (
    NoetlConfigError,
    NoetlFailure,
    NoetlNotFound,
    NoetlRuntimeError,
    NoetlUnavailable,
    error_family,
)
from airflow_plugin.hooks.connections import ConnectionNotFound
from airflow_plugin.hooks.sqltext import SqlConfigError
from airflow_plugin.runtime.step_outcome import StepFailed
from airflow_plugin.tools.registry import ToolNotAvailable

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_FLOORS = ("hooks", "templating", "tools", "events", "drivers", "runtime")
BUILTIN = {"Exception", "ValueError", "LookupError", "RuntimeError", "KeyError", "TypeError"}


def _builtin_rooted(path: Path) -> list[str]:
    """Exception classes of ``path`` whose only bases are builtin exceptions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and node.bases
        and all(isinstance(b, ast.Name) and b.id in BUILTIN for b in node.bases)
    ]


def test_every_runtime_exception_has_the_root() -> None:
    found = {
        f"{path.relative_to(ROOT)}: {name}"
        for floor in RUNTIME_FLOORS
        for path in (ROOT / "airflow_plugin" / floor).rglob("*.py")
        for name in _builtin_rooted(path)
    }
    assert found == set()


def test_a_class_rooted_in_a_builtin_would_be_found(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text(
        "class Oops(ValueError):\n    pass\n\nclass Fine(SqlConfigError):\n    pass\n"
    )
    assert _builtin_rooted(planted) == ["Oops"]


@pytest.mark.parametrize(
    ("exc", "family", "builtin"),
    [
        (SqlConfigError("bad"), "config", ValueError),
        (ConnectionNotFound("pg_x", LookupError("missing")), "not_found", LookupError),
        (ToolNotAvailable("teleport"), "unavailable", RuntimeError),
        (StepFailed("s", {"type": "Boom", "message": "no"}), "failed", Exception),
    ],
)
def test_families_keep_their_builtin_base(exc, family, builtin) -> None:
    assert isinstance(exc, NoetlRuntimeError) and isinstance(exc, builtin)
    assert error_family(exc) == family
    assert error_family(ValueError("not ours")) is None
    assert {NoetlConfigError, NoetlNotFound, NoetlUnavailable, NoetlFailure} == set(
        NoetlRuntimeError.__subclasses__()
    )
