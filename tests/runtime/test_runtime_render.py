"""Rendering, value coercion, conditions and result addressing (noetl_dsl.md section 5)."""

from __future__ import annotations

import datetime as dt

import pytest

from airflow_plugin.templating.context import build_context
from airflow_plugin.templating.render import (
    RenderError,
    _template,
    coerce_rendered,
    evaluate_condition,
    render_value,
)


@pytest.fixture
def ctx():
    return build_context(
        workload={"n": 5, "items": [1, 2, 3], "name": "ada", "flag": True, "cfg": {"items": ["x"]}},
        results={
            "fetch": {"rows": [{"id": 1}], "count": 2},
            "http": {"status_code": 200, "data": {"page": 3}},
            "listy": [1, 2],
        },
        execution_id=123,
    )


# -- native values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ items }}", [1, 2, 3]),
        ("  {{ n }} ", 5),
        ("{{ n * 2 }}", 10),
        ("{{ fetch.rows }}", [{"id": 1}]),
        ("{{ fetch }}", {"rows": [{"id": 1}], "count": 2}),
        ("{{ flag }}", True),
        ("{{ none_value | default(none) }}", None),
        ("{{- n -}}", 5),
    ],
)
def test_single_expression_returns_native_object(ctx, template, expected):
    assert render_value(template, ctx, strict=True) == expected


def test_native_result_is_plain_data_not_a_proxy(ctx):
    value = render_value("{{ fetch }}", ctx, strict=True)
    assert type(value) is dict


def test_two_expressions_are_text_then_coerced(ctx):
    assert render_value("{{ n }}-{{ name }}", ctx, strict=True) == "5-ada"
    assert render_value("{{ n }}{{ n }}", ctx, strict=True) == 55


# -- coercion -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("[{{ n }}, {{ n + 1 }}]", [5, 6]),
        ('{"a": {{ n }}}', {"a": 5}),
        ("{'a': '{{ name }}'}", {"a": "ada"}),  # Python literal, not JSON
        ("{{ n > 1 }} ", True),
        ("{{ 'False' }}x", "Falsex"),
        ("{{ 'FALSE' }}", False),  # NoETL's renderers turn true/false text into a bool
        ("{{ name }}", "ada"),  # single expression: native string otherwise
        ("value={{ n }}", "value=5"),
        ("{{ n }}.5", 5.5),
        ("{{ none_ }}None", None),
        ("-{{ n }}", -5),
    ],
)
def test_rendered_text_is_coerced(template, expected, ctx):
    ctx = dict(ctx, none_="")
    assert render_value(template, ctx, strict=True) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("False", False),
        ("null", None),
        ("none", None),
        ("42", 42),
        ("-1.5e3", -1500.0),
        ("[1, 'a']", [1, "a"]),
        ("[not json", "[not json"),
        ("{broken}", "{broken}"),
        ("hello", "hello"),
        ("", ""),
        ("inf", "inf"),
    ],
)
def test_coerce_rendered(text, expected):
    assert coerce_rendered(text) == expected


def test_tojson_keeps_string(ctx):
    out = render_value("{{ items | tojson }}", ctx, strict=True)
    assert out == "[1, 2, 3]" and isinstance(out, str)
    sql = render_value("INSERT INTO t VALUES ('{{ fetch | tojson }}')", ctx, strict=True)
    assert sql == 'INSERT INTO t VALUES (\'{"rows": [{"id": 1}], "count": 2}\')'


def test_tojson_handles_datetime_and_undefined():
    ctx = {"when": dt.datetime(2026, 1, 2, 3, 4, 5)}
    assert render_value("{{ when | tojson }}", ctx, strict=True) == '"2026-01-02T03:04:05"'
    assert render_value("{{ missing | tojson }}", ctx, strict=True) == "null"
    # not HTML-escaped, unlike Jinja's built-in tojson
    assert render_value("{{ s | tojson }}", {"s": "<a&b>"}, strict=True) == '"<a&b>"'


def test_b64encode_filter():
    assert render_value("{{ 'user:pw' | b64encode }}", {}, strict=True) == "dXNlcjpwdw=="


def test_recursion_over_dicts_and_lists_keeps_keys(ctx):
    value = {"{{ name }}": ["{{ n }}", {"deep": "{{ items }}"}, 7, None]}
    assert render_value(value, ctx, strict=True) == {
        "{{ name }}": [5, {"deep": [1, 2, 3]}, 7, None]
    }


# -- strict vs lenient ------------------------------------------------------------------------


def test_lenient_keeps_original_text_on_undefined(ctx):
    assert render_value("{{ nope.x }}", ctx, strict=False) == "{{ nope.x }}"
    assert render_value("id={{ nope }}", ctx, strict=False) == "id={{ nope }}"
    assert render_value({"a": "{{ nope }}", "b": "{{ n }}"}, ctx, strict=False) == {
        "a": "{{ nope }}",
        "b": 5,
    }


def test_strict_raises_render_error(ctx):
    with pytest.raises(RenderError, match="nope"):
        render_value("{{ nope }}", ctx, strict=True)
    with pytest.raises(RenderError):
        render_value("x {{ nope.y }}", ctx, strict=True)


def test_syntax_error_lenient_and_strict(ctx):
    assert render_value("# uses {{ vars.* }} here", ctx, strict=False) == "# uses {{ vars.* }} here"
    with pytest.raises(RenderError):
        render_value("{{ vars.* }}", ctx, strict=True)


def test_sandbox_blocks_unsafe_attributes(ctx):
    with pytest.raises(RenderError):
        render_value("{{ ''.__class__.__mro__ }}", ctx, strict=True)
    assert render_value("{{ ''.__class__ }}", ctx, strict=False) == "{{ ''.__class__ }}"


def test_templates_are_compiled_once(ctx):
    source = "cache-probe {{ n }} {{ name }}"
    render_value(source, ctx, strict=True)
    before = _template.cache_info().hits
    render_value(source, ctx, strict=True)
    assert _template.cache_info().hits == before + 1


# -- result addressing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ fetch.count }}", 2),
        ("{{ fetch['count'] }}", 2),
        ("{{ fetch.data.count }}", 2),  # no `data` key: data is the whole result
        ("{{ fetch.data.data.rows[0].id }}", 1),
        ("{{ http.data.page }}", 3),  # real `data` key wins
        ("{{ http.status_code }}", 200),
        ("{{ listy[1] }}", 2),
        ("{{ fetch.missing is defined }}", False),
        ("{{ fetch.rows is defined }}", True),
        ("{{ 'count' in fetch }}", True),
        ("{{ fetch | length }}", 2),
    ],
)
def test_step_result_proxy(ctx, template, expected):
    assert render_value(template, ctx, strict=True) == expected


def test_key_wins_over_dict_method(ctx):
    assert render_value("{{ workload.items }}", ctx, strict=True) == [1, 2, 3]
    assert render_value("{{ cfg.items[0] }}", ctx, strict=True) == "x"
    assert render_value("{{ {'values': 4}.values }}", ctx, strict=True) == 4


def test_proxy_inside_text_renders_like_the_dict(ctx):
    assert render_value("{{ fetch }} ", ctx, strict=True) == {"rows": [{"id": 1}], "count": 2}


# -- conditions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (None, True),  # arc without when
        (True, True),
        (False, False),
        ("{{ n > 3 }}", True),
        ("{{ n > 9 }}", False),
        ("{{ 0 }}", False),
        ("{{ 'no' }}", False),
        ("{{ 'None' }}", False),
        ("{{ '' }}", False),
        ("{{ [] }}", False),
        ("{{ name }}", True),
        ("{{ 'ok' }}", True),
        ("{{ undefined_thing.x }}", False),  # error -> false
        ("{{ 1 / 0 }}", False),
        ("{{ fetch.rows }}", True),
    ],
)
def test_arc_truthiness(ctx, expr, expected):
    assert evaluate_condition(expr, ctx, flavor="arc") is expected
    assert evaluate_condition(expr, ctx, flavor="engine") is expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (True, True),
        (False, False),
        ("{{ n > 3 }}", True),
        ("{{ 'yes' }}", True),
        ("{{ 'YES' }}", True),
        ("{{ 1 }}", True),
        ("{{ 'ok' }}", False),  # arc rule would say true
        ("{{ name }}", False),
        ("{{ 2 }}", False),
        ("{{ nope }}", False),
        (None, False),
    ],
)
def test_policy_truthiness(ctx, expr, expected):
    assert evaluate_condition(expr, ctx, flavor="policy") is expected
    assert evaluate_condition(expr, ctx, flavor="worker") is expected


def test_unknown_flavor_rejected(ctx):
    with pytest.raises(ValueError, match="flavor"):
        evaluate_condition("{{ true }}", ctx, flavor="maybe")


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ 'true' }}", True),
        ("{{ 'FALSE' }}", False),
        ("{{ name | replace('ada', 'True') }}", True),
        ("{{ word }}", "true"),  # a plain name hands back its value as it is
        ("{{ cfg.word }}", "false"),
        ("{{ 'truth' }}", "truth"),
    ],
)
def test_true_false_text_of_an_expression_is_a_bool_as_noetls_engine_renders(template, expected):
    """138c10ed's _render_template (recorded: differential python_results/render_coercion)."""
    c = build_context(workload={"name": "ada", "word": "true", "cfg": {"word": "false"}})
    assert render_value(template, c, strict=True) == expected
    kept = render_value(template, c, strict=True, coerce=False)  # python code: text stays text
    assert isinstance(kept, str) and kept.lower() == str(expected).lower()


def test_a_bool_written_into_text_follows_the_engines_renderer():
    # NoETL 5 renders with minijinja (`true`), the Python engines with Jinja (`True`); a template
    # that is the whole value keeps the bool on both, and `{% if %}` tests it either way.
    from noetl_compile.engine_profiles import PROFILES

    workload = {"enabled": True, "dry_run": False}
    text = "enabled={{ workload.enabled }} dry={{ workload.dry_run }} more={{ 2 > 1 }}"
    for name, (yes, no) in {"noetl5": ("true", "false"), "canonical": ("True", "False")}.items():
        context = build_context(workload=workload, profile=PROFILES[name])
        assert render_value(text, context, strict=True) == f"enabled={yes} dry={no} more={yes}"
        assert render_value("{{ workload.enabled }}", context, strict=True) is True
        branch = "{% if workload.dry_run %}x{% else %}y{% endif %}"
        assert render_value(branch, context, strict=True) == "y"
        # a bool inside a list or mapping written whole keeps its own rendering (`tojson`: JSON)
        assert render_value("{{ [workload.enabled] | tojson }}", context, strict=True) == "[true]"
