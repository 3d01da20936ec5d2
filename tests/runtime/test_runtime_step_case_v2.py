"""``execute_step`` with case-v2 rules (events, `then` blocks, `vars`, retries with collect),
v1 error retries, render issues reported and fatal in strict mode, the lifecycle reported to the
recorder."""

from __future__ import annotations

import pytest

from airflow_plugin.runtime.step import StepFailed, execute_step, routing_targets
from tests.runtime.step_support import arcs, inputs, payload, py, v2

# -- case-v2 -------------------------------------------------------------------------------------


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
