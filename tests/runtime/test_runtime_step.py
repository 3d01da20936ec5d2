"""``execute_step``: input, tool/pipeline, set, vars, case-v2 rules, routing."""

from __future__ import annotations

import pytest

from airflow_plugin.runtime.step import StepFailed, execute_step, routing_targets
from airflow_plugin.tools import ToolNotAvailable
from noetl_compile.engine_profiles import NOETL5
from noetl_compile.step_decode import decode_step
from noetl_compile.step_model import PayloadError


def py(code, **extra):
    return {"kind": "python", "code": code, **extra}


def payload(step="s", **kw):
    return {"step": step, "dialect": kw.pop("dialect", "canonical"), **kw}


def arcs(*items, mode="exclusive"):
    return {"mode": mode, "arcs": [dict(a) for a in items]}


def inputs(**kw):
    return {"workload": {}, "results": {}, "ctx": {}, "vars": {}, "execution_id": 77, **kw}


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


# -- case-v2 -------------------------------------------------------------------------------------


def v2(step="s", **kw):
    return payload(step, dialect="case-v2", **kw)


def test_case_call_done_rule_routes_with_args_and_vars_set():
    p = v2(
        "start",
        tool=py("result = {'random_value': 15}"),
        case=[
            {
                "when": "{{ result.random_value > workload.threshold }}",
                "then": [
                    {
                        "next": {
                            "step": "process_high",
                            "args": {"value": "{{ result.random_value }}"},
                        }
                    }
                ],
            },
            {
                "when": "{{ result.random_value <= workload.threshold }}",
                "then": [{"next": {"step": "process_low"}}],
            },
        ],
    )
    out = execute_step(p, inputs(workload={"threshold": 10}))
    assert out.next_steps == ["process_high"]
    assert out.next_args == {"process_high": {"value": 15}}


def test_case_step_exit_set_list_writes_vars_and_response_is_result():
    p = v2(
        "fetch_data",
        tool=py("result = {'users': [{'user_id': 123}], 'metadata': {'count': 2}}"),
        case=[
            {
                "when": "{{ event.name == 'step.exit' and response is defined }}",
                "then": {
                    "set": [
                        {"name": "first_user_id", "value": "{{ response.users[0].user_id }}"},
                        {"name": "user_count", "value": "{{ response.metadata.count }}"},
                    ],
                    "next": [{"step": "use_vars", "args": {"uid": "{{ vars.first_user_id }}"}}],
                },
            },
        ],
    )
    out = execute_step(p, inputs())
    assert out.vars_writes == {"first_user_id": 123, "user_count": 2}
    assert out.next_steps == ["use_vars"] and out.next_args == {"use_vars": {"uid": 123}}


@pytest.mark.parametrize(
    ("then", "expected"),
    [
        # dc55c492 reads one action mapping as next, else set, else result: a `result` beside
        # `next` is never applied and the step keeps its tool's result (case_v2/result_from).
        ({"result": {"from": "result.inner"}, "next": [{"step": "after"}]}, {"inner": {"v": 1}}),
        # As its own action: `from` names an execution variable (a plain name, not a template).
        ([{"result": {"from": "picked"}}, {"next": [{"step": "after"}]}], {"p": 2}),
        (
            [{"result": {"from": "result.inner"}}, {"next": [{"step": "after"}]}],
            {"inner": {"v": 1}},
        ),
        ([{"result": {"fixed": True}}, {"next": [{"step": "after"}]}], {"fixed": True}),
    ],
)
def test_case_v2_then_result_as_the_engine_applies_it(then, expected):
    p = v2(
        "start",
        tool=py("result = {'inner': {'v': 1}}"),
        case=[{"when": "{{ event.name == 'call.done' }}", "then": then}],
    )
    out = execute_step(p, inputs(ctx={"picked": {"p": 2}}))
    assert out.result == expected
    assert out.next_steps == ["after"]


def test_case_set_ctx_form_and_this_envelope():
    p = v2(
        tool=py("result = {'t': 21}"),
        case=[
            {
                "when": "{{ event.name == 'call.done' and this.status == 'ok' }}",
                "then": {"set": {"ctx": {"temp": "{{ result.t }}"}}},
            }
        ],
    )
    assert execute_step(p, inputs()).ctx_writes == {"temp": 21}


def test_vars_block_renders_against_result():
    p = v2(
        tool=py("result = [{'user_id': 5, 'email': 'a@b'}]"),
        vars={"user_id": "{{ result[0].user_id }}", "email": "{{ result[0].email }}"},
    )
    assert execute_step(p, inputs()).vars_writes == {"user_id": 5, "email": "a@b"}


def test_vars_are_readable_by_later_steps():
    p = v2(input={"u": "{{ vars.user_id }}"}, tool=py("result = u"))
    assert execute_step(p, inputs(vars={"user_id": 9})).result == 9


def test_case_first_matching_rule_wins_per_event():
    p = v2(
        tool=py("result = {'n': 1}"),
        case=[
            {"when": "{{ event.name == 'step.exit' }}", "then": {"next": ["first"]}},
            {"when": "{{ event.name == 'step.exit' }}", "then": {"next": ["second"]}},
        ],
    )
    assert execute_step(p, inputs()).next_steps == ["first"]


def test_case_rule_fires_once_even_if_it_matches_two_events():
    p = v2(
        tool=py("result = {'n': 1}"),
        case=[
            {
                "when": "{{ result.n == 1 }}",
                "then": {"next": ["a"], "set": [{"name": "hits", "value": 1}]},
            },
            {"when": "{{ event.name == 'step.exit' }}", "then": {"next": ["b"]}},
        ],
    )
    out = execute_step(p, inputs())
    assert out.next_steps == ["a"]


def test_case_next_overrides_step_next_but_step_next_applies_otherwise():
    base = {
        "tool": py("result = {'go': go}", input={"go": "{{ workload.go }}"}),
        "case": [{"when": "{{ result.go }}", "then": {"next": [{"step": "special"}]}}],
        "routing": arcs({"step": "default"}),
    }
    assert execute_step(v2(**base), inputs(workload={"go": True})).next_steps == ["special"]
    assert execute_step(v2(**base), inputs(workload={"go": False})).next_steps == ["default"]


def test_case_step_enter_set_happens_before_the_call():
    p = v2(
        # A case-v2 context has no `ctx` name: the variable is read flat (dc55c492).
        input={"seed": "{{ acc }}"},
        tool=py("result = seed"),
        case=[{"when": "{{ event.name == 'step.enter' }}", "then": {"set": {"ctx": {"acc": []}}}}],
    )
    out = execute_step(p, inputs())
    assert out.result == [] and out.ctx_writes == {"acc": []}


def test_case_call_error_handles_failure():
    p = v2(
        tool=py("raise TimeoutError('slow')"),
        case=[
            {
                "when": "{{ event.name == 'step.exit' }}",
                "then": {"next": ["normal"]},
            },  # not an error handler
            {
                "when": "{{ event.name == 'call.error' }}",
                "then": {"next": [{"step": "handler", "args": {"m": "{{ error.message }}"}}]},
            },
        ],
    )
    out = execute_step(p, inputs())
    assert out.status == "error"
    assert out.next_steps == ["handler"] and out.next_args == {"handler": {"m": "slow"}}


def test_case_generic_step_exit_rule_does_not_swallow_failure():
    p = v2(
        tool=py("raise TimeoutError('slow')"),
        case=[{"when": "{{ event.name == 'step.exit' }}", "then": {"next": ["end"]}}],
    )
    with pytest.raises(StepFailed, match="TimeoutError: slow"):
        execute_step(p, inputs())


def test_case_next_task_id_from_arcs_or_explicit():
    p = v2(
        tool=py("result = 1"),
        case=[
            {
                "when": "{{ true }}",
                "then": {"next": [{"step": "a"}, {"step": "b", "task_id": "b_task"}]},
            }
        ],
        routing=arcs({"step": "a", "task_id": "a_task"}),
    )
    out = execute_step(p, inputs())
    assert out.next_task_ids == ["a_task", "b_task"]
    assert routing_targets(p) == ["a_task", "b_task"]


def test_case_retry_with_collect_pages_until_the_rule_stops_matching():
    # A python "API" returning page N of 3; case-v2 pagination: collect each page, call again
    # with the next page (next_call via `retry.input`), route when there is no more.
    page_api = py(
        "result = {'data': {'items': [page * 10, page * 10 + 1], 'more': page < 3, 'page': page}}",
        input={"page": 1},
    )
    p = v2(
        "fetch",
        tool=page_api,
        case=[
            {
                "when": "{{ event.name == 'call.done' and response.more }}",
                "then": {
                    "collect": {"strategy": "append", "path": "items", "into": "pages"},
                    "retry": {"max_attempts": 10, "input": {"page": "{{ response.page + 1 }}"}},
                },
            },
            {
                "when": "{{ event.name == 'call.done' and not response.more }}",
                "then": {
                    "collect": {"strategy": "append", "path": "items", "into": "pages"},
                    "next": [{"step": "done"}],
                },
            },
        ],
    )
    out = execute_step(p, inputs())
    assert out.attempts == 3
    assert out.vars_writes == {"pages": [10, 11, 20, 21, 30, 31]}
    assert out.next_steps == ["done"]


def test_v1_error_retry_with_backoff_then_success(tmp_path):
    counter = tmp_path / "calls"
    code = (
        f"p = {str(counter)!r}\n"
        "n = (open(p).read().count('x') if os.path.exists(p) else 0) + 1\n"
        "open(p, 'a').write('x')\n"
        "if n < 3:\n    raise RuntimeError(f'try {n} fails')\n"
        "result = {'tries': n}\n"
    )
    p = payload(
        "flaky",
        dialect="v1",
        tool=py(code),
        retry={"max_attempts": 4, "initial_delay": 0.5, "backoff_multiplier": 2.0},
    )
    waits = []
    out = execute_step(p, inputs(), sleep=waits.append)
    assert out.result == {"tries": 3} and out.attempts == 3
    assert waits == [0.5, 1.0]


def test_error_retry_exhausted_fails_the_step_with_the_last_error():
    p = payload("boom", dialect="v1", tool=py("raise ValueError('no')"), retry={"max_attempts": 2})
    with pytest.raises(StepFailed, match="ValueError: no"):
        execute_step(p, inputs(), sleep=lambda s: None)


def test_unrendered_template_is_reported_and_fatal_in_strict_mode():
    p = payload("s", tool=py("result = v", input={"v": "{{ missing_step.value }}"}))
    out = execute_step(p, inputs())
    assert out.result == "{{ missing_step.value }}"  # NoETL keeps the text (lenient) ...
    assert len(out.issues) == 1 and "field tool.input.v" in out.issues[0]  # ... and we say so
    with pytest.raises(StepFailed, match="StrictTemplateError.*field tool.input.v.*missing_step"):
        execute_step(p, inputs(strict=True))


def test_unevaluable_guard_is_reported_and_fatal_in_strict_mode():
    p = payload(
        "s",
        tool=py("result = 1"),
        routing=arcs({"step": "a", "when": "{{ s.nope.deeper > 1 }}"}, {"step": "b"}),
    )
    out = execute_step(p, inputs())
    assert out.next_steps == ["b"]  # the guard counts as false, as in NoETL ...
    assert "next.arcs[0].when" in out.issues[0] and "counts as false" in out.issues[0]
    with pytest.raises(StepFailed, match="next.arcs\\[0\\].when"):
        execute_step(p, inputs(strict=True))


def test_step_reports_its_lifecycle_to_the_recorder():
    from airflow_plugin.events import MemoryRecorder, recording

    recorder = MemoryRecorder()
    p = payload("s", tool=py("result = 2"), routing=arcs({"step": "t"}))
    with recording(recorder, task_id="s"):
        execute_step(p, inputs())
    names = [(e.name, e.alias, e.status) for e in recorder.events]
    assert names == [
        ("StepStarted", "step.enter", "in_progress"),
        ("ToolStarted", None, "in_progress"),
        ("ToolCompleted", "call.done", "success"),
        ("StepFinished", "step.exit", "success"),
        ("NextEvaluated", None, "success"),
    ]
    assert all(e.execution_id == "77" and e.task_id == "s" for e in recorder.events)
    assert recorder.events[3].data["result"] == 2


# -- payload validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "path", "message"),
    [
        ({"step": ""}, "step", "must be a non-empty string"),
        ({"step": "s", "lopo": {}}, "", "unknown key"),
        ({"step": "s", "dialect": "v3"}, "dialect", "must be one of"),
        ({"step": "s", "tool": {"code": "x"}}, "tool", "needs a string `kind`"),
        (
            {"step": "s", "tool": {"kind": "noop"}, "pipeline": [{"kind": "noop"}]},
            "tool",
            "exclusive",
        ),
        (
            {
                "step": "s",
                "pipeline": [{"kind": "noop", "name": "a"}, {"kind": "noop", "name": "a"}],
            },
            "pipeline",
            "duplicate",
        ),
        ({"step": "s", "pipeline": [{"kind": "noop"}, 3]}, "pipeline[1]", "with `kind`"),
        (
            {"step": "s", "routing": {"mode": "parallel", "arcs": []}},
            "routing.mode",
            "exclusive or inclusive",
        ),
        (
            {"step": "s", "routing": {"arcs": [{"when": "x"}]}},
            "routing.arcs[0]",
            "needs a string `step`",
        ),
        (
            {"step": "s", "routing": {"arcs": [{"step": "a"}, {"step": "b", "task_id": 3}]}},
            "routing.arcs[1].task_id",
            "must be a string",
        ),
        ({"step": "s", "case": [{"when": "x"}]}, "case[0]", "with `then`"),
        (
            {"step": "s", "loop": {"iterator": "i", "mode": "sideways", "in": []}},
            "loop.mode",
            "must be one of",
        ),
        (
            {
                "step": "s",
                "loop": {
                    "iterator": "i",
                    "mode": "sequential",
                    "body": {"steps": {"b": {"step": "b", "set": 1}}},
                },
            },
            "loop.body.steps['b'].set",
            "must be an object",
        ),
    ],
)
def test_an_invalid_payload_names_the_field(bad, path, message):
    with pytest.raises(PayloadError, match=message) as caught:
        decode_step(bad)
    # The path comes first, so a reader of the DAG import error goes straight to the field.
    assert caught.value.path == path
    assert not path or f"': `{path}` " in str(caught.value)


def test_a_decoded_step_reads_as_its_payload_and_carries_its_profile():
    payload = {
        "step": "s",
        "dialect": "case-v2",
        "routing": {"arcs": [{"step": "b", "task_id": None}]},
    }
    step = decode_step(payload)
    assert dict(step) == payload and step["dialect"] == "case-v2"
    assert step.profile.name == "case-v2" and step.routing.arcs[0].task_id is None
    assert not step.routing.arcs[0].guarded
    assert decode_step({"step": "s", "generation": "noetl5"}).profile.name == "noetl5"


def test_step_enter_only_fires_rules_written_for_it():
    p = v2(
        tool=py("result = {'z': 1}"),
        case=[
            {
                "when": "{{ workload.always }}",
                "then": {"set": {"ctx": {"y": "{{ result.z }}"}}, "next": ["a"]},
            }
        ],
    )
    out = execute_step(p, inputs(workload={"always": True}))
    assert out.ctx_writes == {"y": 1} and out.next_steps == ["a"]


def test_case_v2_retry_variables_exist():
    p = v2(
        tool=py("result = 1"),
        case=[{"when": "{{ _retry.index == 1 and _retry.count == 1 }}", "then": {"next": ["a"]}}],
    )
    assert execute_step(p, inputs()).next_steps == ["a"]


def test_exclusive_group_arcs_fire_together():
    # v1 `when: X then: [a, b]` lowers to two arcs of one group; `else` to the last arc.
    p = payload(
        tool=py("result = {'ok': True}"),
        routing=arcs(
            {"step": "a", "when": "{{ s.ok }}", "group": 0},
            {"step": "b", "when": "{{ s.ok }}", "group": 0, "args": {"x": 1}},
            {"step": "c", "group": 1},
        ),
    )
    out = execute_step(p, inputs())
    assert out.next_steps == ["a", "b"] and out.next_args == {"b": {"x": 1}}


def test_target_without_task_is_routed_but_not_branched():
    p = payload(
        tool=py("result = 1"), routing=arcs({"step": "end", "task_id": None}, mode="inclusive")
    )
    out = execute_step(p, inputs())
    assert out.next_steps == ["end"] and out.next_task_ids == []
    assert routing_targets(p) == []


def test_render_issues_of_a_failing_step_are_still_reported_as_events():
    from airflow_plugin.events import MemoryRecorder, recording

    recorder = MemoryRecorder()
    p = payload("s", tool=py("raise ValueError(v)", input={"v": "{{ nowhere.x }}"}))
    with recording(recorder), pytest.raises(StepFailed):
        execute_step(p, inputs())
    (warning,) = recorder.named("TemplateWarning")
    assert warning.data["field"] == "tool.input.v" and warning.status == "error"


# -- loop.in that is not a list: normalised per dialect as NoETL's engine of its era does ------


def _loop(collection, dialect):
    from airflow_plugin.runtime.loop import run_loop

    p = payload(
        "lp",
        dialect=dialect,
        input={"item": "{{ iter.it }}"},
        tool=py("result = {'item': item}"),
        loop={"in": "{{ workload.items }}", "iterator": "it"},
    )
    return run_loop(p, inputs(workload={"items": collection}))


@pytest.mark.parametrize("collection", ["abc", "a,b", "[1, 2]", 5, {"a": 1}])
def test_canonical_non_list_loop_in_is_one_item(collection):
    outcome = _loop(collection, "canonical")
    assert outcome.result["stats"] == {"total": 1, "success": 1, "failed": 0}
    assert outcome.result["omitted_results_count"] == 0
    assert len(outcome.result["results"]) == 1
    if collection != "[1, 2]":  # `input` renders JSON text to a list, as NoETL does
        assert outcome.result["results"][0] == {"item": collection}


def test_case_v2_string_loop_in_runs_per_character():
    outcome = _loop("ab", "case-v2")
    assert outcome.result["stats"]["total"] == 2
    assert [r["item"] for r in outcome.result["results"]] == ["a", "b"]
    # that dialect's engine hands downstream steps {results, stats} only
    assert set(outcome.result) == {"results", "stats"}


@pytest.mark.parametrize("dialect", ["canonical", "case-v2", "v1"])
def test_null_loop_in_makes_no_tool_call(dialect):
    outcome = _loop(None, dialect)
    assert outcome.result["stats"] == {"total": 0, "success": 0, "failed": 0}
    assert outcome.result["results"] == []


def test_v1_string_loop_in_fails_naming_the_step():
    with pytest.raises(StepFailed) as info:
        _loop("abc", "v1")
    assert "lp" in str(info.value) and "loop.in must render to a list, got str" in str(info.value)


# -- the loop result's bounds: NoETL's engine (138c10ed) keeps the last 128 results ----------


def test_canonical_loop_result_keeps_the_last_128_and_counts_the_omitted():
    outcome = _loop(list(range(130)), "canonical")
    result = outcome.result
    assert result["stats"] == {"total": 130, "success": 130, "failed": 0}
    assert result["omitted_results_count"] == 2
    assert [r["item"] for r in result["results"]] == list(range(2, 130))


def test_loop_result_bound_follows_noetls_setting(monkeypatch):
    monkeypatch.setenv("NOETL_LOOP_RESULT_MAX_ITEMS", "3")
    result = _loop([1, 2, 3, 4, 5], "canonical").result
    assert [r["item"] for r in result["results"]] == [3, 4, 5]
    assert result["omitted_results_count"] == 2 and result["stats"]["total"] == 5


def test_case_v2_loop_result_keeps_every_result():
    result = _loop(list(range(130)), "case-v2").result
    assert len(result["results"]) == 130 and "omitted_results_count" not in result


def test_a_large_iteration_result_is_kept_as_noetls_preview(monkeypatch):
    from airflow_plugin.runtime.loop import aggregate

    monkeypatch.setenv("NOETL_LOOP_RESULT_MAX_BYTES", "1000")
    big = {"rows": [{"n": i, "deep": {"a": {"b": 1}}} for i in range(200)], "count": 200}
    small = {"n": 1}
    records = [
        {"index": 0, "status": "ok", "result": big},
        {"index": 1, "status": "ok", "result": small},
    ]
    kept = aggregate(records)["results"]
    assert kept[1] == small
    preview = kept[0]
    assert preview["_truncated"] is True and preview["_type"] == "dict"
    assert preview["_original_size_bytes"] > 1000
    assert preview["_preview"]["count"] == 200
    rows = preview["_preview"]["rows"]
    assert rows[:3] == ["dict(2 keys)"] * 3  # two levels deep, as NoETL's preview
    assert rows[3] == "... 197 more"


def test_loop_body_pushes_only_the_results_the_tail_keeps(monkeypatch):
    """A 10-item loop with a bound of 4: the body's XCom carries 4 results, not 10."""
    from airflow_plugin.operators.loop import _bounded_records
    from airflow_plugin.runtime.loop import aggregate

    monkeypatch.setenv("NOETL_LOOP_RESULT_MAX_ITEMS", "4")
    p = payload("lp", tool=py("result = 1"), loop={"in": "[]", "iterator": "it"})
    records = [{"index": i, "status": "ok", "result": {"i": i}} for i in range(10)]
    pushed = _bounded_records(p, records, 10)
    assert [r["result"] for r in pushed] == [None] * 6 + [{"i": i} for i in range(6, 10)]
    assert aggregate(pushed) == aggregate(records)
    assert aggregate(pushed)["omitted_results_count"] == 6


def test_v1_iterator_where_then_limit():
    # NoETL's v1 iterator (58c2a16b): `where` first, then the first `limit` items
    # (v1/iterator_where_limit).
    from airflow_plugin.runtime.loop import StepFailed, render_collection

    loop = {"iterator": "item", "in": [1, 2, 3, 4, 5], "filter": "{{ item > 2 }}", "limit": 2}
    assert render_collection(payload("loop", dialect="v1", loop=loop), inputs()) == [3, 4]
    loop["limit"] = "{{ workload.n }}"
    assert render_collection(
        payload("loop", dialect="v1", loop=loop), inputs(workload={"n": 1})
    ) == [3]
    loop["limit"] = -1
    with pytest.raises(StepFailed, match="loop.limit must be a non-negative integer"):
        render_collection(payload("loop", dialect="v1", loop=loop), inputs())


def test_v1_iterator_order_by_is_a_stable_sort_before_limit():
    # v1/iterator_order_by, v1/iterator_order_by_limit
    from airflow_plugin.runtime.loop import StepFailed, render_collection

    items = [{"n": 3, "id": "a"}, {"n": 1, "id": "b"}, {"n": 3, "id": "c"}]
    loop = {"iterator": "item", "in": items, "order_by": "{{ item.n }}", "limit": 2}
    got = render_collection(payload("loop", dialect="v1", loop=loop), inputs())
    assert [i["id"] for i in got] == ["b", "a"]
    loop["in"], loop["order_by"] = [1, "x"], "{{ item }}"
    with pytest.raises(StepFailed, match="loop.order_by keys cannot be compared"):
        render_collection(payload("loop", dialect="v1", loop=loop), inputs())


def test_python_input_undefined_name_renders_blank_where_the_engine_python_tool_does():
    """138c10ed / dc55c492: the python tool renders a text input again with Jinja's default
    undefined, so `{{ error }}` on a success is ''; a field of an undefined name keeps its text;
    v1's worker hands the tool StrictUndefined, so the text stays (profile field
    python_input_undefined_blank). Either way the run says so."""
    code = "result = {'e': e, 'f': f, 'mixed': mixed}"
    step_input = {"e": "{{ error }}", "f": "{{ nowhere.value }}", "mixed": "x={{ error }}"}
    for dialect in ("canonical", "case-v2"):
        out = execute_step(payload(dialect=dialect, input=step_input, tool=py(code)), inputs())
        assert out.result == {"e": "", "f": "{{ nowhere.value }}", "mixed": "x="}, dialect
        assert any("rendered with its undefined names as ''" in i for i in out.issues)
        assert any("'{{ nowhere.value }}' kept its template text" in i for i in out.issues)
    v1 = execute_step(payload(dialect="v1", input=step_input, tool=py(code)), inputs())
    assert v1.result == step_input


def test_pipeline_result_shape_is_the_profiles():
    """Canonical (138c10ed engine.py:4543, `pipeline_last_task_promoted`): the record with the
    last task's fields laid under it, `{{ s.saved }}` reads them. NoETL 5 (task_sequence.rs:838,
    `pipeline_result_labelled`): the task results by label, flat, nothing promoted:
    `{{ s.save.saved }}` reads the task, `{{ s.saved }}` nothing."""
    steps = [py("result = {'id': 1}", name="shape"), py("result = {'saved': 1}", name="save")]
    guard = arcs({"step": "next", "when": "{{ s.saved == 1 }}"})
    out = execute_step(payload(pipeline=steps, routing=guard), inputs())
    assert out.next_steps == ["next"]
    assert out.result["status"] == "ok" and out.result["results"]["save"] == {"saved": 1}
    n5 = execute_step(payload(pipeline=steps, routing=guard, generation="noetl5"), inputs())
    assert n5.result == {"shape": {"id": 1}, "save": {"saved": 1}}
    assert n5.next_steps == []
    labelled = arcs({"step": "next", "when": "{{ s.save.saved == 1 and s.shape.id == 1 }}"})
    n5 = execute_step(payload(pipeline=steps, routing=labelled, generation="noetl5"), inputs())
    assert n5.next_steps == ["next"]
    assert not NOETL5.pipeline_last_task_promoted and NOETL5.pipeline_result_labelled


def test_arc_output_data_is_the_results_own_data_where_the_engine_reads_it_so():
    """138c10ed engine.py:413 (`output.data` = `step_result.get("data", step_result)`): a result
    with its own `data` key hands that to `output.data` in the step's arcs and `set`; a result
    without one is `output.data` itself. v1 has no `output`: noetlc keeps the result."""
    guard = arcs({"step": "next", "when": "{{ output.data.status == 'ready' }}"})
    own = py("result = {'data': {'status': 'ready'}, 'status': 'ok'}")
    out = execute_step(
        payload(tool=own, routing=guard, set={"ctx.s": "{{ output.data }}"}), inputs()
    )
    assert out.next_steps == ["next"] and out.ctx_writes == {"s": {"status": "ready"}}
    plain = py("result = {'status': 'ready'}")
    assert execute_step(payload(tool=plain, routing=guard), inputs()).next_steps == ["next"]
    v1 = execute_step(payload(dialect="v1", tool=own, routing=guard), inputs())
    assert v1.next_steps == []


def test_a_canonical_result_answers_the_envelope_fields_it_lacks():
    """138c10ed engine.py:312 hydrates a step result as `{data: value, status, ...}` for a list
    or scalar and sets `status` by default on a mapping: `{{ ids.data }}` is the list and
    `{{ s.status }}` COMPLETED (profile field result_envelope_fields); v1 has neither."""
    p = payload(
        "b",
        input={
            "d": "{{ ids.data }}",
            "n": "{{ ids | length }}",
            "first": "{{ ids[0] }}",
            "text": "{{ word.data }}",
            "num": "{{ count.data + 1 }}",
            "st": "{{ a.status }}",
            "own": "{{ failed.status }}",
        },
        tool=py("result = [d, n, first, text, num, st, own]"),
    )
    results = {
        "ids": [1, 2, 3],
        "word": "hi",
        "count": 4,
        "a": {"x": 1},
        "failed": {"status": "error", "error": "boom"},
    }
    out = execute_step(p, inputs(results=results))
    assert out.result == [[1, 2, 3], 3, 1, "hi", 5, "COMPLETED", "error"]
    assert type(out.result[0]) is list and type(out.result[3]) is str
    v1 = execute_step({**p, "dialect": "v1"}, inputs(results=results))
    assert v1.result[0] == "{{ ids.data }}" and v1.result[5] == "{{ a.status }}"


def test_a_v1_loop_steps_result_field_is_the_plain_list_of_results():
    """58c2a16b renders a list step result as `{'result': value}` (render.py:148), and the
    iterator's result is the list of item results: `{{ city_loop.result | length }}` counts the
    items, not the keys of noetlc's loop record (profile field loop_result_is_list)."""
    record = {"results": [{"t": 1}, {"t": 2}], "stats": {"total": 2}, "omitted_results_count": 0}
    p = payload(
        "b",
        dialect="v1",
        input={"n": "{{ city_loop.result | length }}", "first": "{{ city_loop.result[0].t }}"},
        tool=py("result = [n, first]"),
    )
    assert execute_step(p, inputs(results={"city_loop": record})).result == [2, 1]
    canonical = execute_step({**p, "dialect": "canonical"}, inputs(results={"city_loop": record}))
    assert canonical.result[0] == 0  # no `result` field: the python tool renders length 0


def test_a_decoded_step_cannot_be_changed():
    # Shared by every iteration and call of the step: a write would leak between them.
    from dataclasses import FrozenInstanceError

    step = decode_step({"step": "s", "routing": {"arcs": [{"step": "b"}]}})
    with pytest.raises(FrozenInstanceError):
        step.name = "t"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        step.routing.arcs[0].step = "c"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del step.guard
