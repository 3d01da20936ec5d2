"""The fields of each tool kind: one table that `noetlc check` validates tool configs against
(C516, "did you mean" per kind) and that the reference pages under docs/tools/ are generated from
(`scripts/gen_tool_docs.py`), so the two cannot drift. A standard-library leaf.

To add a kind or a field, add a `ToolKind` or a `ToolField` below; `tests/test_tool_docs.py`
then fails until `python scripts/gen_tool_docs.py` has regenerated the docs.

Every key a NoETL 5 tool reads (`noetl5_tools.py`, from NoETL 5's sources) is a field of its kind
here: the ones a kind's own table lacks are appended from that table, marked "NoETL 5", so C516
never calls a key NoETL 5 reads ignored.

A kind whose surface noetlc does not model (`open=True`) gets a page but no unknown-field
warnings: its executor runs in the NoETL engine, not here, and its keys are not all known.
Gates and quantum keep their own, stricter key checks (C510/C511); their fields here must equal
the keys those checks accept (a test holds them equal).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .noetl5_tools import TOOLS as NOETL5_TOOLS
from .shell_surface import CONFIG_FIELDS as SHELL_FIELDS

__all__ = [
    "CATALOGUE",
    "COMMON_FIELDS",
    "NOETL5_ONLY_FIELDS",
    "ToolField",
    "ToolKind",
    "fields_of",
    "kind_of",
]


@dataclass(frozen=True)
class ToolField:
    name: str
    type: str
    default: str  # as a user would write it; "required" or "-" (none) when there is no default
    meaning: str


@dataclass(frozen=True)
class ToolKind:
    kind: str
    summary: str
    result: str  # what `{{ step_name }}` holds after the tool ran
    fields: tuple[ToolField, ...]
    example: str  # a YAML `tool:` block
    errors: str = ""
    open: bool = False  # the surface is not modelled: no unknown-field warnings
    own_check: str = ""  # a diagnostic code whose rule checks the keys itself (C510, C511)


def _f(name: str, type_: str, default: str, meaning: str) -> ToolField:
    return ToolField(name, type_, default, meaning)


_SHELL_DEFAULTS = {"shell": "bash", "capture": "true"}


# Fields every tool may carry, whatever its kind (what the readers and the runtime read on any
# tool mapping, or a pipeline task's own keys).
COMMON_FIELDS: tuple[ToolField, ...] = (
    _f("kind", "string", "required", "the tool kind (this page)"),
    _f(
        "name",
        "string",
        "-",
        "a label: a pipeline task's name, read by later tasks as `{{ name }}`",
    ),
    _f("desc", "string", "-", "a description for people; ignored at run time"),
    _f("spec", "mapping", "-", "`timeout` and `policy` (pipeline rules: retry, jump, continue)"),
    _f("input", "mapping", "-", "values rendered and handed to the tool (python: globals)"),
    _f("args", "mapping", "-", "older name of `input`; merged under it"),
    _f("with", "mapping", "-", "v1 name of `input`"),
    _f("retry", "list | mapping", "-", "retry policies of the tool (case-v2 / unified retry)"),
    _f("output", "mapping", "-", "where the result goes (`output.store`, result reference)"),
    _f(
        "assert", "mapping", "-", "`expects`/`returns`: names the tool's input and result must hold"
    ),
)

_SQL_TEXT = "SQL statement(s); several separated by `;` run in one transaction"
_SQL_FIELDS = (
    _f("command", "string", "-", _SQL_TEXT),
    _f("commands", "string | list", "-", "several statements (a list, or one string)"),
    _f("query", "string", "-", "same as `command`"),
    _f("queries", "string | list", "-", "same as `commands`"),
    _f("sql", "string", "-", "same as `command`"),
    _f("statement", "string", "-", "same as `command`"),
    _f("script", "string | mapping", "-", "SQL text, or `{source: {type: file, path}}` to read it"),
    _f("cmd", "string", "-", "same as `command`"),
    _f("cmds", "string | list", "-", "same as `commands`"),
    *(
        _f(f"{key}_b64", "string", "-", f"`{key}`, base64-encoded")
        for key in (
            "command",
            "commands",
            "query",
            "queries",
            "sql",
            "statement",
            "script",
            "cmd",
            "cmds",
        )
    ),
)
_SINK_FIELDS = (
    _f("table", "string", "-", "sink only: the table rows are written to"),
    _f("mode", "string", "insert", "sink only: `insert`, `append`, `upsert` or `replace`"),
    _f("key", "string | list", "-", "sink only: the conflict column(s) of an upsert"),
    _f("keys", "string | list", "-", "sink only: same as `key`"),
    _f("data", "any", "-", "sink only: the rows to write (a mapping is one row)"),
    _f("from", "any", "-", "sink only: same as `data`"),
)
_SQL_RESULT = (
    "the last statement's result: `{status, rows, row_count, columns, statement_count}`; "
    "read rows as `{{ step.rows }}`, the count as `{{ step.row_count }}` (postgres, as NoETL: a "
    "last statement without rows gives `{status, row_count, message, statement_count}`)"
)

CATALOGUE: dict[str, ToolKind] = {
    k.kind: k
    for k in (
        ToolKind(
            "http",
            "An HTTP request with httpx: method, URL, headers, query parameters and a body.",
            "`{status_code, headers, url, elapsed, data}`: `data` is the parsed JSON body "
            "(text when it is not JSON), so templates read `{{ step.data.field }}`; a non-2xx "
            "response fails the call with NoETL's `{id, status: error, data: <that result>}`",
            (
                _f("url", "string", "required", "the URL to call (or `endpoint`)"),
                _f("endpoint", "string", "-", "same as `url`"),
                _f("method", "string", "GET", "the HTTP method"),
                _f("headers", "mapping", "-", "request headers"),
                _f("params", "mapping | string", "-", "query parameters"),
                _f("payload", "any", "-", "the body: a mapping is sent as JSON"),
                _f("body", "any", "-", "same as `payload`"),
                _f("json", "any", "-", "same as `payload`"),
                _f(
                    "data",
                    "mapping | any",
                    "-",
                    "NoETL routing: query params for GET, else body; "
                    "`{query: ..., body: ...}` says which",
                ),
                _f("timeout", "number | mapping", "30", "seconds, or `{connect, read, total}`"),
                _f("verify_ssl", "boolean | string", "true", "verify TLS (or a CA bundle path)"),
                _f("verify", "boolean | string", "true", "same as `verify_ssl`"),
                _f("follow_redirects", "boolean", "false", "follow 3xx responses"),
                _f(
                    "auth",
                    "string | mapping",
                    "-",
                    "an Airflow connection id whose extra says bearer / basic / api_key",
                ),
            ),
            'tool:\n  kind: http\n  method: GET\n  url: "{{ workload.base_url }}/users"\n'
            "  params: {page: 1}",
            "A status >= 400 is an error outcome with `code: HTTP_<status>` (429 and 5xx are "
            "retryable); a transport error (DNS, refused, timeout) is retryable.",
        ),
        ToolKind(
            "postgres",
            "SQL against PostgreSQL with psycopg 3, through an Airflow connection named by `auth`.",
            _SQL_RESULT
            + "; in a case-v2 playbook one entry per statement, as NoETL's case-v2 engine gives it: "
            "`{command_0: {status, rows, row_count, columns}, command_1: {status, row_count, "
            "message}, ...}`, read as `{{ step.command_0.rows }}`",
            (
                _f(
                    "auth",
                    "string",
                    "required",
                    "the connection id (`noetlc check --connections`); NoETL 5 playbooks may "
                    "name the server with `connection_string` or `host`... instead (below)",
                ),
                _f(
                    "credential",
                    "string",
                    "-",
                    "v1/case-v2 name of `auth` (the canonical engine reads only `auth`)",
                ),
                _f("credentials", "string", "-", "same as `credential`"),
                _f("pool", "boolean | mapping", "-", "use a connection pool"),
                _f("database", "string", "-", "the database, over the connection's"),
                *_SQL_FIELDS,
                *_SINK_FIELDS,
            ),
            "tool:\n  kind: postgres\n  auth: pg_local\n  command: SELECT id, name FROM users",
            "A database error is an error outcome with the SQLSTATE in `pg.code`; connection "
            "errors are retryable.",
        ),
        ToolKind(
            "duckdb",
            "SQL in DuckDB: a file per execution (or `database`), with postgres attached by `auth`.",
            _SQL_RESULT,
            (
                _f("database", "string", "per execution", "the DuckDB file"),
                _f("auth", "string | mapping", "-", "connections to ATTACH (postgres)"),
                _f(
                    "require_cloud_output",
                    "boolean",
                    "false",
                    "fail the call unless a statement is a COPY to gs:// or s3://",
                ),
                *_SQL_FIELDS,
                *_SINK_FIELDS,
            ),
            "tool:\n  kind: duckdb\n  query: SELECT 42 AS answer",
        ),
        ToolKind(
            "python",
            "Inline Python: inputs become globals, the value of `result = ...` is the result.",
            "whatever the code assigns to `result` (v1: what `main()` returns); "
            "`{status: error}` makes the step fail, that dict as it is being the result; without "
            "`result`, NoETL's `{status: success, message, locals_count, locals_keys}`. "
            "NoETL 5 playbooks: a top-level `return` gives the result (the code is the body of "
            "a function of `args` and `input_data`), else `result`, else `main()`, else "
            "`{stdout, stderr}` (docs/noetl5.md)",
            (
                _f("code", "string", "required", "the Python code (or `script`, `code_b64`)"),
                _f("code_b64", "string", "-", "`code`, base64-encoded"),
                _f("script", "string | mapping", "-", "`{source: {type: file|http, path|uri}}`"),
                _f("libs", "mapping", "-", "`{alias: module}` or `{alias: {from, import}}`"),
                _f("auth", "mapping | string", "-", "credentials bound into the code's globals"),
            ),
            'tool:\n  kind: python\n  input: {n: 3}\n  code: |\n    result = {"squares": '
            "[i * i for i in range(n)]}",
            "An exception fails the call; as in NoETL the step's result is then "
            "`{id, status: error, error: <the exception's text>}` (a fresh `id` per call), and "
            "the type, message and traceback are in `{{ error }}` and `{{ output.py }}`. The "
            "traceback starts at the code's own frame and quotes its lines; it is in the task "
            "log whether the failure fails the task (nothing handles it: the task instance is "
            "failed, what follows is `upstream_failed`) or the playbook's routing takes it (the "
            "task succeeds so the route runs, and its log says the call failed). A later step's "
            "template that cannot render because it reads the failed step names it: `its "
            "producer step 'transform' failed (ZeroDivisionError: division by zero)`.",
        ),
        ToolKind(
            "shell",
            "Runs shell commands in a subprocess, as NoETL 5's shell tool (docs/shell-tool.md).",
            "`{status, exit_code, stdout, stderr, result}` (`result`: the last command's "
            "stdout); a failed call keeps its `status`: `error` (a non-zero exit) or `timeout`",
            tuple(
                _f(name, type_, _SHELL_DEFAULTS.get(name, "-"), meaning)
                for name, (type_, meaning) in SHELL_FIELDS.items()
                if name != "kind"
            ),
            'tool:\n  kind: shell\n  cmds:\n    - echo "hello {{ workload.name }}"\n'
            "  timeout_seconds: 30",
            "A non-zero exit fails the call (`CommandFailed`, not retried) and a timeout kills "
            "the command's process group (`TimeoutError`, retryable); an error arc routes either.",
            own_check="C516",
        ),
        ToolKind(
            "playbook",
            "Runs another playbook (its compiled DAG) by catalog path and waits for it.",
            "the result of the child's `return_step`, else of the last step it ran (NoETL 5: "
            "`return_step` returns the child's status payload, docs/noetl5.md)",
            (
                _f("path", "string", "required", "the child's catalog path (`metadata.path`)"),
                _f("return_step", "string", "-", "the child step whose result is returned"),
                _f("payload", "mapping", "-", "workload overrides for the child"),
                _f("data", "mapping", "-", "same as `payload`"),
                _f("timeout", "number", "-", "accepted; bounds no wait (docs/noetl5.md)"),
                _f("task", "string", "-", "v1: a workbook task of the child"),
            ),
            "tool:\n  kind: playbook\n  path: examples/child\n  payload: {n: 5}",
        ),
        ToolKind(
            "workbook",
            "Calls a task of this playbook's `workbook` by name.",
            "the workbook task's tool result",
            (
                _f("task", "string", "-", "the workbook task (or `name`)"),
                _f("data", "mapping", "-", "inputs, as `input`"),
            ),
            "tool:\n  kind: workbook\n  name: score\n  input: {x: 1}",
        ),
        ToolKind(
            "secrets",
            "Reads a secret (Airflow connection or variable, by provider) into the result.",
            "`{value}` (masked in logs and events)",
            (
                _f("provider", "string", "airflow", "where the secret lives"),
                _f("secret_name", "string", "-", "the secret's name, where `name` is not given"),
                _f("key", "string", "-", "the secret's name (read after `secret_name`)"),
                _f("credential", "string", "-", "the secret's name (read after `key`)"),
                _f(
                    "project_id",
                    "string",
                    "-",
                    "NoETL's cloud project of the secret, accepted as NoETL's engines accept it "
                    "in every generation; not read here: Airflow's secrets backend takes its "
                    "project from its own configuration",
                ),
                _f("version", "string", "latest", "the secret version"),
            ),
            "tool:\n  kind: secrets\n  name: api_token",
        ),
        ToolKind(
            "transfer",
            "Copies rows from a source (http, postgres, duckdb) into a target table in chunks.",
            "NoETL's `{direction, source_type, target_type, mode, status, rows_transferred, "
            "chunks_processed, target_table, columns}` (from http: `{direction, source_type, "
            "target_type, mode, rows_transferred, chunks_processed, records_fetched}`)",
            (
                _f("source", "mapping", "required", "`{tool: kind, auth, query | url, ...}`"),
                _f("target", "mapping", "required", "`{tool: kind, auth, table, mode, key}`"),
                _f("chunk_size", "integer", "1000", "rows per chunk"),
                _f("mode", "string", "insert", "`insert` or `upsert`"),
                _f("key", "string | list", "-", "the conflict column(s) of an upsert"),
                _f("mapping", "mapping", "-", "target column -> source field"),
                _f("auth", "mapping", "-", "connections by role (`source`, `target`)"),
            ),
            "tool:\n  kind: transfer\n  source: {tool: postgres, auth: pg_local, query: SELECT 1 AS x}\n"
            "  target: {tool: duckdb, table: t}",
        ),
        ToolKind(
            "noop",
            "Does nothing: a step that only routes, sets variables or joins branches.",
            "`{status: ok}`",
            (),
            "tool:\n  kind: noop",
        ),
        ToolKind(
            "gate",
            "Pauses the execution for a person (approve, input) or for time (sleep).",
            "approve: `{approved, choice, responded_by, responded_at, timed_out}`; input: "
            "`{values, responded_by, responded_at, timed_out}`; sleep: `{slept_until}`",
            (
                _f("gate", "string", "required", "`approve`, `input` or `sleep`"),
                _f("subject", "string", "-", "approve/input: the title shown to the approver"),
                _f("body", "string", "-", "approve/input: the text shown"),
                _f("timeout", "duration", "-", "approve/input: how long to wait (`1h30m`, `PT2H`)"),
                _f("on_timeout", "string", "fail", "approve/input: `fail` or `default`"),
                _f(
                    "default",
                    "string",
                    "-",
                    "approve: `approve` or `reject`, the answer on timeout",
                ),
                _f("assignees", "list", "-", "approve/input: who may answer"),
                _f("params", "mapping", "-", "input: the fields asked for (`type`, `default`...)"),
                _f("duration", "duration", "-", "sleep: how long"),
                _f("until", "string", "-", "sleep: an RFC 3339 timestamp to wait for (templated)"),
            ),
            "tool:\n  kind: gate\n  gate: approve\n  subject: Ship it?\n  timeout: 1h",
            own_check="C510",
        ),
        ToolKind(
            "quantum",
            "Runs an OpenQASM circuit on a simulator (aer, basic) or submits it to IBM Quantum.",
            "`{job_id, status, counts, shots, backend: {name, version}, provenance}`; the "
            "provenance (provider, backend, shots, seeds, transpiler settings, timestamps) is also "
            "in the event log",
            (
                _f("provider", "string", "aer", "`aer`, `basic` or `ibm`"),
                _f("backend", "string", "-", "the backend name (ibm)"),
                _f("op", "string", "run", "`run`, `submit`, `status` or `results`"),
                _f("circuit", "string", "-", "OpenQASM 2/3 text (run, submit)"),
                _f("params", "mapping", "-", "circuit parameters"),
                _f("shots", "integer", "1024", "how many shots"),
                _f("seed", "integer", "-", "simulator seed"),
                _f("transpile", "mapping", "-", "`optimization_level`, `seed_transpiler`"),
                _f("job_id", "string", "-", "the job (status, results)"),
                _f("auth", "string", "-", "the IBM connection"),
                _f("tags", "list", "-", "job tags"),
                _f("device", "string", "CPU", "`CPU` or `GPU` (aer)"),
            ),
            "tool:\n  kind: quantum\n  provider: aer\n  circuit: |\n    OPENQASM 3.0; qubit q; "
            "bit c; h q; c = measure q;\n  shots: 100",
            own_check="C511",
        ),
        *(
            ToolKind(kind, summary, "engine-defined", (), "", open=True)
            for kind, summary in (
                ("ducklake", "DuckLake catalogs (NoETL engine)."),
                ("snowflake", "SQL against Snowflake (NoETL engine)."),
                ("snowflake_transfer", "Snowflake <-> Postgres transfer (NoETL engine)."),
                ("playbooks", "Runs several playbooks (NoETL engine; Airflow: as `playbook`)."),
                ("iterator", "v1 iterator task (read as a loop)."),
                ("container", "Runs a container (NoETL engine)."),
                ("script", "Runs a script job (NoETL engine)."),
                ("gcs", "Google Cloud Storage (NoETL engine)."),
                ("gateway", "NoETL gateway calls (NoETL engine)."),
                ("nats", "NATS key-value operations (NoETL engine)."),
                ("agent", "Agent calls (NoETL engine)."),
                ("artifact", "Artifact store actions (NoETL engine)."),
                ("task_sequence", "An explicit pipeline (NoETL engine)."),
                ("rhai", "Rhai scripts (NoETL engine)."),
                # NoETL 5's kinds (noetl/tools), read in its generation only.
                ("mcp", "An MCP server call: JSON-RPC 2.0 over HTTP (NoETL 5)."),
                ("auth", "Obtains a token or session for later calls (NoETL 5)."),
                ("provider", "Typed cloud-provider operations (NoETL 5)."),
                ("wasm", "Runs a WebAssembly module (NoETL 5)."),
                ("result_fetch", "Fetches a `noetl://` result-store reference (NoETL 5)."),
                ("subscription", "Drains a bounded batch from a message subscription (NoETL 5)."),
                ("sink", "NoETL 5's local runtime: writes the last result to a file."),
            )
        ),
    )
}


def _with_noetl5(entry: ToolKind) -> ToolKind:
    """``entry`` with the keys NoETL 5's tool of its kind reads that it lacks (noetl5_tools)."""
    tool = NOETL5_TOOLS.get(entry.kind)
    if tool is None or entry.open:
        return entry
    have = {f.name for f in COMMON_FIELDS + entry.fields}
    extra = tuple(
        _f(k.name, k.type, k.default, f"NoETL 5: {k.meaning}")
        for k in tool.keys
        if k.name not in have
    )
    return replace(entry, fields=entry.fields + extra) if extra else entry


# The keys only NoETL 5's tool of a kind reads (no earlier engine had them): a file holding one
# is a NoETL 5 file (read/noetl5_detect.py).
NOETL5_ONLY_FIELDS = {
    kind: frozenset(k.name for k in NOETL5_TOOLS[kind].keys)
    - {f.name for f in COMMON_FIELDS + entry.fields}
    for kind, entry in CATALOGUE.items()
    if kind in NOETL5_TOOLS and not entry.open
}
CATALOGUE = {kind: _with_noetl5(entry) for kind, entry in CATALOGUE.items()}


def kind_of(kind: str) -> ToolKind | None:
    return CATALOGUE.get(kind)


def fields_of(kind: str) -> frozenset[str] | None:
    """Every field a tool of ``kind`` may carry, or None when the kind's surface is open."""
    entry = CATALOGUE.get(kind)
    if entry is None or entry.open:
        return None
    return frozenset(f.name for f in COMMON_FIELDS + entry.fields)
