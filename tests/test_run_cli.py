"""`noetlc run`: real runs of real playbooks on a real local Airflow, through the CLI.

Every run goes through ``python -m noetl_compile run`` in a subprocess, exactly as a user types
it. Each xdist worker gets its own managed home (one DB initialisation per worker); the first
run of the session creates it, every later run reuses it. The report builder has its own tests
at the end, with runtime events of the kinds a region or loop task emits.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_plugin.events import Event
from airflow_plugin.local.home import Home, locked
from airflow_plugin.local.launch import child_environment
from airflow_plugin.local.report import TaskRow, build_report, render_summary
from airflow_plugin.templating.ids import execution_id_for
from noetl_compile.connections import ConnectionsError, load_connections_file
from tests.harness.run_cli import TIMEOUT, loop_timeline, noetlc_run, report_of

ROOT = Path(__file__).resolve().parents[1]
PLAYBOOKS = ROOT / "playbooks"


def write_playbook(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="session")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("noetlc-run-home")


@pytest.fixture(scope="session")
def first_run(home: Path) -> subprocess.CompletedProcess:
    """The session's first run: it creates the managed home."""
    return noetlc_run(home, PLAYBOOKS / "hello_world.yaml")


DIVIDE = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata:
      name: divide
      path: tests/divide
    workload:
      divisor: 0
      label: none
    workflow:
      - step: start
        tool:
          kind: python
          code: |
            result = {"ok": True}
        next:
          arcs:
            - step: boom
      - step: boom
        tool:
          kind: python
          input:
            divisor: "{{ divisor }}"
            label: "{{ label }}"
          code: |
            result = {"value": 1 / divisor, "label": label}
        next:
          arcs:
            - step: after
      - step: after
        tool:
          kind: python
          code: |
            result = {"after": True}
    """


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


# -- errors before anything runs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["playbooks/missing.yaml"], "no such playbook file: playbooks/missing.yaml"),
        (["playbooks/hello_world.yaml", "--set", "message"], "--set expects KEY=VALUE"),
        (["playbooks/hello_world.yaml", "--conf", "{nope"], "--conf is not valid JSON"),
        (["playbooks/hello_world.yaml", "--conf", "[1]"], "--conf must be a JSON object"),
        (["playbooks/hello_world.yaml", "--bogus"], "unrecognized arguments: --bogus"),
        # a key the workload does not declare would run with the default of the one meant
        (
            ["playbooks/hello_world.yaml", "--set", "mesage=hi"],
            "--set mesage: playbooks/hello_world.yaml declares no workload key 'mesage'; "
            "did you mean 'message'? (declared: message); to add a new key on purpose: "
            "--set-new mesage=hi",
        ),
        (
            ["playbooks/hello_world.yaml", "--conf", '{"Message": 1}'],
            "--conf Message: playbooks/hello_world.yaml declares no workload key 'Message'; "
            "did you mean 'message'?",
        ),
        (
            ["playbooks/hello_world.yaml", "--set-new", "message=x"],
            "--set-new message: playbooks/hello_world.yaml already declares 'message'; use --set",
        ),
    ],
)
def test_usage_errors_exit_2(tmp_path, args, message):
    result = noetlc_run(tmp_path / "unused-home", *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_set_value_the_workload_rejects_is_a_usage_error(first_run, home, tmp_path):
    playbook = write_playbook(tmp_path, "divide", DIVIDE)
    result = noetlc_run(home, playbook, "--set", "divisor=two")
    assert result.returncode == 2
    assert "noetlc: error: --set divisor: expected integer (JSON), got 'two'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_connections_file_is_a_usage_error_without_the_secret(tmp_path):
    connections = tmp_path / "connections.yaml"
    connections.write_text("warehouse: not-a-uri-but-a-s3cret\n")
    result = noetlc_run(
        tmp_path / "unused-home", "playbooks/hello_world.yaml", "--connections", connections
    )
    assert result.returncode == 2
    assert "connection 'warehouse'" in result.stderr and "s3cret" not in result.stderr
    with pytest.raises(ConnectionsError, match="needs `conn_type`"):
        connections.write_text("api: {host: h, password: pw}\n")
        load_connections_file(str(connections))
    connections.write_text("- plain_name\n- {conn_id: pg, conn_type: postgres, port: 5432}\n")
    loaded = load_connections_file(str(connections))
    assert loaded.names == {"plain_name", "pg"}
    assert json.loads(loaded.env["AIRFLOW_CONN_PG"]) == {"conn_type": "postgres", "port": 5432}


def test_compile_errors_print_in_check_format_and_run_nothing(home, tmp_path):
    playbook = write_playbook(
        tmp_path,
        "broken",
        """\
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata:
          name: broken
          path: tests/broken
        workflow:
          - step: start
            tool: {kind: noop}
            next:
              arcs:
                - step: strat
        """,
    )
    text = noetlc_run(home, playbook)
    assert text.returncode == 1
    assert text.stdout.splitlines()[0].startswith(f"{playbook}:11:")
    assert " R201 " in text.stdout.splitlines()[0]
    as_json = noetlc_run(home, playbook, "--json")
    assert as_json.returncode == 1
    report = report_of(as_json)
    assert report["state"] == "failed" and report["diagnostics"][0]["code"] == "R201"


def test_check_findings_print_before_the_run_and_dropped_edges_refuse_it(home, tmp_path):
    """A warning is shown before the run starts (stdout; stderr under --json, whose stdout
    stays one object); a `next` indented under `tool:` is S118, an error: nothing runs."""
    warned = write_playbook(
        tmp_path,
        "warned",
        """\
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: warned, path: tests/warned}
        workflow:
          - step: start
            tool: {kind: python, code: "result = 1"}
          - step: orphan
            tool: {kind: noop}
        """,
    )
    text = noetlc_run(home, warned)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"{warned}:7:") and " F401 [warning] " in lines[0], lines
    assert lines[1].startswith("tests.warned  run ")  # then the run
    as_json = noetlc_run(home, warned, "--json")
    assert report_of(as_json)["state"] == "success"
    assert " F401 [warning] " in as_json.stderr
    dropped = write_playbook(
        tmp_path,
        "dropped",
        """\
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: dropped, path: tests/dropped}
        workflow:
          - step: start
            tool:
              kind: python
              code: "result = 1"
              next:
                arcs: [{step: end}]
          - step: end
            tool: {kind: noop}
        """,
    )
    refused = noetlc_run(home, dropped)
    assert refused.returncode == 1
    assert refused.stdout.splitlines()[0].startswith(f"{dropped}:9:")
    assert " S118 [error] " in refused.stdout.splitlines()[0]
    assert f"{dropped}: not run: the playbook does not compile" in refused.stdout


# -- the report builder ------------------------------------------------------------------------


def _event(name: str, step: str, status: str = "success", **fields: Any) -> Event:
    return Event(name=name, entity="step", entity_id=step, status=status, step=step, **fields)


REGION = {
    "start": {"step": "start", "routing": {}},
    "region_fetch": {
        "region": "region_fetch",
        "entry": ["fetch"],
        "steps": {"fetch": {"step": "fetch"}, "store": {"step": "store"}},
        "exits": ["done"],
    },
    "done": {"step": "done"},
}


def test_report_attributes_a_failure_inside_a_region_to_its_step():
    tasks = [
        TaskRow("start", state="success", try_number=1, duration=0.2, end=1.0),
        TaskRow(
            "region_fetch",
            state="failed",
            try_number=1,
            error="step 'store' failed: KeyError: 'items'",
        ),
        TaskRow("done", state="upstream_failed"),
    ]
    events = [
        _event("StepStarted", "fetch", "in_progress"),
        _event("ToolStarted", "fetch", "in_progress"),
        _event("ToolStarted", "fetch", "in_progress"),  # a retried call: two tool calls
        _event("StepFinished", "fetch", duration=0.5, data={"result": {"page": 1}}),
        _event("StepStarted", "store", "in_progress"),
        _event("ToolStarted", "store", "in_progress"),
        _event(
            "StepFinished",
            "store",
            "error",
            data={"error": {"type": "KeyError", "message": "'items'"}},
        ),
    ]
    report = build_report(
        payloads=REGION,
        tasks=tasks,
        xcoms={"start": {"result": {"ok": 1}, "ctx": {"page": 1}}},
        events=events,
        state="failed",
    )
    steps = report["steps"]
    assert steps["fetch"]["state"] == "success" and steps["fetch"]["result"] == {"page": 1}
    assert steps["fetch"]["attempts"] == 2 and steps["fetch"]["duration"] == 0.5
    assert steps["store"]["state"] == "failed" and steps["store"]["error"] == "KeyError: 'items'"
    assert steps["done"]["state"] == "not_run"
    assert report["errors"] == [] and report["ctx"] == {"page": 1}
    summary = render_summary(report, 1.0, "/tmp/x.log")
    assert summary.count("store") == 1 and "step store failed: KeyError: 'items'" in summary


def test_report_ctx_is_the_workload_then_the_payload_then_the_writes_secrets_hidden():
    report = build_report(
        payloads={"start": {"step": "start"}},
        tasks=[TaskRow("start", state="success", try_number=1, end=1.0)],
        xcoms={"start": {"result": 1, "ctx": {"page": 2, "seen": True}}},
        variables={"page": 1, "api_password": "hunter2", "region": "eu"},
    )
    assert report["ctx"] == {"page": 2, "api_password": "***", "region": "eu", "seen": True}


def test_report_lists_pipeline_tasks_with_their_attempts():
    payloads = {
        "fetch": {
            "step": "fetch",
            "pipeline": [{"name": "get", "kind": "http"}, {"kind": "python"}, {"name": "save"}],
        },
        "single": {"step": "single", "tool": {"kind": "python"}},
        "ruled": {
            "step": "ruled",
            "tool": {"kind": "python", "spec": {"policy": {"rules": [{"then": {"do": "retry"}}]}}},
        },
    }
    tasks = [TaskRow(t, state="success", try_number=1, end=1.0) for t in payloads]

    def started(step, label, attempt=1):
        return _event(
            "ToolStarted", step, "in_progress", tool_run_id=f"{step}:{label}", attempt=attempt
        )

    events = [
        started("fetch", "get"),
        started("fetch", "get", 2),
        started("fetch", "get", 3),
        started("fetch", "task_1"),
        started("single", "single"),
        started("ruled", "ruled_task"),
        started("ruled", "ruled_task", 2),
    ]
    steps = build_report(payloads=payloads, tasks=tasks, xcoms={}, events=events)["steps"]
    assert steps["fetch"]["pipeline"] == {
        "get": {"attempts": 3},
        "task_1": {"attempts": 1},
        "save": {"attempts": 0},  # never reached
    }
    assert "pipeline" not in steps["single"]
    assert steps["ruled"]["pipeline"] == {"ruled_task": {"attempts": 2}}


def test_a_loop_steps_duration_is_its_span_when_iterations_overlap():
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def at(name, seconds, **fields):
        return _event(name, "items", timestamp=t0 + timedelta(seconds=seconds), **fields)

    events = [
        at("StepStarted", 0.0, iteration=0),
        at("StepStarted", 0.1, iteration=1),
        at("StepFinished", 1.0, iteration=0, duration=1.0),
        at("StepFinished", 1.1, iteration=1, duration=1.0),
        at("StepStarted", 1.2),  # the tail's aggregation
        at("StepFinished", 1.25, duration=0.05),
    ]
    payloads = {"items": {"step": "items", "loop": {"iterator": "x", "in": [1, 2]}}}
    tasks = [TaskRow("items.tail", state="success", try_number=1, end=2.0)]
    report = build_report(payloads=payloads, tasks=tasks, xcoms={}, events=events)
    assert report["steps"]["items"]["duration"] == 1.25  # not 2.05, the sum


def test_report_without_events_falls_back_to_tasks_and_xcom():
    tasks = [
        TaskRow("start", state="success", try_number=1, end=1.0),
        TaskRow("region_fetch", state="failed", try_number=1, error="step 'store' failed: boom"),
        TaskRow("done", state="upstream_failed"),
    ]
    steps = build_report(payloads=REGION, tasks=tasks, xcoms={}, state="failed")["steps"]
    assert [steps[s]["state"] for s in ("start", "fetch", "store", "done")] == [
        "success",
        "not_run",
        "failed",
        "not_run",
    ]
    assert steps["store"]["error"] == "boom" and steps["start"]["attempts"] == 1


def test_report_counts_loop_iterations_and_merges_ctx_in_completion_order():
    payloads = {
        "items": {
            "step": "items",
            "loop": {
                "iterator": "x",
                "body": {"steps": {"work": {"step": "work"}}},
                "end": {"step": "end_items"},
            },
        },
        "last": {"step": "last"},
    }
    tasks = [
        TaskRow("items.head", state="success", try_number=1, end=1.0),
        TaskRow("items.body", map_index=0, state="success", try_number=1),
        TaskRow("items.body", map_index=1, state="success", try_number=2),
        TaskRow("items.tail", state="success", try_number=1, end=3.0),
        TaskRow("last", state="success", try_number=1, end=2.0),  # ended before the tail
    ]
    xcoms = {
        "items.tail": {
            "result": [1, 2],
            "results": {"work": 2, "end_items": {"n": 2}},
            "ctx": {"n": "tail"},
        },
        "last": {"result": "ok", "ctx": {"n": "last", "m": 1}, "vars": {"v": 1}},
    }
    events = [_event("LoopIterationCompleted", "items") for _ in range(3)]
    report = build_report(payloads=payloads, tasks=tasks, xcoms=xcoms, events=events)
    steps = report["steps"]
    assert list(steps) == ["items", "work", "end_items", "last"]
    assert steps["items"]["result"] == [1, 2] and steps["items"]["attempts"] == 3
    assert steps["items"]["iterations"] == 3 and "iterations" not in steps["last"]
    assert steps["items"]["tasks"]["items.body"] == {
        "state": "success",
        "attempts": 2,
        "instances": 2,
    }
    assert steps["work"]["result"] == 2 and steps["end_items"]["result"] == {"n": 2}
    assert report["ctx"] == {"n": "tail", "m": 1} and report["vars"] == {"v": 1}
    assert report["state"] == "success"


# -- live progress on a terminal ------------------------------------------------------------------

NAP = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: nap, path: tests/nap}
    workflow:
      - step: start
        tool: {kind: python, code: "result = 1"}
        next: {arcs: [{step: nap}]}
      - step: nap
        tool:
          kind: python
          code: |
            import time
            time.sleep(10)
            result = {"slept": 10}
"""


# Cursor and erase sequences of rich's live display (CSI ... letter); a bounded class, linear.
_CSI = re.compile(rb"\x1b\[[0-9;?]{0,16}[A-Za-z]")


def _read_terminal(leader: int, process: subprocess.Popen, started: float) -> list:
    """(seconds since start, text) for every line or redrawn status line the command wrote to
    its terminal (rich redraws its live line after a carriage return)."""
    lines, pending = [], b""
    deadline = started + TIMEOUT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        pending += chunk
        *complete, pending = re.split(rb"[\r\n]", pending)
        now = time.monotonic() - started
        lines += [(now, t) for raw in complete if (t := _CSI.sub(b"", raw).decode().rstrip())]
    return lines


def test_a_terminal_sees_the_run_start_at_once_and_a_heartbeat_during_a_long_step(
    first_run, home, tmp_path
):
    playbook = write_playbook(tmp_path, "nap", NAP)
    leader, follower = pty.openpty()
    environ = {k: v for k, v in os.environ.items() if k not in ("NOETL_STRICT", "NOETL_NESTED")}
    environ["NOETLC_HOME"] = str(home)
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "noetl_compile", "run", str(playbook)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=ROOT,
        env=environ,
    )
    os.close(follower)
    try:
        lines = _read_terminal(leader, process, started)
    finally:
        os.close(leader)
        process.wait(timeout=60)
    assert process.returncode == 0, lines
    text = [line for _, line in lines]
    # The first line comes before Airflow is imported: well within a second of the start.
    first_at, first = lines[0]
    assert first == f"noetlc: running {playbook} (starting Airflow)" and first_at < 1.0, lines
    at = {}
    for t, line in lines:
        if line.startswith("  ") and len(line.split()) >= 2:
            at.setdefault(" ".join(line.split()[:2]), t)
    assert at["nap started"] < at["nap success"], lines
    # On a terminal the heartbeat is rich's live status line, redrawn while the step sleeps:
    # from 3 s on, the seconds counting up, all before the step's end.
    beats = [(t, line) for t, line in lines if line.startswith("  nap    running  ")]
    seconds = sorted({int(line.split()[-1].removesuffix("s")) for _, line in beats})
    assert len(seconds) >= 2 and seconds[0] >= 3, text
    # (a redraw read in the same chunk as the success line shares its time)
    assert all(at["nap started"] + 2.5 < t <= at["nap success"] for t, _ in beats), lines
    # The total is the command's wall time, from its first line to its last.
    total = next(line for line in text if line.startswith("success in "))
    wall = float(total.removeprefix("success in ").removesuffix("s"))
    assert abs(wall - (lines[-1][0] - first_at)) < 2.0, (wall, lines)


def test_the_events_command_a_run_prints_answers_whatever_airflow_home_says(
    first_run, home, tmp_path
):
    """Every Airflow user's shell sets AIRFLOW_HOME; `noetlc run` still writes to its managed
    home, and the `noetlc events ID` it prints finds the run there, saying which log it read."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"AIRFLOW_HOME": str(elsewhere)}
    result = noetlc_run(home, PLAYBOOKS / "hello_world.yaml", env=env)
    assert result.returncode == 0, result.stderr
    command = next(line for line in result.stdout.splitlines() if line.startswith("events  "))
    printed = command.rsplit("(", 1)[1].rstrip(")").split()  # ['noetlc', 'events', ID]
    assert printed[:2] == ["noetlc", "events"]
    environ = {**os.environ, "NOETLC_HOME": str(home), **env}
    outputs = []
    for args, expected in (
        (printed[1:], ["WorkflowStarted", "StepFinished", "PlaybookProcessed"]),
        (["status", printed[2]], ["greet  success"]),
    ):
        shown = subprocess.run(
            [sys.executable, "-m", "noetl_compile", *args],
            cwd=ROOT,
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert shown.returncode == 0, shown.stderr
        assert all(name in shown.stdout for name in expected), shown.stdout
        outputs.append(shown.stdout)
    assert outputs[0].splitlines()[0] == f"event log: sqlite {home / 'noetl' / 'events.db'}"


def test_heartbeats_count_loop_items_from_the_runs_events():
    import io

    from airflow_plugin.local.live import Live

    stream = io.StringIO()
    live = Live({}, stream, width=6, after=3.0, every=3.0)
    try:
        live.task_started("d", "r", "square")
        loop = {"entity": "loop", "entity_id": "square", "step": "square"}
        live.observe(Event(name="LoopStarted", status="in_progress", data={"total": 5}, **loop))
        for _ in range(2):
            live.observe(Event(name="LoopIterationCompleted", status="success", **loop))
        since = live.current[1]
        assert live.heartbeat(since + 1.0) is None  # too early for a first heartbeat
        assert live.heartbeat(since + 4.0) == "  square  running  4s  (loop 2/5 items)"
        assert live.heartbeat(since + 5.0) is None  # one every 3 s
        live.task_finished()
        assert live.heartbeat(since + 9.0) is None  # nothing runs
        live.task_started("d", "r", "square")  # the next mapped item: same step, same start
        assert live.heartbeat(since + 9.0) == "  square  running  9s  (loop 2/5 items)"
    finally:
        live.close()
    written = stream.getvalue()
    assert written.startswith("  square  started\n") and written.count("started") == 1


def test_heartbeats_count_the_pages_a_paginating_step_fetched():
    import io

    from airflow_plugin.local.live import Live

    live = Live({}, io.StringIO(), width=10, after=3.0, every=3.0)
    try:
        live.task_started("d", "r", "fetch_page")
        tool = {"entity": "tool", "entity_id": "fetch_page:http", "step": "fetch_page"}
        since = live.current[1]
        assert live.heartbeat(since + 4.0) == "  fetch_page  running  4s"  # no page yet
        live.observe(Event(name="ToolCompleted", status="success", data={"kind": "http"}, **tool))
        assert live.heartbeat(since + 7.0) == "  fetch_page  running  7s  (1 page fetched)"
        live.observe(Event(name="ToolErrored", status="error", data={"kind": "http"}, **tool))
        live.observe(Event(name="ToolCompleted", status="success", data={"kind": "python"}, **tool))
        for _ in range(2):
            live.observe(
                Event(name="ToolCompleted", status="success", data={"kind": "http"}, **tool)
            )
        # A failed call and a python call are no pages; the status line (rich) says the same.
        assert live.heartbeat(since + 10.0) == "  fetch_page  running  10s  (3 pages fetched)"
        assert live.status(since + 11.0) == "  fetch_page  running  11s  (3 pages fetched)"
    finally:
        live.close()
