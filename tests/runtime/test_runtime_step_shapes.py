"""``execute_step``: an invalid payload names its field; `loop.in` that is not a list, normalised
per dialect as NoETL's engine of its era does; the loop result's bounds; the result shapes and
fields each engine's profile reads."""

from __future__ import annotations

import pytest

from airflow_plugin.runtime.step import StepFailed, execute_step, routing_targets
from noetl_compile.engine_profiles import NOETL5
from noetl_compile.step_decode import decode_step
from noetl_compile.step_model import PayloadError
from tests.runtime.step_support import arcs, inputs, payload, py, v2

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
