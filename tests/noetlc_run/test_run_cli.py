"""`noetlc run`: real runs of real playbooks on a real local Airflow, through the CLI.

Every run goes through ``python -m noetl_compile run`` in a subprocess, exactly as a user types
it, in the managed home of conftest.py. Here: the home, what a run reports, nested playbooks,
loops and gates. Errors before anything runs are in test_run_errors.py, the report builder in
test_run_report.py, live progress on a terminal in test_run_progress.py.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from airflow_plugin.local.home import Home, locked
from airflow_plugin.local.launch import child_environment
from airflow_plugin.templating.ids import execution_id_for
from tests.harness.run_cli import (
    PLAYBOOKS,
    ROOT,
    TIMEOUT,
    loop_timeline,
    noetlc_run,
    report_of,
    write_playbook,
)
from tests.noetlc_run.playbook_texts import DIVIDE

# -- the managed home --------------------------------------------------------------------------


def test_first_run_creates_the_home_and_prints_steps_and_results(first_run, home):
    assert first_run.returncode == 0, first_run.stderr
    assert "created the local Airflow home" in first_run.stderr
    assert (home / "airflow.db").is_file() and (home / "noetlc-home.json").is_file()
    lines = first_run.stdout.splitlines()
    header = lines[0].split()
    assert header[0] == "examples.hello_world" and header[-2] == "execution_id"
    execution_id = execution_id_for("examples.hello_world", header[2])
    assert header[-1] == str(execution_id)
    # Where the run's events are: the default event log, SQLite inside the managed home.
    events_db = home / "noetl" / "events.db"
    assert lines[1] == f"events  sqlite {events_db}  (noetlc events {execution_id})"
    progress = [line.split() for line in lines[2:5]]
    assert [(p[0], p[1], p[3], p[4]) for p in progress] == [
        ("start", "success", "1", "attempt"),
        ("greet", "success", "1", "attempt"),
        ("end", "success", "1", "attempt"),
    ]
    assert lines[5].startswith("success in ")
    with sqlite3.connect(events_db) as db:
        names = [
            row[0]
            for row in db.execute(
                "SELECT name FROM event_log WHERE execution_id = ? ORDER BY seq", (execution_id,)
            )
        ]
    assert names[:3] == [
        "PlaybookExecutionRequested",
        "PlaybookRequestEvaluated",
        "WorkflowStarted",
    ]
    assert names[-2:] == ["WorkflowFinished", "PlaybookProcessed"]
    # Three steps; four tasks: the run's NoETL outcome is a task of no step (operators/outcome.py).
    assert names.count("StepFinished") == 3 and names.count("TaskFinished") == 4
    assert lines[6:] == [
        "results:",
        '  start  {"status": "initialized"}',
        '  greet  {"greeting": "HELLO WORLD"}',
        '  end    {"status": "complete", "echo": "HELLO WORLD"}',
    ]
    # Airflow's own output went to the run's log file, not to the terminal.
    assert "DAG TEST" not in first_run.stdout + first_run.stderr


def test_second_run_reuses_the_home_and_json_is_one_object(first_run, home):
    assert first_run.returncode == 0, first_run.stderr
    db, marker = home / "airflow.db", home / "noetlc-home.json"
    before = (db.stat().st_ino, marker.stat().st_mtime_ns, marker.read_text())
    result = noetlc_run(home, PLAYBOOKS / "hello_world.yaml", "--json")
    assert result.returncode == 0, result.stderr
    assert "created" not in result.stderr
    assert (db.stat().st_ino, marker.stat().st_mtime_ns, marker.read_text()) == before

    report = report_of(result)
    assert report["dag_id"] == "examples.hello_world" and report["state"] == "success"
    assert report["execution_id"] == str(execution_id_for(report["dag_id"], report["run_id"]))
    steps = report["steps"]
    assert list(steps) == ["start", "greet", "end"]
    assert {name: step["state"] for name, step in steps.items()} == dict.fromkeys(steps, "success")
    assert steps["greet"]["result"] == {"greeting": "HELLO WORLD"}
    assert steps["end"]["result"] == {"status": "complete", "echo": "HELLO WORLD"}
    assert all(step["attempts"] == 1 for step in steps.values())
    assert steps["greet"]["tasks"] == {"greet": {"state": "success", "attempts": 1}}
    # NoETL's ctx: the execution variables, the workload first (no step writes one here)
    assert report["ctx"] == {"message": "Hello World"} and report["vars"] == {}
    assert Path(report["log"]).is_file()


# -- what a run reports ------------------------------------------------------------------------


def test_branches_not_taken_are_skipped(first_run, home):
    result = noetlc_run(home, PLAYBOOKS / "branching.yaml", "--json")
    assert result.returncode == 0, result.stderr
    steps = report_of(result)["steps"]
    assert {name: step["state"] for name, step in steps.items()} == {
        "start": "success",
        "small_order": "skipped",
        "large_order": "success",
        "notify_finance": "success",
        "notify_sales": "success",
        "notify_legal": "skipped",
        "summary": "success",
    }
    assert steps["small_order"] == {
        "state": "skipped",
        "result": None,
        "attempts": 0,
        "tasks": {"small_order": {"state": "skipped", "attempts": 0}},
        "duration": None,
        "error": None,
    }
    assert steps["summary"]["result"] == {"tier": "large", "notified": ["finance", "sales"]}
    # With --json the progress lines go to stderr, skipped steps included.
    assert any(
        line.split()[:2] == ["notify_legal", "skipped"] for line in result.stderr.splitlines()
    )


def test_set_and_conf_override_the_workload(first_run, home, tmp_path):
    playbook = write_playbook(tmp_path, "divide", DIVIDE)
    result = noetlc_run(
        home,
        playbook,
        "--json",
        "--conf",
        '{"divisor": 4, "label": "from conf"}',
        "--set",
        "divisor=2",
        "--set",
        "label=007",  # a string key keeps the text: "007", not 7
        "--set-new",
        "note=added",  # a key the workload does not declare, added on purpose
    )
    assert result.returncode == 0, result.stderr
    report = report_of(result)
    assert report["steps"]["boom"]["result"] == {"value": 0.5, "label": "007"}
    # ctx as NoETL has it: the workload, the request payload on top
    assert report["ctx"] == {"divisor": 2, "label": "007", "note": "added"}


def test_a_failing_step_fails_the_run_and_is_named_once(first_run, home, tmp_path):
    # boom's arc to `after` has no `when`: NoETL's canonical engine goes on along it after the
    # failed call and still ends the run failed (final_status/unconditional_next_after_zero_div).
    playbook = write_playbook(tmp_path, "divide", DIVIDE)
    result = noetlc_run(home, playbook)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    failures = [line for line in lines if "failed:" in line]
    # the step's line, with the line of its code the error was raised at and where the routing
    # took the failure, then why the run failed although it went on
    assert failures == [
        "step boom failed: ZeroDivisionError: division by zero (line 1 of the code); the routing "
        "took it to after",
        "task noetl_outcome failed: NoETL ends this run failed: a step's call failed and the run "
        "went on along its arcs; step 'boom': ZeroDivisionError: division by zero",
    ]
    assert not any(line.startswith("not run:") for line in lines)
    assert '  after  {"after": true}' in lines
    log = next(line.split(": ", 1)[1] for line in lines if line.startswith("Airflow log: "))
    assert Path(log).is_file() and "ZeroDivisionError" in Path(log).read_text()
    assert "Traceback" not in result.stdout + result.stderr


def test_strict_turns_template_warnings_into_failures(first_run, home, tmp_path):
    playbook = write_playbook(
        tmp_path,
        "lenient",
        """\
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata:
          name: lenient
          path: tests/lenient
        workflow:
          - step: start
            tool:
              kind: python
              code: |
                result = {"present": 1}
            next:
              arcs:
                - step: use
          - step: use
            tool:
              kind: python
              input:
                value: "{{ start.absent }}"
              code: |
                result = {"value": value}
        """,
    )
    lenient = noetlc_run(home, playbook)
    assert lenient.returncode == 0, lenient.stderr
    assert any(
        line.startswith("warning: step use: tool.input.value:")
        for line in lenient.stdout.splitlines()
    )
    strict = noetlc_run(home, playbook, "--strict", "--json")
    assert strict.returncode == 1, strict.stderr
    use = report_of(strict)["steps"]["use"]
    assert use["state"] == "failed" and "strict mode" in use["error"]


def test_connections_file_entries_become_airflow_connections(first_run, home, tmp_path):
    connections = tmp_path / "connections.yaml"
    connections.write_text(
        "warehouse: postgresql://ada:s3cret-pw@db.example.com:5433/sales\n"
        "api: {conn_type: http, host: api.example.com, password: hunter2-pw}\n"
        "declared_only:\n"
    )
    playbook = write_playbook(
        tmp_path,
        "conn",
        """\
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata:
          name: conn
          path: tests/conn
        workflow:
          - step: start
            tool:
              kind: python
              code: |
                from airflow.sdk import Connection
                w, a = Connection.get("warehouse"), Connection.get("api")
                result = {
                    "w": [w.conn_type, w.host, w.port, w.login, w.schema],
                    "a": [a.conn_type, a.host],
                    "secrets": [bool(w.password), bool(a.password)],
                }
        """,
    )
    result = noetlc_run(home, playbook, "--connections", connections, "--json")
    assert result.returncode == 0, result.stderr
    report = report_of(result)
    assert report["steps"]["start"]["result"] == {
        "w": ["postgres", "db.example.com", 5433, "ada", "sales"],
        "a": ["http", "api.example.com"],
        "secrets": [True, True],
    }
    for text in (result.stdout, result.stderr, Path(report["log"]).read_text()):
        assert "s3cret-pw" not in text and "hunter2-pw" not in text


# -- nested playbooks and gates ----------------------------------------------------------------


def test_nested_playbook_runs_its_child_in_the_same_command(first_run, home):
    result = noetlc_run(home, PLAYBOOKS / "nested_parent.yaml", "--json")
    assert result.returncode == 0, result.stderr
    steps = report_of(result)["steps"]
    assert steps["call_child"]["result"] == {"greeting": "hello Ada"}
    assert steps["end"]["result"] == {"child": {"greeting": "hello Ada"}}
    # The child's own step `start` (events of another execution) is not the parent's `start`.
    assert steps["start"]["attempts"] == 1


def test_nested_playbook_as_a_real_child_dag_run(first_run, home):
    result = noetlc_run(
        home, PLAYBOOKS / "nested_parent.yaml", "--json", env={"NOETL_NESTED": "trigger"}
    )
    assert result.returncode == 0, result.stderr
    report = report_of(result)
    assert report["steps"]["call_child"]["result"] == {"greeting": "hello Ada"}
    [child] = report["children"]
    assert child["dag_id"] == "examples.nested_child" and child["state"] == "success"
    assert child["steps"]["start"]["result"] == {"greeting": "hello Ada"}
    assert child["execution_id"] == str(execution_id_for(child["dag_id"], child["run_id"]))


def test_a_child_dag_paused_in_the_home_still_runs_under_noetlc_run(tmp_path):
    """A home made before compiled DAGs were created unpaused may hold a child DAG paused; the
    nested step refuses to trigger a paused DAG, so `noetlc run` unpauses the DAGs it runs."""
    import sqlite3

    home = tmp_path / "home"
    env = {"NOETL_NESTED": "trigger"}
    assert noetlc_run(home, PLAYBOOKS / "nested_parent.yaml", env=env).returncode == 0
    with sqlite3.connect(Home(home).db) as db:
        paused = db.execute(
            "UPDATE dag SET is_paused = 1 WHERE dag_id = 'examples.nested_child'"
        ).rowcount
    assert paused == 1
    result = noetlc_run(home, PLAYBOOKS / "nested_parent.yaml", "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert report_of(result)["steps"]["call_child"]["result"] == {"greeting": "hello Ada"}
    with sqlite3.connect(Home(home).db) as db:
        states = dict(db.execute("SELECT dag_id, is_paused FROM dag").fetchall())
    assert states["examples.nested_child"] == 0 and states["examples.nested_parent"] == 0


def test_a_large_loop_runs_in_few_instances_locally(first_run, home):
    """Mapped instances run one at a time here, each with Airflow's per-instance cost: a
    parallel loop runs in one instance (every item still runs once, results in order)."""
    env = {"AIRFLOW__CORE__MAX_MAP_LENGTH": "1024"}  # Airflow's default (the tests use 64)
    result = noetlc_run(home, PLAYBOOKS / "large_loop.yaml", "--json", env=env)
    assert result.returncode == 0, result.stderr
    square = report_of(result)["steps"]["square"]
    # A parallel loop: one instance runs the collection on max_in_flight threads.
    assert square["tasks"]["square.body"]["instances"] == 1
    assert square["result"]["stats"] == {"total": 5000, "success": 5000, "failed": 0}
    # NoETL's bound: the last 128 results, the others counted
    assert square["result"]["omitted_results_count"] == 5000 - 128
    assert [r["square"] for r in square["result"]["results"]] == [
        n * n for n in range(5000 - 128, 5000)
    ]


SLEEPY_LOOP = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata:
      name: sleepy_loop
      path: tests/sleepy_loop
    workload:
      items: [0, 1, 2, 3, 4, 5, 6, 7]
    workflow:
      - step: start
        loop:
          in: "{{ items }}"
          iterator: it
          spec:
            mode: parallel
            max_in_flight: 4
        tool:
          kind: python
          input: {n: "{{ iter.it }}"}
          code: |
            import time
            time.sleep(0.6)
            result = {"n": n}
    """


def test_a_max_in_flight_loop_runs_its_items_side_by_side(first_run, home, tmp_path):
    """`max_in_flight: 4` over 8 sleeping items: up to 4 at once and never more, measured from
    the iterations' own event timestamps (the run's wall time is not asserted)."""
    from airflow_plugin.events.projection import in_flight_peak

    path = write_playbook(tmp_path, "sleepy_loop", SLEEPY_LOOP)
    result = noetlc_run(home, path, "--json")
    assert result.returncode == 0, result.stderr
    report = report_of(result)
    start = report["steps"]["start"]
    assert [r["n"] for r in start["result"]["results"]] == list(range(8))
    assert start["iterations"] == 8
    rows = loop_timeline(home, report["execution_id"])
    peak = in_flight_peak(rows, "start")
    assert 3 <= peak <= 4, peak


FLAKY_PIPELINE = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {{name: flaky_pipeline, path: tests/flaky_pipeline}}
    workflow:
      - step: start
        tool:
          - name: fetch
            kind: python
            code: |
              import pathlib
              marker = pathlib.Path({marker!r})
              tries = int(marker.read_text()) + 1 if marker.exists() else 1
              marker.write_text(str(tries))
              if tries < 3:
                  raise RuntimeError(f"try {{tries}}")
              result = {{"tries": tries}}
            spec:
              policy:
                rules:
                  - when: "{{{{ output.status == 'error' }}}}"
                    then: {{do: retry, attempts: 5}}
                  - else:
                      then: {{do: continue}}
          - name: store
            kind: python
            code: "result = {{'stored': True}}"
    """


def test_json_lists_each_pipeline_task_with_its_attempts(first_run, home, tmp_path):
    text = textwrap.dedent(FLAKY_PIPELINE).format(marker=str(tmp_path / "tries"))
    path = tmp_path / "flaky_pipeline.yaml"
    path.write_text(text)
    result = noetlc_run(home, path, "--json")
    assert result.returncode == 0, result.stderr
    start = report_of(result)["steps"]["start"]
    assert start["pipeline"] == {"fetch": {"attempts": 3}, "store": {"attempts": 1}}
    assert start["tasks"] == {"start": {"state": "success", "attempts": 1}}  # one Airflow try


def test_a_gate_waiting_for_a_human_fails_instead_of_hanging(first_run, home, tmp_path):
    """Through the Airflow side directly, with a hand-written HITL DAG."""
    managed = Home(home)
    request = {"dag_id": "local_gate", "dags": {"local_gate": str(managed.dags / "gate.py")}}
    with locked(managed):
        (managed.dags / "gate.py").write_text(
            "from airflow.providers.standard.operators.empty import EmptyOperator\n"
            "from airflow.providers.standard.operators.hitl import ApprovalOperator\n"
            "from airflow.sdk import DAG\n"
            "PAYLOADS = {'ask': {'step': 'ask'}, 'after': {'step': 'after'}}\n"
            "with DAG(dag_id='local_gate', schedule=None) as dag:\n"
            "    ApprovalOperator(task_id='ask', subject='Go?') >> EmptyOperator(task_id='after')\n"
        )
        try:
            result = subprocess.run(
                [sys.executable, "-m", "airflow_plugin.local", "--log", str(tmp_path / "gate.log")],
                check=False,
                input=json.dumps({**request, "json": True}),
                env=child_environment(managed),
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
            )
        finally:
            (managed.dags / "gate.py").unlink()
    assert result.returncode == 1, result.stderr
    steps = report_of(result)["steps"]
    assert steps["ask"]["state"] == "failed"
    assert steps["ask"]["error"] == (
        "gate 'ask' waits for an answer ('Go?'); "
        "answer it with `noetlc run ... --signal ask=approve|reject`"
    )
    assert steps["after"]["state"] == "not_run"
