"""The outcome task (noetl_compile/lower/outcome.py, airflow_plugin/operators/outcome.py) and the
trigger rules after a step that may route a failure (operators/failure_routes.py): which DAGs
get them, what the outcome task watches, where it sits, and how the guard and the outcome decide.
The runs themselves (the failed step red, the recovery step runs to its end, the run ends as
NoETL ends it) are in tests/runtime/test_failures_run.py and the differential suite
(final_status/, pipelines/*_error_arc)."""

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
    assert ir.outcome_fails_run  # 138c10ed: a call.error fails the execution
    tail = source.split("# run outcome:", 1)[1]
    assert "from airflow_plugin.operators.outcome import NoetlOutcomeOperator" in source
    assert 'trigger_rule="all_done"' in tail and "routed_failure_fails_run=True" in tail
    assert "[recover, done] >> noetl_outcome" in tail
    # Both arcs may be taken after a failed call: both targets start after start's failure.
    assert {u.id: u.trigger_rule for u in ir.units} == {
        "start": None,
        "recover": "none_skipped",
        "done": "none_skipped",
    }
    ast.parse(source)


def test_case_v2_routes_a_failure_by_trigger_rules_and_ends_the_run_completed(tmp_path):
    # case-v2 (dc55c492 engine.py:1818) ends a routed failure `completed`: the outcome task is
    # there for failures no rule took, and succeeds on a routed one.
    source, ir = _compile(tmp_path, CASE_V2)
    assert ir.dialect == "case-v2" and ir.outcome_watch == {"start": "start"}
    assert not ir.outcome_fails_run and "routed_failure_fails_run=False" in source
    assert {u.id: u.trigger_rule for u in ir.units}["recover"] == "none_skipped"


def test_steps_whose_routing_cannot_take_a_failure_get_none(tmp_path):
    # case-v2: a rule that does not address the failure cannot route one.
    quiet = CASE_V2.replace("event.name == 'call.error'", "result == 1")
    source, ir = _compile(tmp_path, quiet, "quiet")
    assert not ir.outcome_watch and "noetl_outcome" not in source
    assert all(u.trigger_rule not in ("none_skipped", "all_done") for u in ir.units)
    single = CANONICAL.split("    next:")[0]
    source, ir = _compile(tmp_path, single, "single")
    assert not ir.outcome_watch and "NoetlOutcomeOperator" not in source


def test_a_bare_noop_start_cannot_route_a_failure(tmp_path):
    # The canonical `start` of many playbooks: `tool: {kind: noop}` and arcs. tools/noop.py
    # succeeds without a condition and nothing of the step renders before it, so no failure
    # can take its arcs: no outcome task, its targets keep all_success.
    bare = CANONICAL.replace('tool: {kind: python, code: "result = 1"}', "tool: {kind: noop}")
    source, ir = _compile(tmp_path, bare, "bare")
    assert not ir.outcome_watch and "NoetlOutcomeOperator" not in source
    assert {u.id: u.trigger_rule for u in ir.units} == {
        "start": None,
        "recover": None,
        "done": None,
    }
    # A noop that renders something (its input, a tool field) or carries a policy is judged
    # as any step: the canonical engine takes every arc after its failed call.
    for extra in ("input: {n: 1}", "set: {seen: 1}"):
        text = bare.replace(
            "tool: {kind: noop}\n    next:", f"tool: {{kind: noop}}\n    {extra}\n    next:", 1
        )
        assert text != bare
        _, ir = _compile(tmp_path, text, "rendering")
        assert ir.outcome_watch == {"start": "start"}, extra
    text = bare.replace("tool: {kind: noop}", "tool: {kind: noop, message: '{{ workload }}'}", 1)
    _, ir = _compile(tmp_path, text, "message")
    assert ir.outcome_watch == {"start": "start"}


def test_a_join_after_a_routed_failure_waits_for_every_branch(tmp_path):
    # `done` joins `start` (which may route a failure) and `recover`: none_skipped would skip it
    # whenever one branch was not taken, so a join gets all_done (its guard stands in for
    # none_failed_min_one_success).
    text = CANONICAL.replace(
        "  - step: recover\n    tool: {kind: noop}",
        ("  - step: recover\n    tool: {kind: noop}\n    next: {arcs: [{step: done}]}"),
    )
    _, ir = _compile(tmp_path, text, "join")
    rules = {u.id: u.trigger_rule for u in ir.units}
    assert rules == {"start": None, "recover": "none_skipped", "done": "all_done"}


def test_the_compiler_and_the_runtime_agree_on_the_tolerant_rules():
    pytest.importorskip("airflow")
    from airflow_plugin.operators.failure_routes import FAILURE_TOLERANT_RULES
    from noetl_compile.lower.outcome import FAILURE_TOLERANT_JOIN_RULE, FAILURE_TOLERANT_RULE

    assert {FAILURE_TOLERANT_RULE, FAILURE_TOLERANT_JOIN_RULE} == FAILURE_TOLERANT_RULES


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


ROUTED = {
    "result": {},
    "status": "error",
    "error": {"type": "ZeroDivisionError", "message": "division by zero"},
    "next": ["recover"],
    "routed_to": ["recover"],
}


def test_the_guard_runs_a_task_exactly_where_the_rule_it_stands_in_for_would():
    pytest.importorskip("airflow")
    from airflow_plugin.operators.failure_routes import upstream_verdict

    def verdict(me, states, outputs=None, join=False):
        return upstream_verdict(me, sorted(states), states, outputs or {}, join=join)[0]

    failed = {"start": ["failed"]}
    # The routed failure chose `recover`: it runs, `done` skips.
    assert verdict("recover", failed, {"start": ROUTED})
    assert not verdict("done", failed, {"start": ROUTED})
    # A failure no routing took (no routed_to, or no output at all): nothing after it runs.
    unrouted = {**ROUTED, "next": []}
    del unrouted["routed_to"]
    assert not verdict("recover", failed, {"start": unrouted})
    assert not verdict("recover", failed, {})
    # all_success: a success runs it, a skip or an upstream failure skips it.
    assert verdict("done", {"start": ["success"]})
    assert not verdict("done", {"start": ["skipped"]})
    assert not verdict("done", {"start": ["upstream_failed"]})
    # A join (none_failed_min_one_success): one branch taken is enough, a failure is not.
    join = {"a": ["success"], "b": ["skipped"]}
    assert verdict("j", join, join=True) and not verdict("j", join, join=False)
    assert not verdict("j", {"a": ["success"], "b": ["failed"]}, join=True)
    assert verdict(
        "j",
        {"a": ["skipped"], "start": ["failed"]},
        {"start": {**ROUTED, "routed_to": ["j"]}},
        join=True,
    )


def test_the_outcome_tells_routed_failures_from_unhandled_ones():
    pytest.importorskip("airflow")
    from airflow_plugin.operators.failure_routes import run_failures, task_states

    states = task_states(
        {
            "start": "failed",
            "recover": "success",
            "done": "skipped",
            "loop.body_0": "success",
            "loop.body_1": "failed",
            "loop.body_2": "failed",
        },
        ["start", "recover", "done", "loop.body"],
    )
    assert states["loop.body"] == ["success", "failed", "failed"]
    unhandled, handled = run_failures(states, {"start": ROUTED}, {"start": "start"})
    assert handled == ["step 'start': ZeroDivisionError: division by zero"]
    assert unhandled == ["task 'loop.body' failed (2 of 3 instances)"]
    unhandled, handled = run_failures({"start": ["failed"]}, {"start": None}, {"start": "start"})
    assert (unhandled, handled) == (["step 'start' failed"], [])
