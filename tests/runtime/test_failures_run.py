"""Failure behaviour of compiled playbooks under ``dag.test()``: an error arc routes a failing
tool; an unhandled failure fails the run naming step, field and cause; a template error names
step, field and expression; Postgres stopped mid-run fails the step after its retries with a
clear error and leaves no half-written data."""

from __future__ import annotations

import re
import textwrap

import pytest

from noetl_compile.cli import main
from tests.harness.compiled import playbook_runner


@pytest.fixture
def run_playbook(airflow_db, run_dag, tmp_path):
    return playbook_runner(run_dag, tmp_path, "failures")


def _failure_messages(capfd) -> list[str]:
    """Task failure lines of the task log (Airflow writes it to the process's stdout/stderr)."""
    captured = capfd.readouterr()
    lines = (captured.out + captured.err).splitlines()
    return [
        line for line in lines if line.startswith("airflow.sdk.exceptions.AirflowFailException")
    ]


def test_error_arc_routes_a_failing_tool(run_playbook):
    out = run_playbook(
        "error_arc",
        """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: error_arc, path: failures/error_arc}
        workflow:
          - step: start
            tool: {kind: python, code: "raise ValueError('bad input')"}
            next:
              arcs:
                - step: recover
                  when: "{{ event.name == 'call.error' }}"
                - step: happy
          - step: recover
            tool:
              kind: python
              input: {why: "{{ start.error }}"}  # NoETL's python error result: the text
              code: "result = {'recovered_from': why}"
          - step: happy
            tool: {kind: noop}
        """,
    )
    # The failed step is a failed task; its routing runs by trigger rules: the recovery step
    # runs to its end, the other arc skips. NoETL (138c10ed) still ends the run failed
    # (final_status/error_arc_recovery_raise): the outcome task fails it, naming the step.
    assert out.state == "failed", out.states
    assert out.states == {
        "start": "failed",
        "recover": "success",
        "happy": "skipped",
        "noetl_outcome": "failed",
    }
    assert out.xcom["start"]["status"] == "error"
    assert out.xcom["start"]["error"]["message"] == "bad input"
    assert out.xcom["recover"]["result"] == {"recovered_from": "bad input"}


def test_failed_call_goes_on_along_an_unconditional_arc_and_fails_the_run(run_playbook, capfd):
    # NoETL 138c10ed: final_status/unconditional_next_after_raise.
    out = run_playbook(
        "error_next",
        """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: error_next, path: failures/error_next}
        workflow:
          - step: start
            tool: {kind: python, code: "raise ValueError('boom')"}
            next: [{step: after}]
          - step: after
            tool: {kind: python, code: "result = {'after': True}"}
        """,
    )
    assert out.state == "failed"
    assert out.states == {"start": "failed", "after": "success", "noetl_outcome": "failed"}
    assert out.xcom["after"]["result"] == {"after": True}
    assert out.xcom["start"]["routed_to"] == ["after"]
    step_failure, run_failure = _failure_messages(capfd)
    assert step_failure.endswith(
        "step 'start': ValueError: boom (the routing took the failure: the run goes on to after)"
    )
    assert run_failure.endswith(
        "NoETL ends this run failed: a step's call failed and the run went on along its arcs; "
        "step 'start': ValueError: boom"
    )


CASE_V2_HANDLED = """
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: case_handled, path: failures/case_handled}
    workflow:
      - step: start
        tool: {kind: python, code: "result = {'n': 0}"}
        next: [{step: divide}]
      - step: divide
        tool: {kind: python, input: {n: "{{ start.n }}"}, code: "result = {'r': 1 / n}"}
        case:
          - when: "{{ event.name == 'call.error' }}"
            then: {next: [{step: recover}]}
        next: [{step: report}]
      - step: recover
        tool: {kind: python, code: "result = {'recovered': True}"}
      - step: report
        tool: {kind: noop}
    """


def test_a_handled_failure_is_red_and_the_run_ends_as_noetl_ends_it(run_playbook, capfd):
    # case-v2 (dc55c492): a case rule takes the failed call and the step's plain `next` runs
    # too (CASE_HANDLED); the run ends completed (engine.py:1818, case_v2/case_error_route).
    # On Airflow: the failed step is a red task with its traceback, both routes run by their
    # trigger rule, and the outcome task (the one leaf) lets the run succeed.
    out = run_playbook("case_handled", CASE_V2_HANDLED)
    log = capfd.readouterr()
    assert out.states == {
        "start": "success",
        "divide": "failed",
        "recover": "success",
        "report": "success",
        "noetl_outcome": "success",
    }
    assert out.state == "success"
    assert out.xcom["divide"]["status"] == "error"
    assert out.xcom["divide"]["routed_to"] == ["recover", "report"]
    assert out.xcom["recover"]["result"] == {"recovered": True}
    text = log.out + log.err
    assert "ZeroDivisionError: division by zero" in text and "Traceback" in text
    assert "NoETL run outcome: success; the routing took each failed call" in text


def test_a_handled_failure_without_a_matching_route_fails_the_run(run_playbook, capfd):
    # The same playbook with a division that still fails but a rule that no longer matches:
    # nothing takes the failure, what follows skips, the outcome task fails the run naming it.
    text = CASE_V2_HANDLED.replace("event.name == 'call.error'", "error and false")
    out = run_playbook("case_unhandled", text)
    assert out.state == "failed"
    assert out.states == {
        "start": "success",
        "divide": "failed",
        "recover": "skipped",
        "report": "skipped",
        "noetl_outcome": "failed",
    }
    (_, run_failure) = _failure_messages(capfd)
    assert run_failure.endswith(
        "NoETL ends this run failed: a step failed and no routing took the failure; "
        "step 'divide' failed"
    )


def test_unhandled_failure_fails_the_run_naming_step_field_and_cause(run_playbook, capfd):
    from airflow_plugin.events import MemoryRecorder, set_default_recorder

    recorder = MemoryRecorder()
    previous = set_default_recorder(recorder)
    try:
        out = _unhandled(run_playbook)
    finally:
        set_default_recorder(previous)
    assert out.state == "failed"
    # No arc matches the failed call: the step's task fails, what follows never runs. `after`
    # could have run after a routed failure (all_done): its guard skips it, and the outcome
    # task, the one leaf, fails the run naming the failure.
    assert out.states == {
        "start": "failed",
        "after": "skipped",
        "noetl_outcome": "failed",
    }
    message, run_failure = _failure_messages(capfd)
    assert message.endswith("step 'start' failed: tool.divide: ZeroDivisionError: division by zero")
    assert run_failure.endswith("no routing took the failure; step 'start' failed")
    assert message.count("step 'start'") == 1  # the step is named once
    # The task's failure event names the runtime error family behind it (errors.error_family).
    # (The run's end may close the task once more, without an exception to classify.)
    told = [e for e in recorder.named("TaskFinished") if e.task_id == "start" and "error" in e.data]
    assert len(told) == 1 and told[0].status == "error"
    assert told[0].data["error_family"] == "failed"


def _unhandled(run_playbook):
    return run_playbook(
        "unhandled",
        """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: unhandled, path: failures/unhandled}
        workflow:
          - step: start
            tool:
              - {name: prepare, kind: python, code: "result = {'n': 0}"}
              - {name: divide, kind: python, input: {n: "{{ prepare.n }}"}, code: "result = 1 / n"}
            next: {arcs: [{step: after, when: "{{ event.name == 'call.done' }}"}]}
          - step: after
            tool: {kind: noop}
        """,
    )


def test_template_error_names_step_field_and_expression(run_playbook, capfd):
    out = run_playbook(
        "template_error",
        """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: template_error, path: failures/template_error}
        workflow:
          - step: start
            tool: {kind: python, code: "result = {'total': 3}"}
            set:
              ctx.total: "{{ start.totl + 1 }}"
        """,
    )
    assert out.state == "failed"
    message = " ".join(_failure_messages(capfd))
    assert re.search(
        r"step 'start' failed: TemplateError: field set\.ctx\.total: cannot render "
        r"'\{\{ start\.totl \+ 1 \}\}'",
        message,
    ), message


def test_strict_conf_turns_a_kept_template_into_a_failure(run_playbook, capfd):
    text = """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: strict_run, path: failures/strict_run}
        workflow:
          - step: start
            tool: {kind: python, input: {v: "{{ nowhere.value }}"}, code: "result = v"}
        """
    from airflow_plugin.events import MemoryRecorder, set_default_recorder

    recorder = MemoryRecorder()
    previous = set_default_recorder(recorder)
    try:
        lenient = run_playbook("strict_run", text)
    finally:
        set_default_recorder(previous)
    assert lenient.state == "success" and lenient.xcom["start"]["result"] == "{{ nowhere.value }}"
    (warning,) = recorder.named("TemplateWarning")
    assert warning.step == "start" and warning.task_id == "start"
    assert warning.data["field"] == "tool.input.v"
    assert warning.data["expression"] == "{{ nowhere.value }}"
    strict = run_playbook("strict_run", text, conf={"noetl_strict": True})
    assert strict.state == "failed"
    assert "StrictTemplateError" in " ".join(_failure_messages(capfd))


def test_strict_fails_a_loop_item_on_an_unresolved_loop_name_before_its_tool_runs(
    airflow_db, run_dag, tmp_path, capfd
):
    """`{{ iter.ordr }}` (the iterator is `order`), compiled past check's T307: lenient, the
    item's code gets the template text (TypeError in the user's code); strict, each item fails
    on the name itself and the python tool never starts."""
    source = tmp_path / "loop_typo.yaml"
    source.write_text(
        textwrap.dedent(
            """
            apiVersion: noetl.io/v2
            kind: Playbook
            metadata: {name: loop_typo, path: failures/loop_typo}
            workload:
              orders: [{id: 1, total: 40}, {id: 2, total: 75}]
            workflow:
              - step: price_each
                loop:
                  in: "{{ workload.orders }}"
                  iterator: order
                  spec: {mode: parallel}
                tool:
                  kind: python
                  input: {order: "{{ iter.ordr }}"}
                  code: 'result = {"id": order["id"]}'
            """
        )
    )
    out = tmp_path / "dags"
    assert main(["check", str(source), "--quiet"]) == 1  # T307 at the misspelt name
    assert main(["compile", str(source), "-o", str(out), "--ignore", "T307"]) == 0
    (dag_file,) = out.glob("*.py")
    from airflow_plugin.events import MemoryRecorder, set_default_recorder

    lenient = run_dag(dag_file.read_text(), "failures.loop_typo")
    assert lenient.state == "failed"
    assert "TypeError" in " ".join(_failure_messages(capfd))
    recorder = MemoryRecorder()
    previous = set_default_recorder(recorder)
    try:
        strict = run_dag(dag_file.read_text(), "failures.loop_typo", {"noetl_strict": True})
    finally:
        set_default_recorder(previous)
    assert strict.state == "failed"
    messages = " ".join(_failure_messages(capfd))
    assert "StrictTemplateError" in messages and "iter.ordr" in messages, messages
    assert "TypeError" not in messages
    assert recorder.named("ToolStarted") == []  # no item called its tool with the text
    assert {w.data["field"] for w in recorder.named("TemplateWarning")} == {"tool.input.order"}


def test_postgres_stopped_mid_run_fails_after_retries_without_half_written_data(
    run_playbook, pg_cluster, pg_connections, pg_test_dsn, capfd
):
    import psycopg

    with psycopg.connect(pg_test_dsn, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS midrun")
        db.execute("CREATE TABLE midrun (id int PRIMARY KEY, step text)")
    stop = (
        "import subprocess\n"
        f"cmd = ['runuser', '-u', 'postgres', '--', {str(pg_cluster.bin_dir / 'pg_ctl')!r},"
        f" '-D', {str(pg_cluster.data_dir)!r}, '-m', 'fast', '-w', 'stop']\n"
        "result = {'stopped': subprocess.run(cmd, capture_output=True).returncode == 0}\n"
    )
    try:
        out = run_playbook(
            "pg_midrun",
            f"""
            apiVersion: noetl.io/v2
            kind: Playbook
            metadata: {{name: pg_midrun, path: failures/pg_midrun}}
            workload: {{pg_auth: pg_local}}
            workflow:
              - step: start
                tool: {{kind: postgres, auth: "{{{{ pg_auth }}}}", command: "INSERT INTO midrun VALUES (1, 'start')"}}
                next: {{arcs: [{{step: outage}}]}}
              - step: outage
                tool:
                  kind: python
                  code: {stop!r}
                next: {{arcs: [{{step: write_more}}]}}
              - step: write_more
                tool:
                  kind: postgres
                  auth: "{{{{ pg_auth }}}}"
                  command: |
                    INSERT INTO midrun VALUES (2, 'write_more');
                    INSERT INTO midrun VALUES (3, 'write_more');
                  spec:
                    policy:
                      rules:
                        - when: "{{{{ output.status == 'error' and output.error.retryable }}}}"
                          then: {{do: retry, attempts: 3, backoff: fixed, delay: 0.2}}
            """,
        )
    finally:
        pg_cluster.start()
    assert out.states["outage"] == "success" and out.xcom["outage"]["result"] == {"stopped": True}
    assert out.state == "failed" and out.states["write_more"] == "failed"
    message = " ".join(_failure_messages(capfd))
    assert "step 'write_more' failed: tool.write_more_task: OperationalError" in message
    with psycopg.connect(pg_test_dsn) as db:
        assert db.execute("SELECT id, step FROM midrun ORDER BY id").fetchall() == [(1, "start")]


def test_a_failing_iteration_lets_the_rest_of_its_chunk_run(run_playbook):
    """An async loop (case-v2) of 200 items in 64 chunks (max_map_length 64 here): items 4-7
    share a mapped instance. Item 5 fails; 6 and 7 still run, as they would in instances of
    their own, and the loop fails. (A sequential loop of an engine that issues no item after a
    failed one stops instead: tests/runtime/test_loop_stop_run.py.)"""
    from airflow_plugin.events import MemoryRecorder, set_default_recorder

    recorder = MemoryRecorder()
    previous = set_default_recorder(recorder)
    try:
        out = run_playbook(
            "chunk_failure",
            """
            apiVersion: noetl.io/v2
            kind: Playbook
            metadata: {name: chunk_failure, path: failures/chunk_failure}
            workflow:
              - step: start
                loop: {in: "{{ range(200) | list }}", iterator: n, mode: async}
                tool:
                  kind: python
                  args: {n: "{{ n }}"}
                  code: |
                    if n == 5:
                        raise ValueError("item five is bad")
                    result = n
            """,
        )
    finally:
        set_default_recorder(previous)
    assert out.state == "failed", out.states
    assert len(out.xcom["start.head"]) == 64
    assert out.xcom["start.head"][1]["items"] == [4, 5, 6, 7]
    completed = {
        e.iteration: e.status for e in recorder.named("LoopIterationCompleted") if e.step == "start"
    }
    assert len(completed) == 200
    assert completed[5] == "error"
    assert {completed[i] for i in (4, 6, 7)} == {"success"}
    assert sum(status == "success" for status in completed.values()) == 199


def test_a_branch_not_taken_is_skipped_without_starting_its_tasks(run_playbook, caplog):
    # Every step here may route a failure (canonical: arcs), so the tasks after them start by
    # none_skipped: a branch the routing did not take is skipped by the scheduler, as with
    # all_success, and its later tasks are never started just to skip themselves.
    out = run_playbook(
        "not_taken",
        """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: not_taken, path: failures/not_taken}
        workflow:
          - step: start
            tool: {kind: python, code: "result = {'big': False}"}
            next:
              spec: {mode: exclusive}
              arcs:
                - {step: big, when: "{{ start.big }}"}
                - {step: small}
          - step: big
            tool: {kind: noop}
            next: {arcs: [{step: big_two}]}
          - step: big_two
            tool: {kind: noop}
            next: {arcs: [{step: big_three}]}
          - step: big_three
            tool: {kind: noop}
          - step: small
            tool: {kind: noop}
        """,
    )
    assert out.state == "success", out.states
    assert out.states == {
        "start": "success",
        "big": "skipped",
        "big_two": "skipped",
        "big_three": "skipped",
        "small": "success",
        "noetl_outcome": "success",
    }
    started = {
        line.split("task_id=", 1)[1].split()[0]
        for line in caplog.text.splitlines()
        if "[DAG TEST] starting task_id=" in line
    }
    assert started == {"start", "small", "noetl_outcome"}
