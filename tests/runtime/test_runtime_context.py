"""Render context namespaces and execution ids."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from airflow_plugin.templating.context import apply_ctx_writes, build_context, with_loop
from airflow_plugin.templating.ids import execution_id_for
from airflow_plugin.templating.render import render_value
from noetl_compile.engine_profiles import CANONICAL, CASE_V2, NOETL5, V1


def r(template, context):
    return render_value(template, context, strict=True)


def test_workload_is_flattened_and_namespaced():
    c = build_context(workload={"api_url": "http://x", "page": 1}, execution_id=7)
    assert r("{{ api_url }}", c) == "http://x"
    assert r("{{ workload.api_url }}", c) == "http://x"
    assert r("{{ ctx.api_url }}", c) == "http://x"


def test_ctx_writes_override_workload_everywhere():
    c = build_context(workload={"total": 1}, ctx={"total": 2, "seen": True})
    assert r("{{ total }}", c) == 2
    assert r("{{ ctx.total }}", c) == 2
    assert r("{{ workload.total }}", c) == 2  # one variables store, as in NoETL
    assert r("{{ seen }}", c) is True


def test_step_names_and_reserved_keys_are_not_shadowed():
    c = build_context(
        workload={"fetch": "workload value", "result": "w", "event": "w", "other": 1},
        results={"fetch": {"rows": [1]}},
        step_names=["later_step"],
        ctx={"later_step": "ctx value"},
    )
    assert r("{{ fetch.rows }}", c) == [1]
    # canonical: a finished step's result is the execution variable of its name (NoETL 138c10ed
    # writes variables[step] = result over the workload's value)
    assert r("{{ workload.fetch }}", c) == {"rows": [1]}
    v1 = build_context(workload={"fetch": "workload value"}, results={"fetch": {}}, profile=V1)
    assert r("{{ workload.fetch }}", v1) == "workload value"
    assert "result" not in c and "event" not in c  # reserved: only via workload.*
    assert r("{{ workload.result }}", c) == "w"
    assert "later_step" not in c


def test_execution_id_and_job_are_digit_strings():
    c = build_context(execution_id=987654321)
    assert r("{{ execution_id }}", c) == "987654321"
    assert r("id-{{ execution_id }}", c) == "id-987654321"
    assert (
        r("{{ job.uuid }}", c)
        == r("{{ job.id }}", c)
        == r("{{ job.execution_id }}", c)
        == "987654321"
    )


def test_vars_namespace_only_for_case_v2_or_when_given():
    assert "vars" not in build_context(profile=CANONICAL)
    assert build_context(profile=CASE_V2)["vars"] == {}
    assert r("{{ vars.user }}", build_context(profile=CASE_V2, vars={"user": 3})) == 3


def test_loop_names():
    c = with_loop(build_context(), iterator="city", item={"name": "Oslo"}, index=1, length=2)
    assert r("{{ iter.city.name }}", c) == "Oslo"
    assert r("{{ city.name }}", c) == "Oslo"
    assert r("{{ loop_index }}", c) == 1
    assert r("{{ iter._last }}", c) is True


def test_apply_ctx_writes_respects_protection():
    c = build_context(results={"fetch": {"a": 1}})
    c2 = apply_ctx_writes(c, {"fetch": "shadow?", "x": 1})
    assert r("{{ fetch.a }}", c2) == 1
    assert r("{{ ctx.fetch }}", c2) == "shadow?"
    assert r("{{ x }}", c2) == 1
    assert "x" not in c  # the original context is untouched


# -- execution ids ----------------------------------------------------------------------------


def test_execution_id_is_deterministic_and_distinct():
    a = execution_id_for("dag", "manual__2026-01-01")
    assert a == execution_id_for("dag", "manual__2026-01-01")
    assert a != execution_id_for("dag", "manual__2026-01-02")
    assert execution_id_for("ab", "c") != execution_id_for("a", "bc")


@given(st.text(), st.text())
def test_execution_id_is_positive_63_bit(dag_id, run_id):
    value = execution_id_for(dag_id, run_id)
    assert isinstance(value, int)
    assert 0 < value < 2**63


def test_runtime_import_does_not_import_airflow():
    code = (
        "import sys, airflow_plugin, airflow_plugin.runtime, airflow_plugin.tools;"
        "bad = [m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')];"
        "assert not bad, bad"
    )
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=root)


def test_canonical_result_has_noetls_context_alias():
    """138c10ed gives a plain dict result a `context` alias of itself (recorded:
    tests/differential/cases/python_results/*context_alias*, result_proxy_context)."""
    c = build_context(results={"s": {"a": 1}, "own": {"context": {"b": 2}, "a": 1}})
    assert r("{{ s.context.a }}", c) == 1
    assert r("{{ s.context }}", c) == {"a": 1}
    assert r("{{ own.context }}", c) == {"b": 2}  # a result's own `context` key wins
    v2 = build_context(results={"s": {"a": 1}}, profile=CASE_V2)
    assert render_value("{{ s.context | default('absent') }}", v2, strict=False) == "absent"
    # A filter expression's 'none' text becomes None, as NoETL's renderers coerce it (recorded:
    # case_v2/next_args); a plain path hands back the value as it is.
    assert render_value("{{ s.context | default('none') }}", v2, strict=False) is None
    assert r("{{ s.t }}", build_context(results={"s": {"t": "none"}})) == "none"


def test_execution_variables_merge_a_payloads_ctx_flat_in_canonical_only():
    from airflow_plugin.templating.context import execution_variables

    workload = {"a": 1, "b": 2}
    request = {"ctx": {"a": 5, "z": 0}, "b": 3}
    assert execution_variables(workload, request) == {"a": 5, "b": 3, "z": 0}
    assert execution_variables(workload, request, CASE_V2) == {
        "a": 1,
        "b": 3,
        "ctx": {"a": 5, "z": 0},
    }


def test_entry_args_are_the_request_payload_without_run_controls():
    from airflow_plugin.templating.context import entry_args

    request = {"c": 3, "noetl_strict": True}
    assert entry_args(request) == {"c": 3}
    assert entry_args(request, V1) == {} and entry_args(request, CASE_V2) == {}


def test_canonical_ctx_holds_each_read_step_result_as_noetl_variables_do():
    # 138c10ed ExecutionState.mark_step_completed: variables[step] = result (recorded:
    # tests/differential/cases/ctx/ctx_keys_after_steps, step_result_in_ctx)
    c = build_context(workload={"w": 1}, results={"start": {"r": 1}}, ctx={"x": 2})
    assert r("{{ ctx.start.r }}", c) == 1
    assert r("{{ ctx }}", c) == {"w": 1, "start": {"r": 1}, "x": 2}
    assert r("{{ ctx.start.data.r }}", c) == 1  # the same result proxy as {{ start }}
    # a later `set` of the step's name writes over it, as in NoETL's one variables store
    assert r("{{ ctx.start }}", build_context(results={"start": {}}, ctx={"start": 5})) == 5
    # other engines keep step results out of ctx
    for profile in (CASE_V2, V1, NOETL5):
        other = build_context(workload={"w": 1}, results={"start": {"r": 1}}, profile=profile)
        assert r("{{ ctx }}", other) == {"w": 1}, profile.name


def test_a_canonical_loop_item_writes_its_iterator_and_loop_index_into_ctx():
    from airflow_plugin.templating.context import loop_variables

    binding = {"iterator": "it", "item": {"n": 3}, "index": 2}
    canonical = {"step": "s", "loop": {"iterator": "it", "in": "{{ xs }}"}}
    assert loop_variables(canonical, binding) == {"it": {"n": 3}, "loop_index": 2}
    assert loop_variables({**canonical, "dialect": "case-v2"}, binding) == {}
    assert loop_variables({**canonical, "generation": "noetl5"}, binding) == {}
    cursor = {"step": "s", "loop": {"iterator": "it", "cursor": {"kind": "postgres"}}}
    assert loop_variables(cursor, binding) == {}


def test_case_v2_vars_are_bare_names_too():
    # dc55c492 stores `vars` in the execution variables its render context spreads to the top
    # level (recorded: tests/differential/cases/case_v2/vars_bare_in_args)
    c = build_context(vars={"got": 3, "event": "x"}, profile=CASE_V2, workload={"got": 0})
    assert r("{{ got }}", c) == 3 and r("{{ vars.got }}", c) == 3
    assert "event" not in c  # reserved names keep their meaning
    canonical = build_context(vars={"got": 3}, workload={"got": 0})
    assert r("{{ got }}", canonical) == 0


def test_catalog_id_is_the_dags_where_the_engine_binds_one():
    """`catalog_id` (138c10ed engine.py:894, dc55c492 :391, NoETL 5 state.rs:1160) is the
    catalog entry's id as text; on Airflow the DAG is the entry: one id per DAG, every run.
    v1's contexts bind none (profile.catalog_id_bound; recorded:
    template_names/c_catalog_id_dict, template_names/s_catalog_id_dict)."""
    from airflow_plugin.templating.ids import catalog_id_for
    from noetl_compile.engine_profiles import PROFILES

    one, other = catalog_id_for("orders"), catalog_id_for("refunds")
    assert one == catalog_id_for("orders") and one != other and 0 < one < 2**63
    for generation in ("canonical", "case-v2", "noetl5"):
        context = build_context(catalog_id=one, profile=PROFILES[generation])
        assert context["catalog_id"] == str(one), generation
    assert "catalog_id" not in build_context(catalog_id=one, profile=PROFILES["v1"])
    assert "catalog_id" not in build_context(profile=PROFILES["canonical"])


def test_a_noetl5_loop_item_sees_total_bare_index_and_its_ctx():
    """NoETL 5 build_iteration_command (noetl/server commands.rs:195-217): the item, `_index`
    and `_total` at the top and under `iter`, and a `ctx` built after them; the Python engines
    bind none of these (profile.loop_total_and_bare_index)."""
    base = build_context(workload={"x": 5}, profile=NOETL5)
    item = with_loop(base, iterator="it", item="a", index=1, length=3, profile=NOETL5)
    assert (item["_index"], item["_total"], item["iter"]["_total"]) == (1, 3, 3)
    assert item["ctx"]["it"] == "a" and item["ctx"]["x"] == 5 and base["ctx"] == {"x": 5}
    plain = with_loop(
        build_context(), iterator="it", item="a", index=1, length=3, profile=CANONICAL
    )
    assert "_total" not in plain and "_total" not in plain["iter"] and "it" not in plain["ctx"]


def test_a_step_input_sees_the_command_it_is_rendered_for():
    """NoETL's Python engines render a step's input when they issue its command, under the
    event `command_creation` of that step with an empty payload (138c10ed engine.py:4160,
    dc55c492 engine.py:1277; recorded: template_names/c_event_fields_dict, s_event_keys_dict);
    v1 and NoETL 5 bind no `event` there (profile.input_event_bound)."""
    from datetime import datetime

    from airflow_plugin.templating.context import issuing_context

    for profile in (CANONICAL, CASE_V2):
        context = issuing_context(build_context(profile=profile), "probe", profile)
        event = context["event"]
        assert (event["name"], event["step"], event["payload"]) == ("command_creation", "probe", {})
        assert datetime.fromisoformat(event["timestamp"]).tzinfo is not None
        text = "{{ [event | list | sort, event.payload | list] | tojson }}"
        rendered = render_value(text, context, strict=True)
        assert rendered == '[["name", "payload", "step", "timestamp"], []]'
    for profile in (V1, NOETL5):
        assert "event" not in issuing_context(build_context(profile=profile), "probe", profile)
    # 138c10ed also binds its output view there, built from the empty payload and a step with
    # no result yet (engine.py:922; recorded: template_names/c_output_keys_dict); dc55c492 none.
    output = issuing_context(build_context(profile=CANONICAL), "probe", CANONICAL)["output"]
    assert output == {"status": "ok", "data": None, "ref": None, "error": None}
    assert "output" not in issuing_context(build_context(profile=CASE_V2), "probe", CASE_V2)
