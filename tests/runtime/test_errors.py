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


# -- one classification: operators' fail-or-retry and the events' error family ------------------


def test_an_operator_fails_at_once_unless_a_runtime_error_says_a_retry_may_help():
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from airflow_plugin.drivers.base import CursorDriverError
    from airflow_plugin.errors import fails_task
    from airflow_plugin.operators.base import fail_task

    lost = CursorDriverError("postgres cursor: connection lost", retryable=True)
    for exc in (StepFailed("s", {"type": "E", "message": "m"}), ToolNotAvailable("nope"), lost):
        assert fails_task(exc) is (exc is not lost)
        failure = fail_task("s", exc)
        assert isinstance(failure, AirflowException)
        # AirflowFailException skips the task's Airflow retries; the retryable one keeps them.
        assert isinstance(failure, AirflowFailException) is (exc is not lost)
    assert str(fail_task("s", lost)) == "step 's': postgres cursor: connection lost"
    # Not a runtime error: no family, never "fails at once" by classification; an operator
    # that hands its own exception to fail_task still fails the task.
    assert not fails_task(KeyError("x"))
    assert isinstance(fail_task("s", ValueError("bad answer")), AirflowFailException)


def test_the_event_of_a_step_ended_by_a_runtime_error_names_its_family():
    from airflow_plugin.errors import error_record
    from airflow_plugin.events import MemoryRecorder, recording
    from airflow_plugin.runtime.step import execute_step

    recorder = MemoryRecorder()
    payload = {"step": "s", "tool": {"kind": "no_such_kind"}}
    inputs = {"workload": {}, "results": {}, "ctx": {}, "vars": {}, "execution_id": 7}
    with recording(recorder, task_id="s"), pytest.raises(ToolNotAvailable):
        execute_step(payload, inputs)
    finished = [e for e in recorder.events if e.name == "StepFinished"]
    assert len(finished) == 1 and finished[0].status == "error"
    error = finished[0].data["error"]
    assert error["type"] == "ToolNotAvailable" and error["family"] == "unavailable"
    assert "no_such_kind" in error["message"]
    # Anything not ours carries no family: a bug is not classified as a runtime failure.
    assert error_record(KeyError("k")) == {"type": "KeyError", "message": "'k'"}
