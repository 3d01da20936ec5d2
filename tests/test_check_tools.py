"""Rule family "tool config" (C501-C513) on small inline playbooks."""

from __future__ import annotations

import base64
import textwrap

import pytest

from noetl_compile.check import check_paths
from noetl_compile.check.gates import duration_seconds
from noetl_compile.check.pycode import compile_error, stale_reads
from noetl_compile.diagnostics import Severity

CANONICAL = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: t}
workload: {pg_auth: pg_local}
workflow:
"""


def canonical(steps: str) -> str:
    """The header plus dedented steps (case-v2 or canonical: the steps decide the dialect)."""
    return CANONICAL + textwrap.dedent(steps)


def findings(
    tmp_path, text: str, prefix: str = "C", dialect: str | None = None
) -> list[tuple[str, int, int, str]]:
    path = tmp_path / "playbook.yaml"
    path.write_text(textwrap.dedent(text))
    results, problems = check_paths([str(path)], dialect=dialect)
    assert not problems
    return [
        (d.code, d.position.line, d.position.col, d.message)
        for d in results[0].diagnostics
        # C515 (a kind the runtime cannot execute) has tests of its own; keep these about config.
        if d.code.startswith(prefix) and (d.code != "C515" or prefix == "C515")
    ]


def severities(tmp_path, text: str, code: str) -> list[Severity]:
    path = tmp_path / "playbook.yaml"
    path.write_text(textwrap.dedent(text))
    results, _ = check_paths([str(path)])
    return [d.severity for d in results[0].diagnostics if d.code == code]


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


# -- gates ---------------------------------------------------------------------------------------
def test_valid_gates(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: gate
          gate: input
          subject: "Rate?"
          params:
            rate: {type: number, default: 0.05, minimum: 0, maximum: 1}
            mode: {type: string, default: a, enum: [a, b]}
          timeout: 1h30m
          on_timeout: default
          assignees: [alice]
        next: [{step: wait}]
      - step: wait
        tool: {kind: gate, gate: sleep, until: "{{ workload.at }}"}
        next: [{step: ok}]
      - step: ok
        tool: {kind: gate, gate: approve, subject: "Pay?", timeout: PT2H, on_timeout: default,
               default: reject}
        next: [{step: nap}]
      - step: nap
        tool: {kind: gate, gate: sleep, duration: 45m}
    """)
    assert findings(tmp_path, text) == []


def test_gate_rules(tmp_path):
    text = canonical("""\
      - step: start
        tool: {kind: gate, gate: approve, subject: "Pay?", on_timeout: default}
        next: [{step: ask}]
      - step: ask
        tool:
          kind: gate
          gate: input
          subject: "Values?"
          timeout: 2 days
          params: {}
        next: [{step: ask2}]
      - step: ask2
        tool:
          kind: gate
          gate: input
          subject: "Values?"
          timeout: 10d
          on_timeout: default
          params:
            rate: {type: float}
        next: [{step: nap}]
      - step: nap
        tool: {kind: gate, gate: sleep}
        next: [{step: nap2}]
      - step: nap2
        tool: {kind: gate, gate: sleep, duration: 5m, until: "2026-05-01T09:00:00Z", subject: x}
        next: [{step: bad}]
      - step: bad
        tool: {kind: gate, gate: aprove}
    """)
    assert findings(tmp_path, text) == [
        (
            "C505",
            7,
            28,
            "the approve gate step 'start' has no `timeout`; a forgotten execution "
            "would wait forever",
        ),
        (
            "C507",
            7,
            66,
            "`on_timeout: default` in step 'start' needs `default: approve` or `default: reject`",
        ),
        (
            "C510",
            14,
            14,
            "`timeout` of step 'ask' is not a duration: '2 days' (use e.g. 30s, 5m, "
            "2h, 10d, 1h30m or ISO-8601 PT2H)",
        ),
        (
            "C506",
            15,
            13,
            "the input gate step 'ask' needs a non-empty `params` mapping "
            "(name -> {type, default?})",
        ),
        (
            "C507",
            25,
            7,
            "param 'rate' of step 'ask2' has no `default`, but `on_timeout: default` "
            "uses every param's default",
        ),
        (
            "C510",
            25,
            20,
            "`type` of param 'rate' of step 'ask2' must be one of string, integer, "
            "number, boolean, object, array, not 'float'",
        ),
        (
            "C508",
            28,
            28,
            "the sleep gate step 'nap' has neither `duration` nor `until`; give exactly one",
        ),
        (
            "C508",
            31,
            49,
            "the sleep gate step 'nap2' has both `duration` and `until`; give exactly one",
        ),
        ("C510", 31, 80, "`subject` does not apply to a sleep gate (step 'nap2')"),
        (
            "C510",
            34,
            28,
            "`gate` of step 'bad' must be one of approve, input, sleep, not 'aprove'; "
            "did you mean 'approve'?",
        ),
    ]


def test_gate_in_loop_or_pipeline(tmp_path):
    text = canonical("""\
      - step: start
        loop: {in: "{{ workload.items }}", iterator: it}
        tool: {kind: gate, gate: sleep, duration: 1s}
        next: [{step: b}]
      - step: b
        tool:
          - {name: first, kind: noop}
          - {name: wait, kind: gate, gate: sleep, duration: 1s}
    """)
    assert findings(tmp_path, text) == [
        (
            "C509",
            8,
            16,
            "step 'start' is a gate inside a loop; move the gate into its own step "
            "before or after the loop",
        ),
        (
            "C509",
            13,
            26,
            "task 'wait' of step 'b' is a gate inside a pipeline; a gate must be a step of its own",
        ),
    ]


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("30s", 30),
        ("5m", 300),
        ("2h", 7200),
        ("10d", 864000),
        ("1h30m", 5400),
        ("PT2H", 7200),
        ("P10D", 864000),
        ("P1DT2H30M", 95400),
        ("PT0.5S", 0.5),
    ],
)
def test_durations(text, seconds):
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "5 m", "1x", "P", "PT", "P1DT", "h", "-5m"])
def test_bad_durations(text):
    assert duration_seconds(text) is None


# -- quantum -------------------------------------------------------------------------------------
def test_valid_quantum(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: quantum
          provider: aer
          circuit: |
            // a Bell pair
            OPENQASM 3.0;
            qubit[2] q;
          shots: 100
          transpile: {optimization_level: 2, seed_transpiler: 7}
          tags: [bell]
          device: GPU
        next: [{step: poll}]
      - step: poll
        tool: {kind: quantum, provider: "{{ workload.p }}", op: status, job_id: "{{ ctx.job }}",
               shots: "{{ workload.shots }}", circuit: "{{ workload.circuit }}"}
    """)
    assert findings(tmp_path, text) == []


def test_quantum_rules(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: quantum
          provider: ibmq
          shots: 0
          transpile: {optimization_level: 5}
          qubits: 2
          device: gpu
        next: [{step: b}]
      - step: b
        tool: {kind: quantum, op: results}
        next: [{step: c}]
      - step: c
        tool:
          kind: quantum
          op: launch
          circuit: |
            qreg q[2];
    """)
    assert findings(tmp_path, text) == [
        (
            "C511",
            8,
            11,
            "the quantum tool step 'start' needs a `circuit` (OpenQASM 2/3) for op run",
        ),
        (
            "C511",
            9,
            15,
            "`provider` of step 'start' must be one of aer, basic, ibm, not 'ibmq'; "
            "did you mean 'ibm'?",
        ),
        ("C511", 10, 12, "`shots` of step 'start' must be a positive integer, not 0"),
        (
            "C511",
            11,
            37,
            "`transpile.optimization_level` of step 'start' must be 0, 1, 2 or 3, not 5",
        ),
        ("C511", 12, 5, "unknown key 'qubits' in the quantum tool step 'start'"),
        (
            "C511",
            13,
            13,
            "`device` of step 'start' must be one of CPU, GPU, not 'gpu'; did you mean 'GPU'?",
        ),
        ("C511", 16, 29, "the quantum tool step 'b' needs a `job_id` for op results"),
        (
            "C511",
            21,
            9,
            "`op` of step 'c' must be one of run, submit, status, results, not 'launch'",
        ),
    ]


def test_quantum_literal_circuit_header(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: quantum
          circuit: |
            qreg q[2];
    """)
    assert findings(tmp_path, text) == [
        (
            "C511",
            10,
            7,
            "`circuit` of step 'start' must start with an `OPENQASM 2.0;` or "
            "`OPENQASM 3.0;` header",
        )
    ]


# -- cursor loops --------------------------------------------------------------------------------
def test_cursor_loops(tmp_path):
    text = canonical("""\
      - step: start
        loop:
          cursor: {kind: postgres, auth: "{{ pg_auth }}", claim: "UPDATE q SET s = 1 RETURNING id"}
          iterator: row
          spec: {mode: cursor}
        tool: {kind: noop}
        next: [{step: b}]
      - step: b
        loop:
          cursor: {kind: mysql, claim: "SELECT 1", batch: 2}
          iterator: row
          spec: {mode: cursor}
        tool: {kind: noop}
    """)
    assert findings(tmp_path, text) == [
        (
            "C512",
            15,
            13,
            "the cursor of step 'b' needs `auth` (a cursor needs a driver `kind`, a "
            "credential `auth` and a `claim` statement)",
        ),
        (
            "C512",
            15,
            20,
            "cursor driver 'mysql' of step 'b' is not registered here (registered: postgres); "
            "the runtime needs a package that declares it under the `noetl.cursor_drivers` "
            "entry points",
        ),
        ("C512", 15, 46, "unknown key 'batch' in the cursor of step 'b'"),
    ]
    assert severities(tmp_path, text, "C512") == [Severity.ERROR, Severity.WARNING, Severity.ERROR]
