"""A sequential loop stops at its first failed item where NoETL's engine does (issue 33).

NoETL 138c10ed and NoETL 5 issue no item after a failed one (``loop_stops_at_failed_item``;
recorded: tests/differential/cases/loops/loop_item_fails); v1 and case-v2 run every item. A
parallel loop of 138c10ed issues none either (``parallel_loop_stops_at_failed_item``). The
loop here "charges" one row per item into a real DuckDB table whose CHECK refuses item 3: after
it, no row of a later item may exist. Under ``dag.test()`` (compiled DAG, mapped body) and in
one process (``run_loop``: regions, inline children, loops writing ctx), the same outcome.
"""

from __future__ import annotations

import re
import textwrap

import duckdb
import pytest

from airflow_plugin.events import MemoryRecorder, set_default_recorder
from airflow_plugin.runtime.loop_items import instance_count
from airflow_plugin.runtime.step import StepFailed
from noetl_compile.cli import main
from noetl_compile.engine_profiles import profile_for

CANONICAL = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: {name}, path: loops/{name}}}
workload:
  db: "{db}"
workflow:
  - step: start
    tool:
      kind: duckdb
      database: "{{{{ workload.db }}}}"
      command: CREATE TABLE charges (n INTEGER CHECK (n <> 3))
    next: [{{step: charge}}]
  - step: charge
    loop:
      in: "{{{{ range({count}) | list }}}}"
      iterator: n
      spec: {{mode: {mode}}}
    tool:
      kind: duckdb
      database: "{{{{ workload.db }}}}"
      command: "INSERT INTO charges VALUES ({{{{ iter.n }}}})"
    next: [{{step: after}}]
  - step: after
    tool: {{kind: noop}}
"""

CASE_V2 = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: {name}, path: loops/{name}}}
workload:
  db: "{db}"
workflow:
  - step: start
    tool:
      kind: duckdb
      database: "{{{{ workload.db }}}}"
      command: CREATE TABLE charges (n INTEGER CHECK (n <> 3))
    next: [{{step: charge}}]
  - step: charge
    loop:
      in: "{{{{ range({count}) | list }}}}"
      iterator: n
    tool:
      kind: duckdb
      database: "{{{{ workload.db }}}}"
      command: "INSERT INTO charges VALUES ({{{{ n }}}})"
    case:
      - when: "{{{{ event.name == 'call.done' }}}}"
        then: {{next: [{{step: after}}]}}
  - step: after
    tool: {{kind: noop}}
"""


@pytest.fixture
def charge(airflow_db, run_dag, tmp_path):
    """Compile and run a charging loop -> (run, rows charged, iterations started)."""

    def run(name: str, template: str, count: int = 10, mode: str = "sequential"):
        db = tmp_path / f"{name}.duckdb"
        source = tmp_path / f"{name}.yaml"
        text = template.format(name=name, db=db, count=count, mode=mode)
        source.write_text(textwrap.dedent(text))
        out_dir = tmp_path / "dags"
        assert main(["compile", str(source), "-o", str(out_dir)]) == 0
        (dag_file,) = out_dir.glob(f"*{name}*.py")
        recorder = MemoryRecorder()
        previous = set_default_recorder(recorder)
        try:
            out = run_dag(dag_file.read_text(), f"loops.{name}")
        finally:
            set_default_recorder(previous)
        with duckdb.connect(str(db), read_only=True) as con:
            rows = [n for (n,) in con.execute("SELECT n FROM charges ORDER BY n").fetchall()]
        started = sorted(
            e.iteration for e in recorder.named("LoopIterationStarted") if e.step == "charge"
        )
        return out, rows, started

    return run


def test_canonical_sequential_loop_charges_nothing_after_the_failed_item(charge):
    out, rows, started = charge("seq_stop", CANONICAL, count=10)
    assert out.state == "failed", out.states
    assert rows == [0, 1, 2]
    # NoETL issues items 0..3 (3 fails) and nothing after: no later item even starts.
    assert started == [0, 1, 2, 3]
    assert out.states["after"] != "success"
    # One instance runs the items in index order (a sequential loop runs one at a time).
    assert len(out.xcom["charge.head"]) == 1


def test_past_max_map_length_the_loop_still_stops_at_the_failed_item(charge):
    # 200 items with max_map_length 64 (tests/conftest.py): still one instance, in order.
    out, rows, started = charge("seq_stop_big", CANONICAL, count=200)
    assert out.state == "failed"
    assert rows == [0, 1, 2] and started == [0, 1, 2, 3]


def test_case_v2_sequential_loop_runs_every_item_then_fails(charge):
    # dc55c492 counts the failed item and issues the next (engine.py:1521).
    assert not profile_for({"dialect": "case-v2"}).loop_stops_at_failed_item
    out, rows, started = charge("seq_go_on", CASE_V2, count=6)
    assert out.state == "failed", out.states
    assert rows == [0, 1, 2, 4, 5]
    assert started == list(range(6))


def test_canonical_parallel_loop_issues_no_item_after_the_failed_one(charge):
    # 138c10ed tops a parallel loop up only on an item's call.done; the failed item's
    # call.error leaves nothing pending, so command.failed issues nothing (engine.py:6103).
    # Under dag.test() the loop is one instance running max_in_flight items on threads.
    assert profile_for({"dialect": "canonical"}).parallel_loop_stops_at_failed_item
    out, rows, started = charge(
        "par_stop",
        CANONICAL.replace("{{mode: {mode}}}", "{{mode: parallel, max_in_flight: 1}}"),
        count=8,
    )
    assert out.state == "failed", out.states
    assert rows == [0, 1, 2] and started == [0, 1, 2, 3]
    assert out.states["after"] != "success"
    # Four at a time: items already running when item 3 fails finish, none starts after it.
    out, rows, started = charge(
        "par_stop_4",
        CANONICAL.replace("{{mode: {mode}}}", "{{mode: parallel, max_in_flight: 4}}"),
        count=60,
    )
    assert out.state == "failed"
    assert 3 not in rows and {0, 1, 2} <= set(rows)
    assert len(started) < 60 and set(rows) == set(started) - {3}


def test_no_mapped_instance_starts_an_item_after_a_sibling_failed(charge, monkeypatch):
    # Deployed, a parallel loop that fits the run's slots is one mapped instance per item
    # (runtime/loop_items.instance_count), separate processes. The loop operators are given
    # that deployed shape here (one instance per item, no threads); dag.test() then runs the
    # instances one after another, in no fixed order. Every item fails here (the CHECK holds
    # for none): the first instance to run fails and pushes the loop's stop flag (an XCom);
    # every other instance reads it before its item and starts none (138c10ed issues no item
    # after a failed one: parallel_loop_stops_at_failed_item). Without the flag all 8 start.
    import airflow_plugin.operators.loop as loop_operators

    monkeypatch.setattr(loop_operators, "runs_in_process", lambda: False)
    text = CANONICAL.replace("{{mode: {mode}}}", "{{mode: parallel}}")
    out, rows, started = charge(
        "par_deployed_stop", text.replace("CHECK (n <> 3)", "CHECK (n < 0)"), count=8
    )
    assert len(out.xcom["charge.head"]) == 8  # eight instances, one item each
    assert out.state == "failed", out.states
    assert rows == [] and len(started) == 1, started
    assert out.states["after"] != "success"


def test_an_async_loop_of_an_engine_that_goes_on_runs_every_instance(charge):
    # An async loop under dag.test() is one instance per item already. dc55c492 issues the
    # next item after a failed one: every instance runs its item, none reads a stop flag.
    text = CASE_V2.replace("      iterator: n\n", "      iterator: n\n      mode: async\n")
    out, rows, started = charge("async_go_on", text, count=6)
    assert len(out.xcom["charge.head"]) == 6
    assert out.state == "failed"
    assert rows == [0, 1, 2, 4, 5] and started == list(range(6))


def test_case_v2_and_noetl5_parallel_loops_run_every_item():
    # dc55c492 counts a failed item and issues the next whatever the mode (engine.py:1521);
    # NoETL 5 dispatches a parallel loop's items all at once (orchestrator.rs:1829).
    for dialect in ("case-v2", "noetl5", "v1"):
        assert not profile_for({"dialect": dialect}).parallel_loop_stops_at_failed_item


def test_in_process_parallel_loop_follows_the_profile(tmp_path):
    for dialect, expected in (("canonical", [0, 1, 2]), ("case-v2", [0, 1, 2, 4, 5, 6])):
        rows, _ = _in_process(dialect, tmp_path, mode="parallel")
        assert rows == expected, dialect


def _in_process(dialect: str, tmp_path, mode: str = "sequential"):
    """Charge items 0-6 in one process; item 3 breaks the table's CHECK. Returns the rows kept
    and the step's failure."""
    from airflow_plugin.runtime.loop import run_loop

    db = tmp_path / f"{dialect}_{mode}.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE charges (n INTEGER CHECK (n <> 3))")
    payload = {
        "step": "charge",
        "dialect": dialect,
        "tool": {
            "kind": "duckdb",
            "database": str(db),
            "command": "INSERT INTO charges VALUES ({{ iter.n }})",
        },
        "loop": {"in": "{{ range(7) | list }}", "iterator": "n", "mode": mode},
    }
    inputs = {"workload": {}, "results": {}, "ctx": {}, "vars": {}, "execution_id": 5}
    with pytest.raises(StepFailed) as failed:
        run_loop(payload, inputs)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = [n for (n,) in con.execute("SELECT n FROM charges ORDER BY n").fetchall()]
    return rows, failed.value


def test_in_process_loop_follows_the_same_profile(tmp_path):
    rows, failure = _in_process("canonical", tmp_path)
    assert rows == [0, 1, 2]
    assert "charge" in str(failure)
    rows, _ = _in_process("case-v2", tmp_path)
    assert rows == [0, 1, 2, 4, 5, 6]


@pytest.mark.parametrize(
    ("mode", "items", "max_in_flight", "templated", "in_process", "expected"),
    [
        ("sequential", 5000, None, False, False, 1),
        ("sequential", 5000, None, False, True, 1),
        ("sequential", 3, None, False, False, 1),
        ("parallel", 5000, None, False, False, 16),  # the deployment's 16 slots
        ("parallel", 5000, 4, False, False, 4),  # the loop's own bound
        ("async", 5000, None, False, False, 16),
        ("parallel", 4, 2, False, False, 4),  # fits the slots: one per item, named by it
        ("parallel", 16, None, False, False, 16),
        ("parallel", 17, 2, False, False, 2),
        ("parallel", 5, 2, True, False, 2),  # templated: the count is the bound
        ("parallel", 5000, None, False, True, 1),  # one process: one instance on threads
        ("async", 5000, None, False, True, 64),  # one process: per item, up to max_map_length
        ("async", 5000, 4, False, True, 64),  # a static bound is max_active_tis_per_dagrun
        ("async", 5000, 4, True, True, 4),  # a templated bound in one process
        ("parallel", 0, None, False, False, 0),
    ],
)
def test_instance_count(mode, items, max_in_flight, templated, in_process, expected):
    got = instance_count(
        mode,
        items,
        map_limit=64,
        slots=16,
        max_in_flight=max_in_flight,
        templated=templated,
        in_process=in_process,
    )
    assert got == expected


def test_a_body_instance_logs_where_its_time_went(charge, capfd):
    # One INFO line per body instance: start-up, inputs, the items (and per item), the end,
    # the events not yet stored and the XCom it pushes (issue 32: a deployed instance costs
    # seconds where its items cost milliseconds; this line says which part).
    out, rows, _ = charge("seq_phases", CANONICAL, count=3)
    assert out.state == "success", out.states
    assert rows == [0, 1, 2]
    captured = capfd.readouterr()
    log = captured.out + captured.err
    (line,) = [x for x in log.splitlines() if "NoETL loop body charge: start-up " in x]
    assert re.search(r"inputs \d+\.\d\ds, 3 items \d+\.\d\ds \(\d+\.\d\d ms each\)", line), line
    assert re.search(
        r"end \d+\.\d\ds; CPU (\d+\.\d\d)s before execute, (\d+\.\d\d) ms per item; "
        r"events not yet stored \S+; XCom 3 records, \d+ bytes",
        line,
    ), line
    # The XCom leaves out what the tail would read as empty anyway.
    body = out.xcom["charge.body"]
    records = [r for part in (body if isinstance(body, list) else [body]) for r in part["records"]]
    assert [r["index"] for r in records] == [0, 1, 2]
    # (a canonical iteration's ctx holds its iterator: kept; its next and vars are empty).
    assert all(r["ctx"] == {"n": r["index"], "loop_index": r["index"]} for r in records), records
    assert all(r["status"] == "ok" and not {"vars", "next"} & set(r) for r in records), records


@pytest.mark.parametrize(
    ("worker_slots", "expected"),
    [(None, 16), ("8", 8), ("64", 16), ("0", 16), ("eight", 16)],
)
def test_the_head_makes_no_more_instances_than_the_workers_run_at_once(
    monkeypatch, worker_slots, expected
):
    # `[noetl] worker_slots` (the Celery workers' concurrency, summed: the stack sets 2 x 4)
    # bounds the head's slots beside parallelism and max_active_tasks: 5,000 items then make
    # one wave of 8 full instances on the stack instead of 16 in two waves. Unset, 0 or not a
    # number, it bounds nothing.
    pytest.importorskip("airflow")
    from airflow.sdk import DAG

    from airflow_plugin.operators.loop import NoetlLoopHeadOperator

    payload = {
        "step": "square",
        "dialect": "canonical",
        "tool": {"kind": "python", "code": "result = 1"},
        "loop": {"iterator": "n", "mode": "parallel", "in": "{{ range(5000) | list }}"},
    }
    monkeypatch.setenv("AIRFLOW__CORE__PARALLELISM", "32")
    if worker_slots is None:
        monkeypatch.delenv("AIRFLOW__NOETL__WORKER_SLOTS", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW__NOETL__WORKER_SLOTS", worker_slots)
    with DAG(dag_id="slots", schedule=None, max_active_tasks=16):
        head = NoetlLoopHeadOperator(task_id="head", payload=payload, reads={})
    slots = head._slots()
    assert slots == expected
    assert instance_count(
        "parallel", 5000, map_limit=1024, slots=slots, max_in_flight=16, templated=False,
        in_process=False,
    ) == expected  # fmt: skip


def test_a_deployed_body_freezes_the_heap_and_an_in_process_one_does_not(charge):
    # A task process of its own (no in-process Execution API): everything alive before the
    # items leaves the collector's reach, so the collections the items trigger do not walk
    # Airflow's heap again and again (issue 32).
    import gc
    import subprocess
    import sys

    probe = (
        "import gc\n"
        "from airflow_plugin.operators.base import freeze_heap\n"
        "before = gc.get_freeze_count()\n"
        "freeze_heap()\n"
        "print('frozen', before, gc.get_freeze_count())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("frozen ")]
    before, after = map(int, line.split()[1:])
    assert before == 0 and after > 1000, done.stdout
    # Under dag.test() every task runs in this process: what a task frees must stay
    # collectable, so the body leaves the collector as it found it.
    frozen = gc.get_freeze_count()
    out, rows, _ = charge("heap_in_process", CANONICAL, count=3)
    assert out.state == "success" and rows == [0, 1, 2]
    assert gc.get_freeze_count() == frozen
