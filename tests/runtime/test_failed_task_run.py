"""A failed step is an Airflow failure under ``dag.test()`` (issue 32, item 1): a call that fails
and that nothing in the playbook handles is a failed task instance with the tool's traceback in
its task log, what follows is ``upstream_failed`` (never runs), the run fails and the event log
says error for that step. A failure the playbook's routing takes (here the canonical engine's
plain ``next``) is a failed task too, with the traceback in its log; the route runs by its
trigger rule, as NoETL goes on, and a template of the next step that cannot render names the
failed producer."""

from __future__ import annotations

import textwrap

import pytest

from airflow_plugin.events import MemoryRecorder, set_default_recorder
from noetl_compile.cli import main

# The code's own line, as Python's traceback quotes it: the task log holds the real traceback.
RAISING_LINE = "ratio = 1 / n"


@pytest.fixture
def run_playbook(airflow_db, run_dag, tmp_path):
    def run(name: str, yaml_text: str):
        source = tmp_path / f"{name}.yaml"
        source.write_text(textwrap.dedent(yaml_text))
        out = tmp_path / "dags"
        assert main(["compile", str(source), "-o", str(out)]) == 0
        (dag_file,) = out.glob("*.py")
        recorder = MemoryRecorder()
        previous = set_default_recorder(recorder)
        try:
            return run_dag(dag_file.read_text(), f"failedtask.{name}"), recorder
        finally:
            set_default_recorder(previous)

    return run


def _task_log(capfd) -> str:
    """What the tasks logged: ``dag.test()`` writes each task's log to the process's output."""
    captured = capfd.readouterr()
    return captured.out + captured.err


def _step_finished(recorder: MemoryRecorder, step: str) -> list:
    return [e for e in recorder.named("StepFinished") if e.step == step]


def test_an_unhandled_failure_in_the_middle_is_a_failed_task_with_its_traceback(
    run_playbook, capfd
):
    # v1: a plain `next` does not take a failed call (profile.failed_call_takes_every_arc is
    # false), so nothing handles transform's ZeroDivisionError.
    out, recorder = run_playbook(
        "unhandled_middle",
        f"""
        apiVersion: noetl.io/v1
        kind: Playbook
        name: unhandled_middle
        path: failedtask/unhandled_middle
        workflow:
          - step: start
            type: python
            code: "def main():\\n    return {{'n': 0}}\\n"
            next: [{{step: transform}}]
          - step: transform
            type: python
            with: {{n: '{{{{ start.n }}}}'}}
            code: "def main(n):\\n    {RAISING_LINE}\\n    return {{'ratio': ratio}}\\n"
            next: [{{step: load}}]
          - step: load
            type: python
            with: {{ratio: '{{{{ transform.ratio }}}}'}}
            code: "def main(ratio):\\n    return {{'loaded': ratio + 1}}\\n"
            next: [{{step: end}}]
          - step: end
        """,
    )
    log = _task_log(capfd)
    assert out.state == "failed", out.states
    assert out.states["start"] == "success"
    assert out.states["transform"] == "failed"
    # Never ran: Airflow's trigger rules, not a confusing error of its own.
    assert out.states["load"] == "upstream_failed"
    assert out.states["end"] == "upstream_failed"
    # The task log holds the tool's traceback, down to the playbook code's line and the cause.
    assert "NoETL step transform tool error:\nTraceback (most recent call last):" in log
    assert RAISING_LINE in log
    assert "ZeroDivisionError: division by zero" in log
    # ... and Airflow's failure line names the step and the cause once.
    assert (
        "AirflowFailException: step 'transform' failed: tool: ZeroDivisionError: division by zero"
        in log
    )
    (finished,) = _step_finished(recorder, "transform")
    assert finished.status == "error"
    assert finished.data["error"]["type"] == "ZeroDivisionError"
    assert not [e for e in recorder.named("StepStarted") if e.step == "load"]


def test_a_failure_the_routing_takes_is_red_and_the_next_says_why_it_cannot_render(
    run_playbook, capfd, caplog
):
    # Canonical (138c10ed): a plain `next` takes a failed call and the run goes on, to end
    # failed (final_status/unconditional_next_after_raise). The step's task is red, `load`
    # runs by its trigger rule, the outcome task fails the run.
    out, recorder = run_playbook(
        "handled_middle",
        f"""
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {{name: handled_middle, path: failedtask/handled_middle}}
        workflow:
          - step: extract
            tool: {{kind: python, code: "result = {{'n': 0}}"}}
            next: [{{step: transform}}]
          - step: transform
            tool:
              kind: python
              input: {{n: "{{{{ extract.n }}}}"}}
              code: "{RAISING_LINE}\\nresult = {{'ratio': ratio}}"
            next: [{{step: load}}]
          - step: load
            tool:
              kind: python
              input: {{ratio: "{{{{ transform.ratio }}}}"}}
              code: "result = {{'loaded': ratio}}"
        """,
    )
    log = _task_log(capfd)
    assert out.states == {
        "extract": "success",
        "transform": "failed",
        "load": "success",
        "noetl_outcome": "failed",
    }
    assert out.state == "failed"
    assert out.xcom["transform"]["status"] == "error"
    # The failed task logs what failed, with the traceback, and where the routing went.
    assert (
        "NoETL step transform: its call failed (ZeroDivisionError: division by zero); the "
        "routing took the failure, the run goes on to ['load']:\nTraceback" in log
    )
    assert RAISING_LINE in log
    (finished,) = _step_finished(recorder, "transform")
    assert finished.status == "error"
    # The consumer's template names the producer that failed, in its log and its event.
    warnings = [e for e in recorder.named("TemplateWarning") if e.step == "load"]
    assert warnings and all("step 'transform' failed" in e.data["cause"] for e in warnings), [
        (e.step, e.data) for e in recorder.named("TemplateWarning")
    ]
    # The runtime's warning (its logger; pytest's capture holds it where a worker writes it to
    # the task log).
    assert (
        "NoETL step 'load' field tool.input.ratio: '{{ transform.ratio }}' rendered with its "
        "undefined names as ''"
    ) in caplog.text
    assert (
        "its producer step 'transform' failed (ZeroDivisionError: division by zero)" in caplog.text
    )


def test_a_region_member_failure_the_routing_takes_is_red_after_the_region_finished(
    run_playbook, capfd
):
    # A cycle (fetch -> check -> fetch) is one region task. Canonical: fetch's failed call
    # takes its plain arc to check, check routes out to `after`; the region finishes its
    # routing, then its task fails with fetch's traceback, `after` runs by its trigger rule
    # and the outcome task ends the run failed, as 138c10ed does after a call.error.
    out, recorder = run_playbook(
        "region_handled",
        f"""
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {{name: region_handled, path: failedtask/region_handled}}
        workload: {{n: 0}}
        workflow:
          - step: start
            tool: {{kind: noop}}
            next: [{{step: fetch}}]
          - step: fetch
            tool:
              kind: python
              input: {{n: "{{{{ workload.n }}}}"}}
              code: "{RAISING_LINE}\\nresult = {{'ratio': ratio}}"
            next: [{{step: check}}]
          - step: check
            tool: {{kind: python, code: "result = {{'again': False}}"}}
            next:
              arcs:
                - step: fetch
                  when: "{{{{ check.again }}}}"
                - step: after
                  when: "{{{{ not check.again }}}}"
          - step: after
            tool: {{kind: python, code: "result = {{'after': True}}"}}
        """,
    )
    log = _task_log(capfd)
    regions = [t for t in out.states if t not in ("start", "after", "noetl_outcome")]
    assert len(regions) == 1, out.states
    (region,) = regions
    assert out.states == {
        "start": "success",
        region: "failed",
        "after": "success",
        "noetl_outcome": "failed",
    }
    assert out.state == "failed"
    output = out.xcom[region]
    # The region ran to its end: check ran after the failed fetch and chose `after`.
    assert output["order"] == ["fetch", "check"]
    assert output["status"] == "error" and output["routed_to"] == ["after"]
    assert output["error"]["type"] == "ZeroDivisionError"
    assert "the call of member fetch failed (ZeroDivisionError: division by zero)" in log
    assert RAISING_LINE in log and "Traceback (most recent call last)" in log
    (finished,) = _step_finished(recorder, "fetch")
    assert finished.status == "error"
    assert [e.status for e in _step_finished(recorder, "after")] == ["success"]
