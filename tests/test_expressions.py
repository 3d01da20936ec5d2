"""Template scanning: free references with paths and positions, locals, guards, filters and
tests, syntax errors located on the offending token, and coverage of the real corpus."""

from __future__ import annotations

import logging
import re

import jinja2
import lark
import pytest
from jinja2 import meta

from bench.template_coverage import measure, templated_strings
from noetl_compile.analyze import expressions, template_parse
from noetl_compile.analyze.expressions import (
    BUILTIN_GLOBALS,
    TemplateScan,
    is_templated,
    scan_template,
    template_tags,
)
from tests.corpus import CORPUS


def references(text: str) -> list[tuple[str, tuple, bool]]:
    scan = scan_template(text)
    assert scan.error is None, scan.error
    for reference in scan.references:  # every offset points at its root name
        assert text.startswith(reference.root, reference.offset), reference
    return [(reference.root, reference.path, reference.guarded) for reference in scan.references]


def roots(text: str) -> list[str]:
    return [root for root, _, _ in references(text)]


def jinja_message(text: str) -> str:
    with pytest.raises(jinja2.TemplateSyntaxError) as raised:
        jinja2.Environment().parse(text)
    return raised.value.message


@pytest.fixture(scope="module")
def corpus_strings():
    return templated_strings(CORPUS)


# ----------------------------------------------------------------------------- references


@pytest.mark.parametrize(
    "text, expected",
    [
        ("{{ fetch.data.items[0] }}", [("fetch", ("data", "items", 0), False)]),
        ("{{ a['x'].b }}", [("a", ("x", "b"), False)]),
        ('{{ a["x"]["y"] }}', [("a", ("x", "y"), False)]),
        ("{{ rows[-1].id }}", [("rows", (-1, "id"), False)]),
        ("{{ loop_data.0.name }}", [("loop_data", (0, "name"), False)]),
        # a dynamic subscript ends the static path, and is itself read
        ("{{ a.b[i].c }}", [("a", ("b",), False), ("i", (), False)]),
        ("{{ a[1:3] }}", [("a", (), False)]),
        # a method call is not part of the data path
        ("{{ x.get('a', y) }}", [("x", (), False), ("y", (), False)]),
        ("{{ step.data.items() | list }}", [("step", ("data",), False)]),
        ("{{ f(x, key=y) }}", [("f", (), False), ("x", (), False), ("y", (), False)]),
        ("{{ a if c else b }}", [("a", (), False), ("c", (), False), ("b", (), False)]),
        ("{{ a if c }}", [("a", (), False), ("c", (), False)]),
        (
            "{{ -x ** 2 + y // 3 % z ~ 'k' }}",
            [("x", (), False), ("y", (), False), ("z", (), False)],
        ),
        ("{{ 1 < a.n <= b }}", [("a", ("n",), False), ("b", (), False)]),
        (
            "{{ x not in [y, 1.5e3] and not z }}",
            [("x", (), False), ("y", (), False), ("z", (), False)],
        ),
        ("{{ {'k': v, 'n': none, 't': True} }}", [("v", (), False)]),
        ("{{ (a, b) }}", [("a", (), False), ("b", (), False)]),
        ("{{ x | map(attribute='y') | join(sep) }}", [("x", (), False), ("sep", (), False)]),
        ("{{ 'a' 'b' ~ \"it's\" }}", []),
        ("{{ true and False or none }}", []),
        ("{{ range(3) | list }}{{ dict(a=1) }}{{ namespace() }}", []),
        (
            "{{ a.if }}{{ b.not }}{{ index }}",
            [("a", ("if",), False), ("b", ("not",), False), ("index", (), False)],
        ),
    ],
)
def test_references(text, expected):
    assert references(text) == expected


def test_offsets_are_into_the_whole_multiline_text():
    text = (
        "SELECT *\nFROM {{ workload.schema }}.items\n"
        "WHERE id = '{{ fetch.rows[0].id }}'\n"
        "  AND n < {{ workload.limit | int }};\n"
    )
    scan = scan_template(text)
    assert [(r.root, r.path, r.offset) for r in scan.references] == [
        ("workload", ("schema",), text.index("workload.schema")),
        ("fetch", ("rows", 0, "id"), text.index("fetch")),
        ("workload", ("limit",), text.index("workload.limit")),
    ]
    assert scan.filters == (("int", text.index("int")),)


def test_offsets_inside_a_multiline_expression():
    text = "{{ {\n  'a': first.x,\n  'b': second | default(0)\n} | tojson }}"
    assert [(r.root, r.offset) for r in scan_template(text).references] == [
        ("first", text.index("first")),
        ("second", text.index("second")),
    ]


def test_whitespace_control_marks():
    text = "{%- if a -%}\n  {{- b.c -}}\n{%+ endif +%}"
    assert [(r.root, r.offset) for r in scan_template(text).references] == [
        ("a", text.index("a ")),
        ("b", text.index("b.c")),
    ]


def test_comments_and_raw_blocks_are_skipped():
    assert roots("{# {{ no }} #}{% raw %}{{ nope }}{% endraw %}{{ yes }}") == ["yes"]


def test_closing_marks_inside_strings_and_braces():
    assert references("{{ {'a': x}}}{{ '}}' ~ y }}") == [("x", (), False), ("y", (), False)]


# ----------------------------------------------------------------------------- locals


@pytest.mark.parametrize(
    "text, expected",
    [
        ("{% set y = z %}{{ y.q }}", ["z"]),
        ("{{ y }}{% set y = 1 %}{{ y }}", ["y"]),  # read before it is set
        ("{% set x = x + 1 %}", ["x"]),
        ("{% set a, b = c %}{{ a }}{{ b }}", ["c"]),
        (
            "{% for k, v in d.items() %}{{ k }}{{ v.x }}{{ loop.index }}{% endfor %}{{ k }}{{ loop }}",
            ["d", "k", "loop"],
        ),
        ("{% for (a, b) in pairs %}{{ a }}{{ b }}{% endfor %}", ["pairs"]),
        ("{% for x in xs if x.ok %}{{ x }}{% else %}{{ x }}{% endfor %}", ["xs", "x"]),
        ("{% for x in xs %}{% set t = x %}{% endfor %}{{ t }}", ["xs", "t"]),
        ("{% if c %}{% set y = 2 %}{% elif d %}{% else %}{% endif %}{{ y }}", ["c", "d"]),
        (
            "{% macro m(a, b=c) %}{{ a }}{{ b }}{{ d }}{{ caller() }}{% endmacro %}{{ m(1) }}",
            ["c", "d"],
        ),
        ("{% call(u) render(users) %}{{ u }}{{ z }}{% endcall %}", ["render", "users", "z"]),
        ("{% with a = b, e = 1 %}{{ a }}{{ e }}{% endwith %}{{ a }}", ["b", "a"]),
        ("{% set blk | trim %}{{ inner }}{% endset %}{{ blk }}", ["inner"]),
        (
            (
                "{% set ns = namespace(t=0) %}{% for i in items %}{% set ns.t = ns.t + i %}{% endfor %}"
                "{{ ns.t }}"
            ),
            ["items"],
        ),
        ("{% filter upper %}{{ w }}{% endfilter %}", ["w"]),
    ],
)
def test_locals_are_not_references(text, expected):
    assert roots(text) == expected


# ----------------------------------------------------------------------------- guards, filters


@pytest.mark.parametrize(
    "text, expected",
    [
        ("{{ x is defined and x.y is not undefined }}", [("x", (), True), ("x", ("y",), True)]),
        ("{{ a.b | default('z') }}{{ c | d }}", [("a", ("b",), True), ("c", (), True)]),
        ("{{ a | default(b) }}", [("a", (), True), ("b", (), False)]),
        ("{{ x is none }}", [("x", (), False)]),
        ("{{ (a or b) | default(1) }}", [("a", (), False), ("b", (), False)]),
        ("{{ a.b[i] | default(0) }}", [("a", ("b",), True), ("i", (), False)]),
    ],
)
def test_guarded_references(text, expected):
    assert references(text) == expected


def test_filters_and_tests_with_offsets():
    text = "{{ x | default('a') | int }}{% if y is divisibleby(3) and z is not none %}{% endif %}"
    scan = scan_template(text)
    assert scan.filters == (("default", text.index("default")), ("int", text.index("int")))
    assert scan.tests == (("divisibleby", text.index("divisibleby")), ("none", text.index("none")))
    block = "{% filter upper | trim %}{{ w | e }}{% endfilter %}"
    assert [name for name, _ in scan_template(block).filters] == ["upper", "trim", "e"]
    assert [name for name, _ in scan_template("{{ x is sameas false }}").tests] == ["sameas"]


# ----------------------------------------------------------------------------- syntax errors


@pytest.mark.parametrize(
    "text, bad_token",
    [
        ("x {{ a + }} y", "}} y"),  # unexpected end of print statement
        ("{{ a.b }", "}"),  # unbalanced brace
        ("{{ a b }}", "b }}"),
        ("{{ ctx.* }}", "* }}"),
        ("{{ 'unterminated }}", "'unterminated"),
        ("{% if a %}{% endfor %}", "endfor"),
        ("{% else %}", "else"),
        ("{% if a %}{% else %}{% elif b %}{% endif %}", "elif"),
        ("{% setx y %}", "setx"),
        ("{{ f(a=1, b) }}", "f("),
        ("{{ x is defined if y else z }}", "y else"),  # Jinja takes `if` as the test's argument
        ("{{ x is e is defined }}", "is defined"),
        ("{{ a }} {# open", "{# open"),
        ("line one\n  {{ fetch.rows[0] | default( }}\nline three", "}}\nline"),
        (
            "SELECT 1;\n{% for x in xs %}\n  {{ x }}\n{% endfor %}\n{% if y %}\nno end\n",
            None,
        ),  # at the end of the template
        ("{% if x %}no end", None),
    ],
)
def test_syntax_errors_point_at_the_offending_token(text, bad_token):
    error = scan_template(text).error
    assert error is not None
    assert error.message == jinja_message(text)
    assert error.offset == (len(text) if bad_token is None else text.index(bad_token))


@pytest.mark.parametrize(
    "text",
    [
        "{{" * 20000,
        "{{ " + "(" * 3000 + "a" + ")" * 3000 + " }}",
        "{% if a %}" * 2000,
        "{{ x | " + " | ".join(["f"] * 3000) + " }}",
        "{{ a + " + "1" * 5000 + " }}",
        "{{ '\\x' }}",
        "{{ '\ud800' }}",
        "\x00{{ a\x00 }}",
        "{%%}",
        "{{}}",
        "{% raw %}{{",
        "{{ a[] }}",
    ],
)
def test_never_raises(text):
    assert isinstance(scan_template(text), TemplateScan)


def test_scans_are_memoised():
    assert scan_template("{{ memo.x }}") is scan_template("{{ memo.x }}")


def test_is_templated():
    assert is_templated("a {{ b }}") and is_templated("{% if a %}{% endif %}")
    assert not is_templated("plain { text } % #")
    # Jinja reads a comment as template syntax too: it must be closed.
    assert is_templated("plain {# comment #} text")
    assert scan_template("plain {# comment #} text").error is None
    assert scan_template("plain {# comment text").error.offset == 6


# ----------------------------------------------------------------------------- Jinja fallback


def test_what_the_grammar_does_not_cover_is_read_from_jinja():
    text = "{% print a.b %}{{ x | f()(y) }}"
    scan = scan_template(text)
    assert scan.error is None
    assert scan.unparsed == ("print a.b", "x | f()(y)")
    assert [(r.root, r.path, r.offset) for r in scan.references] == [
        ("a", ("b",), text.index("a.b")),
        ("x", (), text.index("x |")),
        ("y", (), text.index("y)")),
    ]
    assert scan.filters == (("f", text.index("f(")),)


# ----------------------------------------------------------------------------- the grammar


def test_grammar_has_no_lalr_conflicts(caplog):
    with caplog.at_level(logging.DEBUG, logger="lark"):
        lark.Lark(
            template_parse._grammar_text(),
            parser="lalr",
            start=["expression", "statement"],
            maybe_placeholders=False,
            debug=True,
        )
    assert not [r.message for r in caplog.records if "conflict" in r.message.lower()]


@pytest.mark.corpus
def test_dotted_name_shortcut_builds_what_the_grammar_builds(corpus_strings):
    bodies = {body for _, text in corpus_strings for body in template_tags(text)}
    dotted = [body for body in bodies if template_parse._DOTTED_NAME.fullmatch(body)]
    assert len(dotted) > 100
    for body in dotted + [" true.x ", " none "]:
        grammar_tree = template_parse._PARSER.parse(body, start="expression")
        assert template_parse.parse_tag("expression", body) == (grammar_tree, None)


@pytest.mark.corpus
def test_corpus_coverage_is_at_least_99_percent(corpus_strings):
    coverage = measure(corpus_strings)
    assert coverage.expressions > 4000
    assert coverage.percent >= 99.0, coverage.unparsed


@pytest.mark.corpus
def test_corpus_references_agree_with_jinja_meta(corpus_strings):
    """On every Jinja-valid corpus template, the free names are those jinja2.meta finds."""
    environment = jinja2.Environment()
    for _, text in dict.fromkeys(corpus_strings):
        scan = scan_template(text)
        if scan.error is not None:
            continue
        ast = environment.parse(text)
        while True:  # meta compiles the template: declare the playbook's own filters and tests
            try:
                undeclared = meta.find_undeclared_variables(ast)
                break
            except jinja2.TemplateAssertionError as missing:
                kind, name = re.search(r"No (filter|test) named '(.+)'", missing.message).groups()
                known = environment.filters if kind == "filter" else environment.tests
                known[name] = lambda *args, **kwargs: None
        assert {r.root for r in scan.references} == undeclared - BUILTIN_GLOBALS, text


def test_each_template_is_scanned_once_in_a_large_playbook(tmp_path, monkeypatch):
    # More templates than the by-text cache holds (4,096): check asks for each several times and
    # compile asks again, so a size-bound cache alone would rescan all of them on every pass
    # (what made 10k-step playbooks grow faster than linearly).
    from bench.scale import chain
    from noetl_compile.check import check_results, read_file
    from noetl_compile.compile import compile_result

    path = tmp_path / "chain.yaml"
    path.write_text(chain(4_500), encoding="utf-8")
    scanned: list[str] = []
    run = expressions._Scan.run

    def counted(self):
        scanned.append(self.text)
        return run(self)

    monkeypatch.setattr(expressions._Scan, "run", counted)
    scan_template.cache_clear()
    result = read_file(str(path))
    check_results([result])
    compile_result(result, "chain.yaml")
    assert len(scanned) >= 4_500
    assert len(scanned) == len(set(scanned))


def test_parser_cache_is_in_the_users_own_folder_never_the_shared_tmp(tmp_path, monkeypatch):
    import tempfile

    from noetl_compile.analyze.template_parse import parser_cache_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = parser_cache_path("grammar text")
    assert path and path.startswith(str(tmp_path / "cache" / "noetlc"))
    assert not path.startswith(tempfile.gettempdir() + "/.lark")
    assert (tmp_path / "cache" / "noetlc").stat().st_mode & 0o777 == 0o700
    assert parser_cache_path("other grammar") != path  # named by the grammar
    (tmp_path / "cache" / "noetlc").chmod(0o777)  # writable by others: no cache at all
    assert parser_cache_path("grammar text") is False
