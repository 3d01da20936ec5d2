"""A fused loop (``metadata.noetlc.fuse``; lower/fuse.py ``loop_folds``) run for real under
``dag.test()``: its head runs the bare entry step, its tail the chain after the loop, and every
step still ends as it does unfused: its result, its events, a failure red on the task that ran
it, a branch not taken left unrun, an exit routed to. The inline child catalog reads a fused
DAG's steps from its payloads."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from airflow_plugin.events import MemoryRecorder, set_default_recorder
from noetl_compile.cli import main

# Canonical: in it (and in NoETL 5) every arc takes a failed call, so a trail ends at a leaf.
PLAYBOOK = """
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: {name}
  path: fused/{name}
  noetlc:
    fuse: {fuse}
workload:
  cities: [Paris, Oslo, Cairo]
  divisor: 1
workflow:
  - step: start
    tool: {{kind: noop}}
    next:
      arcs:
        - step: measure
  - step: measure
    loop:
      in: "{{{{ cities }}}}"
      iterator: city
      spec: {{mode: parallel}}
    tool:
      kind: python
      input:
        city: "{{{{ iter.city }}}}"
      code: |
        result = {{"letters": len(city)}}
    next:
      arcs:
        - step: total
          when: "{{{{ event.name == 'loop.done' and workload.divisor != 7 }}}}"
  - step: total
    tool:
      kind: python
      input:
        rows: "{{{{ measure.results }}}}"
        divisor: "{{{{ workload.divisor }}}}"
      code: |
        result = {{"letters": sum(r["letters"] for r in rows) // divisor}}
"""

# case-v2 (dc55c492): a plain `next` takes no failed call, so the trail goes on past `total`;
# `done`, a loop, is the trail's exit.
CASE_V2 = """
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: {name}
  path: fused/{name}
  noetlc:
    fuse: {fuse}
workload:
  cities: [Paris, Oslo, Cairo]
workflow:
  - step: start
    tool: {{kind: noop}}
    next: [{{step: measure}}]
  - step: measure
    loop:
      in: "{{{{ workload.cities }}}}"
      iterator: city
    tool:
      kind: python
      input: {{city: "{{{{ city }}}}"}}
      code: |
        result = {{"letters": len(city)}}
    next: [{{step: total}}]
  - step: total
    tool:
      kind: python
      code: |
        result = {{"total": 14}}
    next: [{{step: note}}]
  - step: note
    tool: {{kind: noop}}
    case:
      - when: "{{{{ event.name == 'call.done' }}}}"
        then: {{next: [{{step: done}}]}}
  - step: done
    loop:
      in: "{{{{ [1, 2] }}}}"
      iterator: n
    tool:
      kind: python
      input: {{n: "{{{{ n }}}}"}}
      code: |
        result = {{"n": n}}
"""


@pytest.fixture
def run_fused(airflow_db, run_dag, tmp_path):
    def run(name: str, *, fuse: bool = True, template: str = PLAYBOOK, conf=None):
        source = tmp_path / f"{name}.yaml"
        source.write_text(textwrap.dedent(template.format(name=name, fuse=str(fuse).lower())))
        out = tmp_path / "dags"
        assert main(["compile", str(source), "-o", str(out)]) == 0
        (dag_file,) = out.glob(f"*{name}*.py")
        recorder = MemoryRecorder()
        previous = set_default_recorder(recorder)
        try:
            result = run_dag(dag_file.read_text(), f"fused.{name}", conf)
        finally:
            set_default_recorder(previous)
        return result, recorder, dag_file.read_text()

    return run


def _finished(recorder: MemoryRecorder) -> dict[str, tuple[str, str]]:
    """step -> (status, task id) of each step's last StepFinished outside the iterations."""
    return {
        e.step: (e.status, e.task_id)
        for e in recorder.named("StepFinished")
        if e.iteration is None and e.step
    }


def test_the_head_runs_start_and_the_tail_runs_the_step_after_the_loop(run_fused):
    out, recorder, text = run_fused("chain")
    assert out.state == "success", out.states
    assert sorted(out.states) == ["measure.body", "measure.head", "measure.tail"]
    tail = out.xcom["measure.tail"]
    # The task's own result is the loop's; the trail's is beside it by name.
    assert tail["result"]["stats"] == {"total": 3, "success": 3, "failed": 0}
    assert tail["results"]["total"] == {"letters": 5 + 4 + 5}
    assert _finished(recorder) == {
        "start": ("success", "measure.head"),
        "measure": ("success", "measure.tail"),
        "total": ("success", "measure.tail"),
    }
    assert 'task_display_name="head (start, items)"' in text
    assert 'task_display_name="tail (collect, total)"' in text


def test_fused_and_unfused_runs_end_alike(run_fused):
    fused, fused_events, _ = run_fused("alike_fused")
    plain, plain_events, _ = run_fused("alike_plain", fuse=False)
    assert fused.state == plain.state == "success"
    assert len(plain.states) == len(fused.states) + 2  # start and total had tasks
    assert plain.xcom["total"]["result"] == fused.xcom["measure.tail"]["results"]["total"]
    assert {s: v[0] for s, v in _finished(plain_events).items()} == {
        s: v[0] for s, v in _finished(fused_events).items()
    }


def test_a_trail_step_that_fails_fails_the_tail_with_its_traceback(run_fused, capfd):
    out, recorder, _ = run_fused("failing", conf={"divisor": 0})
    assert out.state == "failed", out.states
    assert out.states["measure.tail"] == "failed"
    assert out.states["measure.body"] == "success"
    finished = _finished(recorder)
    assert finished["total"] == ("error", "measure.tail")
    assert finished["measure"] == ("success", "measure.tail")  # the loop itself ended well
    log = "".join(capfd.readouterr())
    assert "NoETL step total tool error:" in log
    assert "Traceback (most recent call last)" in log and "ZeroDivisionError" in log


def test_a_loop_that_does_not_route_to_its_trail_leaves_it_unrun(run_fused):
    out, recorder, _ = run_fused("not_taken", conf={"divisor": 7})
    assert out.state == "success", out.states
    tail = out.xcom["measure.tail"]
    assert tail["result"]["stats"]["total"] == 3
    assert set(tail["results"]) == {"measure"}
    assert set(_finished(recorder)) == {"start", "measure"}


def test_the_trail_runs_a_chain_and_routes_to_the_task_after_it(run_fused):
    out, recorder, text = run_fused("exit", template=CASE_V2)
    assert out.state == "success", out.states
    assert 'task_display_name="tail (collect, total, note)"' in text
    assert sorted(out.states) == [
        "done.body", "done.head", "done.tail", "measure.body", "measure.head", "measure.tail",
    ]  # fmt: skip
    assert out.xcom["measure.tail"]["results"]["total"] == {"total": 14}
    assert out.xcom["measure.tail"]["next"] == ["done"]
    assert out.xcom["done.tail"]["result"]["stats"]["total"] == 2
    finished = _finished(recorder)
    assert finished["note"] == ("success", "measure.tail")
    assert finished["done"] == ("success", "done.tail")


def test_the_inline_catalog_reads_a_fused_dag_s_steps(tmp_path):
    pytest.importorskip("airflow")
    from airflow_plugin.runtime.catalog import find_playbook

    source = tmp_path / "catalogued.yaml"
    source.write_text(textwrap.dedent(CASE_V2.format(name="catalogued", fuse="true")))
    out = tmp_path / "dags"
    assert main(["compile", str(source), "-o", str(out)]) == 0
    found = find_playbook("fused.catalogued", out)
    assert found.entry == ["start"]
    assert list(found.steps) == ["start", "measure", "total", "note", "done"]
    assert Path(found.file).name == "catalogued.py"


REGION = """
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: {name}
  path: fused/{name}
  noetlc:
    fuse: {fuse}
workflow:
  - step: start
    tool: {{kind: python, code: "result = {{'n': 0}}"}}
    next:
      arcs:
        - step: boom
  - step: boom
    tool:
      kind: python
      input: {{n: "{{{{ start.n }}}}"}}
      code: |
        result = {{"x": 1 // n}}
"""


def test_a_fused_run_logs_the_traceback_of_the_member_that_failed(run_fused, capfd):
    # The same for a fused chain (a region task): the failed call's traceback is in the log
    # of the task that ran it, as a step's own task logs it.
    out, recorder, _ = run_fused("region_boom", template=REGION)
    assert out.state == "failed" and out.states["fused_start"] == "failed", out.states
    assert _finished(recorder)["boom"] == ("error", "fused_start")
    log = "".join(capfd.readouterr())
    assert "NoETL step boom tool error:" in log
    assert "Traceback (most recent call last)" in log and "ZeroDivisionError" in log
