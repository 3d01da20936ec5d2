"""Tool config (C5xx): each tool kind's configuration (code, SQL, http, gates, quantum,
cursors, shell, policies) and the kinds the Airflow runtime cannot execute.

One family of the diagnostic catalogue; ``rules.py`` assembles the families into ``RULES``.
"""

from __future__ import annotations

from .entry import E, W, rule

RULES = (
    rule(
        "C501",
        E,
        "python code does not compile",
        "The python tool compiles `code` before running it; a syntax error fails the step every time.",
        "before:  code: |\n  return 1\nafter:   code: |\n  result = 1",
    ),
    rule(
        "C502",
        E,
        "http without url",
        "An http tool needs `url` (or `endpoint`).",
        'tool: {kind: http, method: GET, url: "{{ api }}/items"}',
    ),
    rule(
        "C503",
        E,
        "postgres without auth",
        "The canonical engine refuses postgres commands without `auth` (on the tool or in `input`); "
        "older engines also took `credential(s)` or `db_*` fields.",
        'tool: {kind: postgres, auth: "{{ pg_auth }}", query: SELECT 1}',
    ),
    rule(
        "C504",
        E,
        "SQL tool without SQL",
        "A postgres/duckdb/ducklake/snowflake tool needs SQL: `query`/`queries`, `command`/`commands`, "
        "`cmd`/`cmds`, `sql`, `statement` or `script` (or their `_b64` forms).",
        "tool: {kind: duckdb, query: SELECT 42}",
    ),
    rule(
        "C505",
        E,
        "gate without timeout",
        "An approve/input gate must time out, or a forgotten execution waits forever.",
        "tool: {kind: gate, gate: approve, subject: Pay?, timeout: 2d}",
    ),
    rule(
        "C506",
        E,
        "input gate without params",
        "An input gate asks for typed values and needs a non-empty `params` mapping.",
        "params:\n  rate: {type: number, default: 0.05}",
    ),
    rule(
        "C507",
        E,
        "gate default unusable",
        "`on_timeout: default` needs `default` (approve) or a default on every param (input).",
        "on_timeout: default\ndefault: reject",
    ),
    rule(
        "C508",
        E,
        "sleep gate needs exactly one of duration/until",
        "A sleep gate waits for a duration or until a time, not both and not neither.",
        "tool: {kind: gate, gate: sleep, duration: 5m}",
    ),
    rule(
        "C509",
        E,
        "gate in a loop or pipeline",
        "A gate pauses one branch of the execution; it must be a step of its own.",
        "move the gate into its own step before or after the loop",
    ),
    rule(
        "C510",
        E,
        "invalid gate config",
        "A gate key holds a value the gate cannot use (unknown gate type, bad duration, bad param "
        "type, or a template in a key read when the DAG file is parsed: gate, timeout, "
        "assignees, on_timeout, default, params).",
        "timeout: 1h30m   # or PT1H30M",
    ),
    rule(
        "C511",
        E,
        "invalid quantum config",
        "The quantum tool needs a circuit for run/submit, a job_id for status/results, and valid "
        "provider/op/shots/transpile values, and `device` CPU or GPU.",
        'tool: {kind: quantum, provider: aer, circuit: "OPENQASM 3.0; ...", shots: 1024}',
    ),
    rule(
        "C512",
        E,
        "invalid cursor config",
        "A cursor loop needs a driver `kind`, `auth` and a `claim` statement (a NoETL 5 "
        "playbook's cursor without `kind` claims on postgres, as NoETL 5's does). An unknown "
        "driver kind is only a warning: drivers can be registered under `noetl.cursor_drivers`.",
        'cursor: {kind: postgres, auth: pg_local, claim: "UPDATE ... RETURNING id"}',
    ),
    rule(
        "C513",
        W,
        "tool key outside its tool",
        "A tool setting (e.g. `command`) sits on the step or inside the tool's `spec`, where the "
        "engine does not read it.",
        "before:  - step: s\n           command: SELECT 1\nafter:   - step: s\n           tool: {kind: postgres, command: SELECT 1}",
    ),
    rule(
        "C514",
        E,
        "invalid policy rule",
        "A policy rule needs `when` or `else` and a `then` with a known action.",
        "rules:\n  - when: \"{{ output.status == 'error' }}\"\n    then: {do: retry, attempts: 3}",
    ),
    rule(
        "C515",
        W,
        "tool kind the Airflow runtime cannot execute",
        "The Airflow runtime (airflow_plugin) has no executor for this tool kind, even though "
        "the NoETL engine may run it: the compiled task fails every time it reaches the tool. "
        "Found before deploy, the gap can be closed first.",
        "before:  tool: {kind: snowflake, auth: sf_dw, command: SELECT 1}\n"
        "after:   tool: {kind: postgres, auth: pg_dw, command: SELECT 1}\n"
        "         # or add an executor for the kind to airflow_plugin/tools before deploying",
    ),
    rule(
        "C516",
        W,
        "unknown tool field",
        "The tool config holds a key its kind does not read (`mehtod:` in an http tool): the "
        "runtime ignores it, so the request goes out with the default instead, and the run "
        "stays green. The fields of every kind are listed in docs/tools/ (generated from "
        "noetl_compile/tool_catalogue.py, the table this check reads).",
        "before:  tool: {kind: http, mehtod: POST, url: ...}\n"
        "after:   tool: {kind: http, method: POST, url: ...}",
    ),
    rule(
        "C517",
        E,
        "invalid shell config",
        "The shell tool runs `cmds` (a list, one process each) or `command` (one script), with "
        "`env` a mapping and `timeout_seconds` a positive number.",
        'tool: {kind: shell, cmds: ["echo hello"], env: {MODE: test}, timeout_seconds: 60}',
    ),
    rule(
        "C518",
        E,
        "gate needs a newer Airflow",
        "An approve/input gate waits through Airflow's human-in-the-loop operators, which Airflow "
        "3.0 does not have: the DAG file would fail to import there. The Airflow a DAG folder is "
        "for is `--airflow-version` (default: the installed one, else the newest supported).",
        "noetlc compile playbooks/ -o dags/ --airflow-version 3.1   # a deployment on 3.1 or "
        "later\n# or, on Airflow 3.0: a sleep gate, or a step that polls for the decision",
    ),
)
