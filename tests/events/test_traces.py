"""Golden event traces and replay: real runs under ``dag.test()`` write the event log (runtime
recorder and listener plugin, as in production), and

* the stored sequence (names, entities, statuses, correlation; ids and execution ids
  normalised to their order of appearance) equals ``traces/<case>.trace``
  (``NOETLC_REGEN_GOLDEN=1`` rewrites them; review the diff);
* the state rebuilt from the events alone (``noetlc status``) equals what the run really did:
  its final state, every step's last result and the ctx writes.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_plugin.events import set_default_recorder
from airflow_plugin.events.outbox import Outbox
from airflow_plugin.events.projection import project
from airflow_plugin.events.store import EventStore
from airflow_plugin.events.writer import StoreRecorder
from airflow_plugin.templating.ids import execution_id_for
from noetl_compile.cli import main

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
TRACES = Path(__file__).with_name("traces")
REGEN = os.environ.get("NOETLC_REGEN_GOLDEN") == "1"

INLINE = {
    "error_arc": """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: error_arc, path: traces/error_arc}
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
              input: {why: "{{ start.error }}"}
              code: "result = {'recovered_from': why}"
          - step: happy
            tool: {kind: noop}
    """,
    "unhandled_failure": """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: unhandled_failure, path: traces/unhandled_failure}
        workflow:
          - step: start
            tool: {kind: noop}
            next: {arcs: [{step: explode}]}
          - step: explode
            tool: {kind: python, code: "result = 1 / 0"}
            next: {arcs: [{step: never, when: "{{ event.name == 'call.done' }}"}]}
          - step: never
            tool: {kind: noop}
    """,
    "template_error_strict": """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: template_error_strict, path: traces/template_error_strict}
        workflow:
          - step: start
            tool:
              kind: python
              input: {value: "{{ missing_step.value }}"}
              code: "result = {'value': value}"
    """,
    "case_v2_retry_collect": """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: case_v2_retry_collect, path: traces/case_v2_retry_collect}
        workload: {pages: 3}
        workflow:
          - step: start
            next: [{step: fetch}]
          - step: fetch
            tool:
              kind: python
              args: {page: 1}
              code: |
                def main(page=1):
                    return {"page": page, "items": [page * 10, page * 10 + 1]}
            case:
              - when: "{{ event.name == 'call.done' and response.page < workload.pages }}"
                then:
                  collect: {from: "{{ response.items }}", into: items, mode: extend}
                  retry: {args: {page: "{{ response.page + 1 }}"}}
              - when: "{{ event.name == 'call.done' }}"
                then:
                  collect: {from: "{{ response.items }}", into: items, mode: extend}
                  next: [{step: end}]
          - step: end
            tool: {kind: python, code: "result = {'done': True}"}
    """,
}

# case -> (playbooks to compile, conf, fixtures it needs, expected run state)
CASES = {
    "python_chain": (["hello_world"], None, (), "success"),
    "branching_join": (["branching"], None, (), "success"),
    "loop_sequential": (["loop_sequential_ctx"], None, (), "success"),
    "loop_parallel": (["loop_parallel"], None, (), "success"),
    "loop_chunked": (["large_loop"], {"count": 130}, (), "success"),
    "loop_v1_end_loop": (["whitepaper_v1"], None, (), "success"),
    "pagination_region": (["pagination_region"], "http", ("http_server",), "success"),
    "http_retry_policy": (["http_fetch"], "http", ("http_server",), "success"),
    "sink_upsert": (["postgres_upsert"], None, ("pg_connections",), "success"),
    "duckdb": (["duckdb_report"], None, (), "success"),
    "nested_playbook": (["nested_parent", "nested_child"], None, (), "success"),
    "nested_in_loop": (["nested_in_loop", "nested_child"], None, (), "success"),
    "error_arc": (["@error_arc"], None, (), "failed"),
    "unhandled_failure": (["@unhandled_failure"], None, (), "failed"),
    "template_error_strict": (["@template_error_strict"], {"noetl_strict": True}, (), "failed"),
    "case_v2_retry_collect": (["@case_v2_retry_collect"], None, (), "success"),
}


@pytest.fixture
def sqlite_log(tmp_path):
    store = EventStore(str(tmp_path / "events.db"))
    recorder = StoreRecorder(store, Outbox(tmp_path / "outbox"), flush_timeout=30)
    previous = set_default_recorder(recorder)
    yield store, recorder
    recorder.flush(30)
    set_default_recorder(previous)
    store.dispose()


def compile_case(names: list[str], tmp_path: Path, dags_folder: Path) -> dict[str, str]:
    sources = []
    for name in names:
        if name.startswith("@"):
            path = tmp_path / f"{name[1:]}.yaml"
            path.write_text(textwrap.dedent(INLINE[name[1:]]))
            sources.append(str(path))
        else:
            sources.append(str(PLAYBOOKS / f"{name}.yaml"))
    out = tmp_path / "dags"
    assert main(["compile", *sources, "-o", str(out)]) == 0
    texts = {}
    for path in sorted(out.glob("*.py")):
        text = path.read_text()
        dag_id = text.split('dag_id="', 1)[1].split('"', 1)[0]
        texts[dag_id] = text
        (dags_folder / f"{dag_id}.py").write_text(text)  # children are found in the folder
    return texts


def canonical_order(rows: list[dict], task_order: list[str]) -> list[dict]:
    """Rows grouped by task attempt, the attempts in DAG order. Within a task attempt the order
    is the stored one (one process emits them in sequence); across tasks Airflow may run ready
    tasks (mapped instances, parallel branches) in any order, which a trace must not depend on.
    Likewise the iterations of a parallel loop that one task runs on threads (``noetlc run``,
    ``dag.test()``): within a task attempt, an iteration's events keep their order and the
    iterations follow their index, between the attempt's events from before the first and
    after the last iteration."""
    # A child run inline in an iteration belongs to that iteration (its first events name the
    # iteration's calling event as parent).
    by_id = {row["event_id"]: row for row in rows}
    child_iteration: dict[Any, int] = {}
    for row in sorted(rows, key=lambda r: r["seq"]):
        parent = by_id.get(row.get("parent_event_id"))
        if parent is not None and row["execution_id"] != parent["execution_id"]:
            inherited = iteration_of(parent, child_iteration)
            if inherited is not None:
                child_iteration.setdefault(row["execution_id"], inherited)
    first_iteration: dict[tuple, int] = {}
    for row in rows:
        if iteration_of(row, child_iteration) is not None and row.get("task_id") is not None:
            attempt = (row["task_id"], row.get("map_index"), row.get("try_number"))
            first_iteration[attempt] = min(first_iteration.get(attempt, row["seq"]), row["seq"])

    def within(row):
        attempt = (row.get("task_id"), row.get("map_index"), row.get("try_number"))
        iteration = iteration_of(row, child_iteration)
        if iteration is not None:
            return (1, iteration, row["seq"])
        before = row["seq"] < first_iteration.get(attempt, row["seq"] + 1)
        return (0 if before else 2, 0, row["seq"])

    def key(row):
        task = row.get("task_id")
        if task is None:
            early = row["name"] in (
                "PlaybookExecutionRequested",
                "PlaybookRequestEvaluated",
                "WorkflowStarted",
            )
            return (0 if early else 2, 0, "", 0, 0, 0, 0, row["seq"])
        root = task.split(".")[0]
        index = task_order.index(root) if root in task_order else len(task_order)
        return (1, index, task, row.get("map_index") or 0, row.get("try_number") or 0, *within(row))

    return sorted(rows, key=key)


def iteration_of(row: dict, child_iteration: dict) -> int | None:
    if row.get("iteration") is not None:
        return row["iteration"]
    return child_iteration.get(row["execution_id"])


def normalise(rows: list[dict]) -> list[str]:
    ids: dict[str, str] = {}
    executions: dict[str, str] = {}

    def eid(value):
        return ids.setdefault(value, f"e{len(ids)}") if value else None

    def xid(value):
        return executions.setdefault(str(value), f"x{len(executions)}") if value else None

    lines = []
    for row in rows:
        parts = [
            xid(row["execution_id"]),
            eid(row["event_id"]),
            row["name"],
            row["entity"],
            row["entity_id"],
            row["status"],
        ]
        for key in ("alias", "step", "task_id", "map_index", "try_number", "iteration", "attempt"):
            if row.get(key) is not None:
                parts.append(f"{key}={row[key]}")
        if row.get("parent_execution_id"):
            parts.append(f"parent={xid(row['parent_execution_id'])}/{eid(row['parent_event_id'])}")
        lines.append(" ".join(str(p) for p in parts))
    return lines


def actual_state(out, payload_steps: dict[str, str], order: list[str]) -> tuple[dict, dict]:
    """(step -> last result, ctx writes) from the run's XComs, later tasks (DAG order) last."""
    results, ctx = {}, {}

    def position(task_id: str) -> int:
        root = task_id.split(".")[0]
        return order.index(root) if root in order else len(order)

    for task_id in sorted(out.xcom, key=position):
        output = out.xcom[task_id]
        if not isinstance(output, dict) or out.states.get(task_id) == "failed":
            # A failed step task keeps its error result in XCom (NoETL's step.exit result);
            # the event log's projection records the failure, not that document.
            continue
        step = payload_steps.get(task_id)
        if step is not None and "result" in output:
            results[step] = output["result"]
        members = output.get("results")
        if isinstance(members, dict) and task_id.startswith("region_"):
            results.update(members)
        ctx.update(output.get("ctx") or {})
    return results, ctx


@pytest.mark.parametrize("case", sorted(CASES))
def test_event_trace_and_replay(case, request, airflow_db, run_dag, sqlite_log, tmp_path):
    names, conf, fixtures, expected_state = CASES[case]
    values = {name: request.getfixturevalue(name) for name in fixtures}
    if conf == "http":
        conf = {"api_url": values["http_server"]}
    texts = compile_case(names, tmp_path, airflow_db)
    parent = next(d for d in texts if d.split(".")[-1] == names[0].lstrip("@"))
    out = run_dag(texts[parent], parent, conf)
    assert out.state == expected_state, out.states
    store, recorder = sqlite_log
    assert recorder.flush(30)
    rows = store.events(dag_id=parent, run_id=out.run_id)

    trace = TRACES / f"{case}.trace"
    lines = normalise(canonical_order(rows, _payload_keys(texts[parent])))
    if REGEN:
        TRACES.mkdir(exist_ok=True)
        trace.write_text("\n".join(lines) + "\n")
    assert lines == trace.read_text().splitlines()
    assert len({r["event_id"] for r in rows}) == len(rows)

    # Replay: the execution's own events (an inline child is a separate execution).
    execution_id = execution_id_for(parent, out.run_id)
    state = project(r for r in rows if r["execution_id"] == execution_id)
    assert state["status"] == ("success" if expected_state == "success" else "error")
    module_steps = _task_steps(texts[parent])
    results, ctx = actual_state(out, module_steps, _payload_keys(texts[parent]))
    assert {k: state["results"].get(k) for k in results} == results
    assert state["ctx"] == ctx
    for step, entry in state["steps"].items():
        task = next((t for t, s in module_steps.items() if s == step), None)
        if task in out.states and out.states[task] in ("success", "failed"):
            # A step whose call failed and whose arcs went on: its task succeeded (the route
            # ran), the step ended in error (its XCom says so).
            went_on = (out.xcom.get(task) or {}).get("status") == "error"
            expected = "success" if out.states[task] == "success" and not went_on else "error"
            assert entry["status"] == expected, (step, entry, out.states[task])
    # A nested run is its own execution, linked to the parent's execution and to the parent
    # event that started it (the ToolStarted of the calling step).
    children = [r for r in rows if r["execution_id"] != execution_id]
    assert bool(children) == case.startswith("nested")
    by_id = {r["event_id"]: r for r in rows}
    for row in children:
        if row["name"] in ("PlaybookExecutionRequested", "WorkflowStarted", "PlaybookProcessed"):
            assert row["parent_execution_id"] == execution_id
            parent_event = by_id[row["parent_event_id"]]
            assert parent_event["name"] == "ToolStarted"
            assert parent_event["execution_id"] == execution_id
    # Every task that ran has exactly one terminal event per try.
    finished = [
        (r["task_id"], r["map_index"], r["try_number"]) for r in rows if r["name"] == "TaskFinished"
    ]
    assert len(finished) == len(set(finished))


def _payloads(source: str) -> dict:
    import ast

    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "PAYLOADS":
            return ast.literal_eval(node.value)
    return {}


def _payload_keys(source: str) -> list[str]:
    return list(_payloads(source))


def _task_steps(source: str) -> dict[str, str]:
    """task id -> step name for the tasks that carry one step's final output."""
    payloads = _payloads(source)
    mapping = {}
    for key, payload in payloads.items():
        if "region" in payload:
            continue
        step = payload.get("step")
        if payload.get("loop"):
            mapping[f"{key}.tail"] = step
        else:
            mapping[key] = step
    return mapping
