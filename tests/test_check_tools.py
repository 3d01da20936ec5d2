"""Rule family "tool config" (C501-C513) on small inline playbooks (gates: test_check_gates.py;
quantum and cursor loops: test_check_quantum_cursor.py)."""

from __future__ import annotations

import base64

import pytest

from noetl_compile.check.pycode import compile_error, non_mapping_result, stale_reads
from noetl_compile.diagnostics import Severity
from tests.check_support import CANONICAL, canonical, findings, severities


# -- C501 python code ----------------------------------------------------------------------------
def test_module_level_return_is_reported_inside_the_block(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: python
          code: |
            data = {"a": 1}
            print(data)
            return data
    """)
    # Unmarked, a top-level `return` reads the file as NoETL 5 (S119), whose python tool wraps the
    # code in a function; read as the April 2026 engine, the same code does not compile.
    assert findings(tmp_path, text) == []
    assert [d[0] for d in findings(tmp_path, text, prefix="S119")] == ["S119"]
    assert findings(tmp_path, text, dialect="canonical") == [
        (
            "C501",
            12,
            7,
            "python code of step 'start' does not compile: "
            "'return' outside function (line 3 of the block)",
        )
    ]


def test_valid_code_result_and_def_main_and_templates(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: python
          code: |
            def main(x):
                return x
            result = main({{ workload.n | int }})
            label = '{{ workload.name }}'
            {% if workload.flag %}
            result = 2
            {% endif %}
    """)
    assert findings(tmp_path, text) == []


def test_templated_code_with_a_real_error_elsewhere(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: python
          code: |
            n = {{ workload.n }}
            if n > 1
                result = n
    """)
    assert findings(tmp_path, text) == [
        (
            "C501",
            11,
            15,
            "python code of step 'start' does not compile: expected ':' (line 2 of the block)",
        )
    ]


def test_double_quoted_code_maps_through_escapes(tmp_path):
    text = canonical(r"""
      - step: start
        tool:
          kind: python
          code: "x = {\"a\": 1}\nreturn x\n"
    """)
    assert findings(tmp_path, text, dialect="canonical") == [
        (
            "C501",
            10,
            28,
            "python code of step 'start' does not compile: "
            "'return' outside function (line 2 of the block)",
        )
    ]


def test_code_b64_is_decoded(tmp_path):
    encoded = base64.b64encode(b"x = 1\nreturn x\n").decode()
    text = (
        CANONICAL
        + f"""\
      - step: start
        tool: {{kind: python, code_b64: "{encoded}"}}
    """
    )
    assert findings(tmp_path, text) == [
        (
            "C501",
            7,
            40,
            "python code of step 'start' does not compile: 'return' outside "
            "function (line 2 of the decoded `code_b64`)",
        )
    ]


def test_unexpected_indent_points_at_the_statement(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: python
          code: |
            x = 1
              y: "{{ x }}"
            result = x
    """)
    assert findings(tmp_path, text) == [
        (
            "C501",
            11,
            9,
            "python code of step 'start' does not compile: unexpected indent (line 2 of the block)",
        )
    ]


def test_v1_workbook_code(tmp_path):
    text = """\
    apiVersion: noetl.io/v1
    kind: Playbook
    name: t
    path: t
    workbook:
      - name: ok
        type: python
        code: "def main(x):\\n    return x\\n"
      - name: broken
        type: python
        code: |
          def main(x)
              return x
    workflow:
      - step: start
        type: workbook
        name: ok
        next: [{step: b}]
      - step: b
        type: workbook
        name: broken
    """
    assert findings(tmp_path, text) == [
        (
            "C501",
            12,
            18,
            "python code of workbook task 'broken' does not compile: "
            "expected ':' (line 1 of the block)",
        )
    ]


@pytest.mark.parametrize(
    "code",
    [
        "x = {{ a }}{{ b }}\n",
        "f({{ args }})\n",
        "total = 1{{ zeros }}\n",
        "items = [{% for i in xs %}{{ i }},{% endfor %}]\n",
        "{{ helper_code }}\nresult = helper()\n",
    ],
)
def test_errors_only_from_templating_are_not_reported(code):
    assert compile_error(code) is None


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("x = r['command_0']\n", ((1, 7, "command_0"),)),
        ("x = r.get('comm' 'and_1')\n", ((1, 11, "command_1"),)),
        ("x = r[('comm'  # split\n       'and_2')]\n", ((1, 8, "command_2"),)),
        ("x = r['\\x63ommand_3']\n", ((1, 7, "command_3"),)),
        ("x = r['command\\\n_0']\n", ((1, 7, "command_0"),)),
        ("x = r[{{ k }}] + r['command_1']\n", ((1, 20, "command_1"),)),
        ('x = r.get("""c""" r"ommand_2")\n', ((1, 11, "command_2"),)),
        ("x = r['command'] + r[''] + r['_0']\n", ()),
        ("x = r['rows']\ny = '''doc'''\n", ()),
    ],
)
def test_stale_fields_in_code_however_spelled(code, expected):
    # The stale-field search skips code whose text cannot hold such a constant: escapes and
    # implicitly concatenated literals must still be searched.
    assert compile_error(code) is None
    assert stale_reads(code) == expected


# -- C502 http -----------------------------------------------------------------------------------
def test_http_without_url(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: http
          method: GET
          spec:
            url: "{{ api }}/x"
      - step: other
        tool: {kind: http, endpoint: "{{ api }}/y"}
    """)
    assert findings(tmp_path, text) == [
        (
            "C502",
            8,
            11,
            "the http tool of step 'start' has no `url` (or `endpoint`) "
            "(`url` is inside `spec`, where the engine does not read it)",
        ),
        (
            "C513",
            11,
            7,
            "tool setting `url` of the tool of step 'start' sits inside `spec`, where the engine "
            "does not read it; move it up into the tool",
        ),
    ]


# -- C503 postgres auth --------------------------------------------------------------------------
def test_canonical_postgres_needs_auth(tmp_path):
    text = canonical("""\
      - step: start
        tool: {kind: postgres, query: SELECT 1}
        next: [{step: b}]
      - step: b
        input: {auth: "{{ pg_auth }}"}
        tool: {kind: postgres, query: SELECT 1}
        next: [{step: c}]
      - step: c
        tool: {kind: postgres, credential: pg_local, query: SELECT 1}
        next: [{step: d}]
      - step: d
        tool: {kind: postgres, auth: "{{ pg_auth }}", query: SELECT 1}
    """)
    assert findings(tmp_path, text) == [
        (
            "C503",
            7,
            16,
            "the postgres tool of step 'start' has no `auth` (a credential name); "
            "the engine refuses the command",
        ),
        (
            "C503",
            14,
            26,
            "the postgres tool of step 'c' has `credential` but no `auth`; the engine "
            "reads only `auth` and refuses the command",
        ),
    ]


def test_older_dialects_accept_credential_and_db_fields(tmp_path):
    text = """\
    apiVersion: noetl.io/v1
    kind: Playbook
    name: t
    path: t
    workbook:
      - name: via_caller
        type: postgres
        command: SELECT 1
      - name: nobody
        type: postgres
        command: SELECT 1
    workflow:
      - step: start
        type: postgres
        credential: pg_local
        command: SELECT 1
        next: [{step: b}]
      - step: b
        type: postgres
        with: {db_host: localhost, db_name: x}
        command: SELECT 1
        next: [{step: c}]
      - step: c
        type: workbook
        name: via_caller
        with: {auth: pg_local}
        next: [{step: d}]
      - step: d
        type: workbook
        name: nobody
    """
    assert findings(tmp_path, text) == [
        (
            "C503",
            10,
            11,
            "the postgres tool of workbook task 'nobody' has no `auth` (a credential "
            "name), no `credential` and no `db_*` connection fields in its inputs, so "
            "it cannot connect",
        )
    ]


def test_case_v2_sink_postgres(tmp_path):
    text = canonical("""\
      - step: start
        tool: {kind: http, url: "http://x"}
        case:
          - when: "{{ event.name == 'call.done' }}"
            then:
              sink:
                tool: {kind: postgres, table: t, mode: upsert, key: id}
                args: {id: "{{ result.id }}"}
          - when: "{{ event.name == 'step.exit' }}"
            then:
              sink:
                tool: {kind: postgres, auth: pg_local, table: t}
    """)
    assert findings(tmp_path, text) == [
        (
            "C503",
            12,
            24,
            "the postgres tool of the sink of step 'start' has no `auth` (a credential "
            "name), no `credential` and no `db_*` connection fields in its inputs, so "
            "it cannot connect",
        )
    ]


# -- C504 SQL ------------------------------------------------------------------------------------
def test_sql_tool_without_sql(tmp_path):
    text = canonical("""\
      - step: start
        tool: {kind: duckdb, database: x.db}
        next: [{step: b}]
      - step: b
        tool: {kind: snowflake, auth: sf, command: ""}
        next: [{step: c}]
      - step: c
        tool: [{name: q, kind: ducklake, catalog_name: c, commands_b64: U0VMRUNUIDE=}]
    """)
    assert findings(tmp_path, text) == [
        (
            "C504",
            7,
            16,
            "the duckdb tool of step 'start' has no SQL (`query`, `command`, "
            "`commands` or `script`)",
        ),
        ("C504", 10, 46, "`command` of step 'b' is empty"),
    ]


def test_v1_sql_in_with_is_not_read(tmp_path):
    text = """\
    apiVersion: noetl.io/v1
    kind: Playbook
    name: t
    path: t
    workflow:
      - step: start
        type: duckdb
        with:
          commands: SELECT 1
    """
    assert findings(tmp_path, text) == [
        (
            "C504",
            7,
            11,
            "the duckdb tool of step 'start' has no SQL (`query`, `command`, `commands` "
            "or `script`) (`commands` is inside `with`, where the engine does not read it)",
        )
    ]


# -- C513 tool settings on the step --------------------------------------------------------------
def test_tool_setting_on_the_step(tmp_path):
    text = canonical("""\
      - step: start
        tool: {kind: postgres, auth: "{{ pg_auth }}"}
        command: SELECT 1
    """)
    assert findings(tmp_path, text) == [
        (
            "C504",
            7,
            16,
            "the postgres tool of step 'start' has no SQL (`query`, `command`, "
            "`commands` or `script`) (`command` is on the step, outside `tool`, where "
            "the engine does not read it)",
        ),
        (
            "C513",
            8,
            3,
            "`command` is a tool setting, but it sits on step 'start' where the engine "
            "ignores it; move it into `tool`",
        ),
    ]
    assert severities(tmp_path, text, "C513") == [Severity.WARNING]


def test_v1_inline_settings_are_fine(tmp_path):
    text = """\
    apiVersion: noetl.io/v1
    kind: Playbook
    name: t
    path: t
    workflow:
      - step: start
        type: http
        endpoint: "http://x"
        method: GET
    """
    assert findings(tmp_path, text) == []


def test_secrets_tool_names_its_secret_as_the_runtime_reads_it(tmp_path):
    # The runtime takes the secret's name from name | secret_name | key | credential
    # (airflow_plugin/tools/secrets.py), and NoETL's `project_id` is accepted as both NoETL
    # generations accept it: none is "ignored by the runtime" (C516); a misspelling still is.
    text = canonical("""\
      - step: start
        tool: {kind: secrets, provider: google, project_id: p, secret_name: s}
      - step: other
        tool: {kind: secrets, key: k}
      - step: third
        tool: {kind: secrets, secret_nmae: s, credential: c}
    """)
    [(code, line, _col, message)] = findings(tmp_path, text, "C516")
    assert (code, line) == ("C516", 11)
    assert "'secret_nmae'" in message and "secret_name" in message.split("ignores it")[1]


# -- D942: what a case-v2 python call's result is -------------------------------------------------
@pytest.mark.parametrize(
    ("code", "statement"),
    [
        ("result = [1, 2]\n", "result = [1, 2]"),
        ("for i in range(3):\n    result = -1\n", "result = -1"),
        ("def main():\n    if x:\n        return 'text'\n    return {}\n", "return 'text'"),
        ("# é\nresult = (1, 2)\n", "result = (1, 2)"),
    ],
)
def test_a_non_mapping_result_is_found_at_its_statement(code, statement):
    assert code[non_mapping_result(code) :].startswith(statement)


@pytest.mark.parametrize(
    "code",
    [
        # a helper's return is not the result: main's is (the regex this replaced flagged it)
        "def helper():\n    return [1]\n\ndef main():\n    return {'x': helper()}\n",
        "def main():\n    def inner():\n        return [1]\n    return inner()\n",
        "result = {{ workload.items }}\n",  # a template: rendered first, its value unknown here
        "result = (a if b else c)\n",
        "class Row:\n    result = [1]\nresult = {}\n",
        "result = None\n",  # D924's row, not this one
        "def main(:\n",  # C501 says why
    ],
)
def test_a_result_that_may_be_a_mapping_is_not_flagged(code):
    assert non_mapping_result(code) is None
