"""The outcome task (noetl_compile/lower/outcome.py, airflow_plugin/operators/outcome.py): which
DAGs get one, what it watches, where it sits, and how it decides. The runs themselves (the
recovery step runs to its end, the run ends failed) are in tests/runtime/test_failures_run.py
and the differential suite (final_status/, pipelines/*_error_arc)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from noetl_compile.check import check_paths
from noetl_compile.compile import compile_result

CANONICAL = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: outcome, path: tests/outcome}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    next:
      arcs:
        - {step: recover, when: "{{ event.name == 'call.error' }}"}
        - {step: done}
  - step: recover
    tool: {kind: noop}
  - step: done
    tool: {kind: noop}
"""

CASE_V2 = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: outcome, path: tests/outcome}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.error' }}"
        then: {next: [{step: recover}]}
    next: [{step: done}]
  - step: recover
    tool: {kind: noop}
  - step: done
    tool: {kind: noop}
"""


def _compile(tmp_path: Path, text: str, name: str = "outcome") -> tuple[str, object]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    (result,), _ = check_paths([str(path)])
    assert not [d for d in result.diagnostics if d.severity.name == "ERROR"], result.diagnostics
    return compile_result(result, path.name)


def test_a_canonical_dag_whose_failed_calls_can_go_on_ends_with_the_outcome_task(tmp_path):
    source, ir = _compile(tmp_path, CANONICAL)
    assert ir.outcome_task == "noetl_outcome"
    assert ir.outcome_watch == {"start": "start"}  # the one step with arcs
    assert ir.outcome_after == ["recover", "done"]  # the leaves: it runs after every step
    tail = source.split("# run outcome:", 1)[1]
    assert "from airflow_plugin.operators.outcome import NoetlOutcomeOperator" in source
    assert 'trigger_rule="none_failed"' in tail
    assert "[recover, done] >> noetl_outcome" in tail
    ast.parse(source)


def test_older_dialects_and_a_single_step_get_none(tmp_path):
    # case-v2 (dc55c492) ends a routed failure `completed`: nothing to watch.
    source, ir = _compile(tmp_path, CASE_V2)
    assert ir.dialect == "case-v2" and not ir.outcome_watch and "noetl_outcome" not in source
    single = CANONICAL.split("    next:")[0]
    source, ir = _compile(tmp_path, single, "single")
    assert not ir.outcome_watch and "NoetlOutcomeOperator" not in source


def test_the_task_id_never_takes_a_step_name(tmp_path):
    text = CANONICAL.replace("step: done", "step: noetl_outcome")
    _, ir = _compile(tmp_path, text)
    assert ir.outcome_task == "noetl_outcome_2"


def test_failed_calls_names_each_step_and_region_member_that_failed():
    pytest.importorskip("airflow")
    from airflow_plugin.operators.outcome import failed_calls

    watch = {"start": "start", "region_a": "region_a", "other": "other"}
    outputs = {
        "start": {
            "result": {},
            "status": "error",
            "error": {"type": "ValueError", "message": "boom"},
        },
        "region_a": {
            "result": None,
            "status": "error",
            "errors": {"fetch": {"type": "HTTPError", "message": "503"}},
        },
        "other": {"result": 1, "status": "ok"},  # went fine
    }
    assert failed_calls(watch, outputs) == [
        "step 'start': ValueError: boom",
        "step 'fetch': HTTPError: 503",
    ]
    assert failed_calls(watch, {"start": None}) == []  # skipped: no output
