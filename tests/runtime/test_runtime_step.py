"""``execute_step``: input, tool/pipeline, set, routing, failures (case-v2 rules, retries and
reporting: test_runtime_step_case_v2.py; payload validation, loop collections and results, the
result shapes each engine reads: test_runtime_step_shapes.py)."""

from __future__ import annotations

import pytest

from airflow_plugin.runtime.step import StepFailed, execute_step
from airflow_plugin.tools import ToolNotAvailable
from tests.runtime.step_support import arcs, inputs, payload, py

# -- canonical ----------------------------------------------------------------------------------


def test_input_renders_workload_results_and_execution_id():
    p = payload(
        "b",
        input={
            "v": "{{ a.value }}",
            "w": "{{ workload.n }}",
            "bare": "{{ n }}",
            "eid": "{{ execution_id }}",
        },
        tool=py("result = {'v': v, 'w': w, 'bare': bare, 'eid': eid}"),
    )
    out = execute_step(p, inputs(workload={"n": 2}, results={"a": {"value": 10}}))
    assert out.result == {"v": 10, "w": 2, "bare": 2, "eid": "77"}  # execution_id is text
    assert out.status == "ok" and out.next_steps == []


def test_step_set_scopes_all_write_ctx():
    p = payload(
        tool=py("result = {'count': 3}"),
        set={
            "ctx.total": "{{ s.count * 2 }}",
            "step.flag": True,
            "iter.last": "{{ s.count }}",
            "plain": "{{ 'x' }}",
        },
    )
    out = execute_step(p, inputs())
    assert out.ctx_writes == {"total": 6, "flag": True, "last": 3, "plain": "x"}


def test_exclusive_routing_first_match_wins():
    p = payload(
        tool=py("result = {'n': 5}"),
        routing=arcs(
            {"step": "big", "task_id": "big_t", "when": "{{ s.n > 3 }}"},
            {"step": "also", "when": "{{ s.n > 1 }}"},
            {"step": "fallback"},
        ),
    )
    out = execute_step(p, inputs())
    assert out.next_steps == ["big"] and out.next_task_ids == ["big_t"]


def test_exclusive_routing_falls_through_to_unconditional_arc():
    p = payload(
        tool=py("result = {'n': 0}"),
        routing=arcs({"step": "big", "when": "{{ s.n > 3 }}"}, {"step": "fallback"}),
    )
    assert execute_step(p, inputs()).next_steps == ["fallback"]


def test_inclusive_routing_takes_every_match():
    p = payload(
        tool=py("result = {'n': 5}"),
        routing=arcs(
            {"step": "a", "when": "{{ s.n > 3 }}"},
            {"step": "b", "when": "{{ s.n > 10 }}"},
            {"step": "c", "when": True},
            {"step": "d"},
            mode="inclusive",
        ),
    )
    assert execute_step(p, inputs()).next_steps == ["a", "c", "d"]


def test_no_arc_matches():
    p = payload(tool=py("result = 1"), routing=arcs({"step": "a", "when": "{{ false }}"}))
    out = execute_step(p, inputs())
    assert out.next_steps == [] and out.next_task_ids == []


def test_arcs_see_step_set_and_apply_arc_set_and_args():
    p = payload(
        tool=py("result = {'page': 2}"),
        set={"ctx.page": "{{ s.page }}"},
        routing=arcs(
            {
                "step": "more",
                "when": "{{ ctx.page < 3 }}",
                "set": {"ctx.next_page": "{{ page + 1 }}"},
                "args": {"p": "{{ s.page }}"},
            },
        ),
    )
    out = execute_step(p, inputs())
    assert out.ctx_writes == {"page": 2, "next_page": 3}
    assert out.next_steps == ["more"] and out.next_args == {"more": {"p": 2}}


def test_arc_condition_can_use_output_and_event():
    p = payload(
        tool=py("result = {'x': 1}"),
        routing=arcs(
            {"step": "a", "when": "{{ event.name == 'call.done' and output.status == 'ok' }}"}
        ),
    )
    assert execute_step(p, inputs()).next_steps == ["a"]


def test_single_tool_with_rules_is_a_one_task_pipeline():
    p = payload(
        "fetch",
        tool=py(
            "result = {'n': 1}",
            spec={
                "policy": {
                    "rules": [{"else": {"then": {"do": "continue", "set": {"ctx.fetched": True}}}}]
                }
            },
        ),
    )
    out = execute_step(p, inputs())
    assert out.result["results"] == {"fetch_task": {"n": 1}}
    assert out.result["_prev"] == {"n": 1} and out.result["status"] == "ok"
    assert "n" not in out.result  # NoETL does not merge the last task's result
    assert out.ctx_writes == {"fetched": True}


def test_pipeline_step_with_ctx_writes_and_routing():
    p = payload(
        pipeline=[
            py(
                "result = {'id': 1}",
                name="shape",
                spec={
                    "policy": {
                        "rules": [
                            {
                                "else": {
                                    "then": {
                                        "do": "continue",
                                        "set": {"ctx.shaped": "{{ output.data.id }}"},
                                    }
                                }
                            }
                        ]
                    }
                },
            ),
            py("result = {'saved': i}", name="save", input={"i": "{{ _prev.id }}"}),
        ],
        routing=arcs({"step": "next", "when": "{{ s.results.save.saved == 1 }}"}),
    )
    out = execute_step(p, inputs())
    assert out.ctx_writes == {"shaped": 1}
    assert out.result["_prev"] == {"saved": 1} and out.result["results"]["shape"] == {"id": 1}
    assert out.result["ctx"] == {"shaped": 1}
    assert out.next_steps == ["next"]


def test_pipeline_step_fields_read_the_last_task_result_in_templates():
    """The stored result is NoETL's record; templates read `{{ s.field }}` from the last task's
    result promoted under it (NoETL's engine does the same), the record's own keys first."""
    p = payload(
        pipeline=[
            py("result = {'id': 1}", name="shape"),
            py("result = {'saved': 1, 'status': 'stored'}", name="save"),
        ],
        routing=arcs(
            {
                "step": "next",
                "when": "{{ s.saved == 1 and s.id is undefined and s.status == 'ok' }}",
            }
        ),
    )
    out = execute_step(p, inputs())
    assert "saved" not in out.result and out.result["_prev"] == {"saved": 1, "status": "stored"}
    assert out.next_steps == ["next"]


def test_pipeline_break_status():
    p = payload(
        pipeline=[
            py(
                "result = 1",
                name="a",
                spec={"policy": {"rules": [{"else": {"then": {"do": "break"}}}]}},
            )
        ]
    )
    assert execute_step(p, inputs()).status == "break"


def test_step_without_tool_is_a_router():
    p = payload("start", routing=arcs({"step": "go", "when": "{{ workload.ready }}"}))
    out = execute_step(p, inputs(workload={"ready": True}))
    assert out.result is None and out.next_steps == ["go"]


def test_incoming_args_overlay_input_and_are_visible():
    p = payload("b", input={"x": 1, "y": 2}, tool=py("result = [x, y, z]"))
    out = execute_step(p, inputs(args={"y": 20, "z": 30}))
    assert out.result == [1, 20, 30]


def test_v1_arc_bindings_are_bare_names_of_the_target_step():
    # v1 `next: [{step: b, with: {city: ...}}]`: the target's templates read `{{ city }}`.
    tool = {"kind": "duckdb", "query": "SELECT '{{ city }}' AS c, {{ n }} AS n"}
    p = payload("b", dialect="v1", input={"label": "{{ city }}!"}, tool=tool)
    out = execute_step(p, inputs(args={"city": "Oslo", "n": 2}, results={"a": {"n": 1}}))
    assert out.result["rows"] == [{"c": "Oslo", "n": 2}]
    # a binding never shadows a step result or a runtime namespace
    p = payload("b", dialect="v1", input={"r": "{{ a.n }}", "w": "{{ workload.k }}"})
    p["tool"] = py("result = [r, w]")
    args = {"a": "x", "workload": "y"}
    out = execute_step(p, inputs(args=args, results={"a": {"n": 1}}, workload={"k": 5}))
    assert out.result == [1, 5]
    # other dialects read them as `args.<name>` only: `{{ city }}` is undefined, which the
    # canonical python tool renders as '' (python_input_undefined_blank)
    p = payload("b", input={"v": "{{ city }}"}, tool=py("result = v"))
    assert execute_step(p, inputs(args={"city": "Oslo"})).result == ""
    p = payload("b", input={"v": "{{ args.city }}"}, tool=py("result = v"))
    assert execute_step(p, inputs(args={"city": "Oslo"})).result == "Oslo"


def test_lenient_input_keeps_unresolvable_template():
    p = payload(input={"q": "{{ missing_step.rows }}"}, tool=py("result = q"))
    assert execute_step(p, inputs()).result == "{{ missing_step.rows }}"


def test_python_code_is_templated_leniently():
    p = payload(tool=py("test_var = {{ workload.n }}\nresult = test_var"))
    assert execute_step(p, inputs(workload={"n": 4})).result == 4
    # A template that cannot render leaves the whole code as written (here: a comment).
    p = payload(tool=py("# receives data using {{ vars.* }} templates\nresult = 'ran'"))
    assert execute_step(p, inputs()).result == "ran"


# -- failures ------------------------------------------------------------------------------------


def test_tool_failure_raises_step_failed():
    # No arc matches the failed call (canonical), or the older dialects' unconditional arc,
    # which does not handle a failure.
    done_only = arcs({"step": "next", "when": "{{ event.name == 'call.done' }}"})
    for p in (
        payload("boom", tool=py("raise RuntimeError('kaput')"), routing=done_only),
        payload(
            "boom",
            dialect="v1",
            tool=py("raise RuntimeError('kaput')"),
            routing=arcs({"step": "next"}),
        ),
        payload(
            "boom",
            dialect="case-v2",
            tool=py("raise RuntimeError('kaput')"),
            routing=arcs({"step": "next"}),
        ),
    ):
        with pytest.raises(
            StepFailed, match="step 'boom' failed: tool: RuntimeError: kaput"
        ) as info:
            execute_step(p, inputs())
        assert "Traceback" in info.value.error["traceback"]


def test_canonical_failed_call_goes_on_along_its_arcs():
    # NoETL 138c10ed evaluates a failed call's arcs like a successful one's: the unconditional
    # arc matches (final_status/unconditional_next_after_raise), a condition sees call.error.
    p = payload("boom", tool=py("raise RuntimeError('kaput')"), routing=arcs({"step": "next"}))
    out = execute_step(p, inputs())
    assert (out.status, out.next_steps) == ("error", ["next"])
    assert out.error["type"] == "RuntimeError" and out.result["error"] == "kaput"
    p["routing"] = arcs(
        {"step": "ok_path"},
        {"step": "on_error", "when": "{{ event.name == 'call.error' }}"},
    )
    assert execute_step(p, inputs()).next_steps == ["ok_path"]  # exclusive: first match
    p["routing"] = arcs(
        {"step": "done", "when": "{{ event.name == 'call.done' }}"},
        {"step": "on_error", "when": "{{ event.name == 'call.error' }}"},
        {"step": "always"},
        mode="inclusive",
    )
    assert execute_step(p, inputs()).next_steps == ["on_error", "always"]


def test_case_v2_rule_routing_a_failure_also_takes_the_plain_next():
    # dc55c492 ends such a step CASE_HANDLED and then takes its plain `next`
    # (case_v2/case_status_error_dict).
    rule = {"when": "{{ event.name == 'call.error' }}", "then": {"next": [{"step": "recover"}]}}
    p = payload(
        "s",
        dialect="case-v2",
        tool=py("result = {'status': 'error', 'message': 'bad'}"),
        case=[rule],
        routing=arcs({"step": "end"}),
    )
    out = execute_step(p, inputs())
    assert (out.status, out.next_steps) == ("error", ["recover", "end"])
    # the v1 engine: the rule's route only. A raised error (a returned status: error dict is
    # data in v1: v1/python_returns_error_status)
    p["dialect"], p["tool"] = "v1", py("raise RuntimeError('bad')")
    assert execute_step(p, inputs()).next_steps == ["recover"]


def test_v1_python_status_error_dict_is_data():
    # NoETL's v1 worker (58c2a16b) judges the tool's envelope, not what the code returned.
    p = payload("s", dialect="v1", tool=py("def main():\n    return {'status': 'error', 'x': 1}\n"))
    out = execute_step(p, inputs())
    assert out.status == "ok" and out.result == {"status": "error", "x": 1}
    p["dialect"] = "canonical"  # a failure there (no arc routes it: the step fails)
    with pytest.raises(StepFailed, match="returned status 'error'"):
        execute_step(p, inputs())


def test_python_main_context_parameter_gets_the_render_context():
    p = payload("s", tool=py("def main(context):\n    return {'n': context['workload']['n']}\n"))
    assert execute_step(p, inputs(workload={"n": 9})).result == {"n": 9}


def test_failure_handled_by_an_error_arc():
    p = payload(
        "boom",
        dialect="v1",
        tool=py("raise RuntimeError('kaput')"),
        routing=arcs(
            {"step": "ok_path"},  # unconditional: does not handle failures
            {
                "step": "on_error",
                "when": "{{ event.name == 'call.error' }}",
                "set": {"ctx.why": "{{ error.message }}"},
            },
        ),
    )
    out = execute_step(p, inputs())
    assert out.status == "error"
    assert out.next_steps == ["on_error"]
    assert out.ctx_writes == {"why": "kaput"}
    assert out.result["status"] == "error" and out.error["type"] == "RuntimeError"


def test_policy_continue_on_error_routes_on_what_the_rule_sets():
    p = payload(
        "start",
        tool=py(
            "raise PermissionError('no token')",
            spec={
                "policy": {
                    "rules": [
                        {
                            "when": "{{ output.status == 'error' }}",
                            "then": {"do": "continue", "set": {"ctx.auth": "{{ error.type }}"}},
                        }
                    ]
                }
            },
        ),
        routing=arcs(
            {"step": "auth_error", "when": "{{ ctx.auth == 'PermissionError' }}"},
            {"step": "go"},
        ),
    )
    out = execute_step(p, inputs())
    # NoETL keeps no trace of a failed task a rule continued past: the rule's `set` carries it.
    assert out.result == {
        "status": "ok",
        "_prev": None,
        "results": {},
        "ctx": {"auth": "PermissionError"},
    }
    assert out.status == "ok" and out.next_steps == ["auth_error"]


def test_tool_kind_without_executor_raises_tool_not_available():
    p = payload("get", tool={"kind": "snowflake", "command": "select 1"})
    with pytest.raises(ToolNotAvailable, match="cannot execute tool kind 'snowflake'.*python"):
        execute_step(p, inputs())
