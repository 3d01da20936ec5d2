"""NoetlStepOperator in a real Airflow 3 (``dag.test()`` on a temporary SQLite metadata DB).

DAGs are written as files in the shape the compiler emits: ``with DAG(...)``, one
``NoetlStepOperator`` per step, ``>>`` edges, joins with ``none_failed_min_one_success``.
"""

from __future__ import annotations

import importlib
import importlib.util

import pytest

importlib.import_module("airflow")

from airflow_plugin import NoetlStepOperator


def task(task_id, payload, reads=None, **kwargs):
    return {"task_id": task_id, "payload": payload, "reads": reads, "kwargs": kwargs}


def dag_source(dag_id, tasks, edges, params=None):
    lines = [
        "from airflow.sdk import DAG",
        "from airflow_plugin import NoetlStepOperator",
        "",
        f"with DAG(dag_id={dag_id!r}, schedule=None, params={params or {}!r}) as dag:",
    ]
    for t in tasks:
        extra = "".join(f", {k}={v!r}" for k, v in t["kwargs"].items())
        lines.append(
            f"    {t['task_id']} = NoetlStepOperator(task_id={t['task_id']!r}, "
            f"payload={t['payload']!r}, reads={t['reads']!r}{extra})"
        )
    lines += [f"    {edge}" for edge in edges]
    return "\n".join(lines) + "\n"


def py(code, **extra):
    return {"kind": "python", "code": code, **extra}


NOOP = {"kind": "noop"}
JOIN = {"trigger_rule": "none_failed_min_one_success"}


# -- construction (no DB needed) ------------------------------------------------------------------


def test_operator_never_lets_airflow_render_the_payload():
    op = NoetlStepOperator(
        task_id="t", payload={"step": "t", "input": {"x": "{{ workload.user }}"}, "tool": NOOP}
    )
    assert op.template_fields == ()
    assert op.payload["input"]["x"] == "{{ workload.user }}"
    assert op.inherits_from_skipmixin


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"payload": {"step": "t", "lopo": {"in": "x"}}}, "unknown key"),
        ({"payload": {"step": "t", "tool": {"kind": "python", "code": object()}}}, "not JSON"),
        (
            {"payload": {"step": "t"}, "reads": {"results": {"a": 1}}},
            "`reads.results` must map step names to task ids",
        ),
        (
            {"payload": {"step": "t"}, "reads": {"ctx": {"x": "a"}}},
            "`reads.ctx` must map names to lists of task ids",
        ),
        ({"payload": {"step": "t"}, "reads": {"other": {}}}, "unknown key"),
    ],
)
def test_operator_validates_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        NoetlStepOperator(task_id="t", **kwargs)


def test_an_operator_holds_its_decoded_step_and_copies_with_it():
    # Airflow deep-copies operators (a DAG's partial subset, task clearing): the decoded step
    # is immutable, so the copy shares it rather than failing on the profile's read-only tables.
    import copy

    op = NoetlStepOperator(
        task_id="t",
        payload={"step": "t", "tool": NOOP, "routing": {"arcs": [{"step": "u", "when": "x"}]}},
    )
    assert op.spec.name == "t" and op.spec.routing.arcs[0].guarded
    clone = copy.deepcopy(op)
    assert clone.spec is op.spec and clone.payload == op.payload


# -- dag.test() ------------------------------------------------------------------------------------


def branching_dag(dag_id):
    start = task(
        "start",
        {
            "step": "start",
            "dialect": "canonical",
            "input": {"n": "{{ workload.n }}"},
            "tool": py("result = {'value': n * 10}"),
            "routing": {
                "mode": "exclusive",
                "arcs": [
                    {"step": "high", "task_id": "high", "when": "{{ start.value > 20 }}"},
                    {"step": "low", "task_id": "low"},
                ],
            },
        },
    )
    high = task(
        "high",
        {
            "step": "high",
            "input": {"v": "{{ start.value }}"},
            "tool": py("result = {'got': v, 'path': 'high'}"),
        },
        reads={"results": {"start": "start"}},
    )
    low = task(
        "low",
        {
            "step": "low",
            "input": {"v": "{{ start.data.value }}"},
            "tool": py("result = {'got': v, 'path': 'low'}"),
        },
        reads={"results": {"start": "start"}},
    )
    join = task(
        "join",
        {
            "step": "join",
            "input": {
                "path": "{{ high.path if high is defined else low.path }}",
                "eid": "{{ execution_id }}",
            },
            "tool": py("result = {'path': path, 'eid': eid}"),
        },
        reads={"results": {"high": "high", "low": "low"}},
        **JOIN,
    )
    return dag_source(
        dag_id, [start, high, low, join], ["start >> [high, low] >> join"], params={"n": 3}
    )


def test_exclusive_branch_skips_the_arc_not_taken_and_results_flow(run_dag):
    run = run_dag(branching_dag("noetl_exclusive"), "noetl_exclusive")
    assert run.state == "success"
    assert run.states == {
        "start": "success",
        "high": "success",
        "low": "skipped",
        "join": "success",
    }
    # start pushed its XCom even though skipping raised DownstreamTasksSkipped inside execute
    assert run.xcom["start"] == {
        "result": {"value": 30},
        "ctx": {},
        "vars": {},
        "next": ["high"],
        "args": {},
        "status": "ok",
    }
    assert run.xcom["high"]["result"] == {"got": 30, "path": "high"}  # {{ start.value }} from XCom
    assert run.xcom["join"]["result"]["path"] == "high"
    eid = run.xcom["join"]["result"]["eid"]
    assert isinstance(eid, str) and eid.isdigit()


def test_run_conf_overrides_params_and_takes_the_other_branch(run_dag):
    run = run_dag(branching_dag("noetl_exclusive_conf"), "noetl_exclusive_conf", conf={"n": 1})
    assert run.states == {
        "start": "success",
        "high": "skipped",
        "low": "success",
        "join": "success",
    }
    assert run.xcom["low"]["result"] == {
        "got": 10,
        "path": "low",
    }  # {{ start.data.value }}: data fallback
    assert run.xcom["join"]["result"]["path"] == "low"


def test_inclusive_arcs_run_both_branches_and_the_join(run_dag):
    start = task(
        "start",
        {
            "step": "start",
            "tool": py("result = {'n': 2}"),
            "routing": {
                "mode": "inclusive",
                "arcs": [
                    {"step": "b", "task_id": "b", "when": "{{ start.n > 1 }}"},
                    {"step": "c", "task_id": "c", "when": "{{ start.n > 0 }}"},
                    {"step": "d", "task_id": "d", "when": "{{ start.n > 5 }}"},
                ],
            },
        },
    )
    b = task("b", {"step": "b", "tool": py("result = 'B'")})
    c = task("c", {"step": "c", "tool": py("result = 'C'")})
    d = task("d", {"step": "d", "tool": py("result = 'D'")})
    join = task(
        "join",
        {
            "step": "join",
            "input": {"got": "[{{ b | tojson }}, {{ c | tojson }}]"},
            "tool": py("result = got"),
        },
        reads={"results": {"b": "b", "c": "c", "d": "d"}},
        **JOIN,
    )
    source = dag_source("noetl_inclusive", [start, b, c, d, join], ["start >> [b, c, d] >> join"])
    run = run_dag(source, "noetl_inclusive")
    assert run.states == {
        "start": "success",
        "b": "success",
        "c": "success",
        "d": "skipped",
        "join": "success",
    }
    assert run.xcom["start"]["next"] == ["b", "c"]
    # The renderer keeps `| tojson` output as text; NoETL's python tool then reads JSON text in
    # its inputs as data (its `_coerce_param`), so the code sees a list.
    assert run.xcom["join"]["result"] == ["B", "C"]


def test_no_arc_chosen_skips_all_targets_and_the_join(run_dag):
    start = task(
        "start",
        {
            "step": "start",
            "tool": NOOP,
            "routing": {
                "mode": "exclusive",
                "arcs": [{"step": "b", "task_id": "b", "when": "{{ workload.go }}"}],
            },
        },
    )
    b = task("b", {"step": "b", "tool": NOOP})
    join = task("join", {"step": "join", "tool": NOOP}, **JOIN)
    source = dag_source(
        "noetl_no_arc", [start, b, join], ["start >> b >> join"], params={"go": False}
    )
    run = run_dag(source, "noetl_no_arc")
    assert run.state == "success"
    assert run.states == {"start": "success", "b": "skipped", "join": "skipped"}
    assert run.xcom["start"]["next"] == []


def test_python_step_that_raises_fails_the_task(run_dag):
    boom = task(
        "boom",
        {
            "step": "boom",
            "tool": py("raise ValueError('bad input')"),
            # No arc matches a failed call (an arc without `when` would: the run goes on).
            "routing": {
                "mode": "exclusive",
                "arcs": [
                    {
                        "step": "after",
                        "task_id": "after",
                        "when": "{{ event.name == 'call.done' }}",
                    }
                ],
            },
        },
    )
    after = task("after", {"step": "after", "tool": NOOP})
    source = dag_source("noetl_failure", [boom, after], ["boom >> after"])
    run = run_dag(source, "noetl_failure")
    assert run.state == "failed"
    assert run.states == {"boom": "failed", "after": "upstream_failed"}
    # As NoETL records a failed step's result, the failed task keeps NoETL's python error
    # document where a step's result lives, and routes nowhere.
    pushed = run.xcom["boom"]
    assert pushed["status"] == "error" and pushed["next"] == []
    assert {k: v for k, v in pushed["result"].items() if k != "id"} == {
        "status": "error",
        "error": "bad input",
    }


def test_ctx_vars_and_args_flow_through_xcom(run_dag):
    # canonical ctx write read two steps later; case-v2 vars + next args into the routed step.
    start = task(
        "start",
        {
            "step": "start",
            "dialect": "case-v2",
            "tool": py("result = {'user': 'ada', 'n': 4}"),
            "set": {"ctx.total": "{{ start.n * 2 }}"},
            "vars": {"user": "{{ result.user }}"},
            "case": [
                {
                    "when": "{{ event.name == 'call.done' and response.n > 1 }}",
                    "then": {"next": [{"step": "use", "args": {"doubled": "{{ result.n * 2 }}"}}]},
                }
            ],
            "routing": {
                "mode": "exclusive",
                "arcs": [{"step": "use", "task_id": "use"}, {"step": "other", "task_id": "other"}],
            },
        },
    )
    use = task(
        "use",
        {
            "step": "use",
            "dialect": "case-v2",
            "input": {"who": "{{ vars.user }}"},
            "tool": py("result = {'who': who, 'doubled': doubled}"),
        },
        reads={"vars": {"user": ["start"]}},
    )
    other = task("other", {"step": "other", "tool": NOOP})
    end = task(
        "end",
        {
            "step": "end",
            "input": {"total": "{{ ctx.total }}", "bare": "{{ total }}"},
            "tool": py("result = [total, bare]"),
        },
        reads={"ctx": {"total": ["start"]}},
        **JOIN,
    )
    source = dag_source(
        "noetl_ctx_flow", [start, use, other, end], ["start >> [use, other] >> end"]
    )
    run = run_dag(source, "noetl_ctx_flow")
    assert run.states == {
        "start": "success",
        "use": "success",
        "other": "skipped",
        "end": "success",
    }
    assert run.xcom["start"]["ctx"] == {"total": 8}
    assert run.xcom["start"]["vars"] == {"user": "ada"}
    assert run.xcom["start"]["args"] == {"use": {"doubled": 8}}
    assert run.xcom["use"]["result"] == {"who": "ada", "doubled": 8}
    assert run.xcom["end"]["result"] == [8, 8]


def test_unbuilt_tool_fails_the_task_with_a_clear_message(run_dag):
    get = task("get", {"step": "get", "tool": {"kind": "http", "url": "http://example.invalid"}})
    run = run_dag(dag_source("noetl_unbuilt", [get], []), "noetl_unbuilt")
    assert run.states == {"get": "failed"}


def test_ctx_read_takes_the_last_listed_task_that_ran(run_dag):
    a = task(
        "a",
        {
            "step": "a",
            "tool": NOOP,
            "set": {"ctx.x": "from a"},
            "routing": {
                "mode": "exclusive",
                "arcs": [
                    {"step": "b", "task_id": "b", "when": "{{ workload.via_b }}"},
                    {"step": "c", "task_id": "c"},
                ],
            },
        },
    )
    b = task("b", {"step": "b", "tool": NOOP, "set": {"ctx.x": "from b"}})
    c = task("c", {"step": "c", "tool": NOOP})
    d = task(
        "d",
        {"step": "d", "input": {"x": "{{ ctx.x }}"}, "tool": py("result = x")},
        reads={"ctx": {"x": ["a", "b"]}},
        **JOIN,
    )
    source = dag_source(
        "noetl_ctx_last", [a, b, c, d], ["a >> [b, c] >> d"], params={"via_b": True}
    )
    assert run_dag(source, "noetl_ctx_last").xcom["d"]["result"] == "from b"
    run = run_dag(source, "noetl_ctx_last", conf={"via_b": False})
    assert run.states["b"] == "skipped"
    assert run.xcom["d"]["result"] == "from a"


def test_every_routing_operator_honours_branch_decisions_on_rerun():
    # NotPreviouslySkippedDep reads skip decisions only from tasks that say they may skip.
    from airflow_plugin.operators.loop import NoetlLoopTailOperator, NoetlSequentialLoopOperator
    from airflow_plugin.operators.nested import NoetlPlaybookOperator
    from airflow_plugin.operators.region import NoetlRegionOperator

    for operator in (
        NoetlStepOperator,
        NoetlLoopTailOperator,
        NoetlSequentialLoopOperator,
        NoetlRegionOperator,
        NoetlPlaybookOperator,
    ):
        assert operator.inherits_from_skipmixin is True, operator
        assert operator.template_fields == (), operator


def test_loop_tasks_pull_no_args_from_their_own_group():
    """Inside a loop's group the head returns chunks and the bodies their records, never a
    step output with ``args``: a body instance pulled the head's whole collection for them (an
    XCom round trip through the API server per instance, 5,000 items in large_loop) and the
    tail every body's records a second time. Other upstreams are still asked."""
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "loop_parallel_dag", Path(__file__).parents[2] / "dags" / "loop_parallel.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tasks = module.dag.task_dict
    # A body instance as its task runner builds it (the mapped operator, unmapped).
    body = tasks["measure.body"].unmap({"chunk": {"offset": 0, "items": [1]}})
    for task_id, task in (("measure.body", body), ("measure.tail", tasks["measure.tail"])):
        asked = set(tasks[task_id].upstream_task_ids) - task.outputless_upstreams()
        assert tasks[task_id].upstream_task_ids and not asked, (task_id, asked)
    assert tasks["measure.head"].outputless_upstreams() == set()
    assert tasks["report"].outputless_upstreams() == set()
    assert tasks["measure.head"].upstream_task_ids == {"start"}
