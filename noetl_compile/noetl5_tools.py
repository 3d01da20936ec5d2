"""The arguments NoETL 5's tool executors read, per kind the Airflow runtime runs: each key's
type, default and meaning, the line of NoETL 5's source that reads it, and whether the Airflow
runtime acts on it. Read at noetl/tools ded94546 (`src/tools/*.rs`, each tool's serde config
struct: a key the struct does not declare is dropped by serde, so these are all the keys the tool
reads) and noetl/server d9ec700c (what the server hands the worker). A standard-library leaf.

Who reads it: `tool_catalogue` (every key here is a known field of its kind, so C516 never calls
one ignored), `check.tool_fields` (a key the runtime does not act on is S116 at its position, with
the reason below), and docs/noetl5.md, whose tool tables are generated from it:

    python -m noetl_compile.noetl5_tools docs/noetl5.md     # rewrite the tables

`tests/test_noetl5_tools.py` fails when the page and this table disagree, and runs `noetlc check`
on a playbook per kind holding every key (0 reported as unknown).

`shell` is not here: its surface is `shell_surface.py` (docs/shell-tool.md).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SERVER",
    "TOOLS",
    "TOOLS_REPO",
    "N5Key",
    "N5Tool",
    "keys_of",
    "not_run",
    "render_tables",
    "rewrite_page",
]

TOOLS_REPO = "noetl/tools@ded94546"
SERVER = "noetl/server@d9ec700c"

RUNS = ""  # the Airflow runtime acts on the key as NoETL 5's tool does


@dataclass(frozen=True)
class N5Key:
    name: str
    type: str
    default: str  # as NoETL 5 applies it; "required" or "-" (absent: not used)
    meaning: str
    source: str  # "repo@commit path:line" of the line that declares or reads it
    airflow: str = RUNS  # why the Airflow runtime does not act on it; RUNS when it does


@dataclass(frozen=True)
class N5Tool:
    kind: str
    result: str  # the ToolResult data NoETL 5's tool hands the next steps
    result_source: str
    keys: tuple[N5Key, ...]


def _src(path: str, line: int, repo: str = TOOLS_REPO) -> str:
    return f"{repo} {path}:{line}"


_PG = "src/tools/postgres.rs"
_DUCK = "src/tools/duckdb.rs"
_HTTP = "src/tools/http.rs"
_PY = "src/tools/python.rs"
_NOOP = "src/tools/noop.rs"
_PB = "src/tools/playbook.rs"

_PB_RUNTIME = (
    "NoETL 5's server assigns catalog ids and version numbers when a playbook is registered "
    "(catalog register); a compiled DAG folder holds one version of each catalog path and no "
    "ids, so on Airflow the child is found by its `path` only"
)

_PARAMS_LIST = (
    "values bound to `$1..$n` as real query parameters (never interpolated); NoETL 5's tool "
    "binds a list. NoETL 5's server (d9ec700c `orchestrate-core/src/playbook.rs:257`) types "
    '`params` as a mapping: both are accepted here, a mapping keyed by position (`1`, `"2"`, '
    "`$3`). A mapping or list value is bound as its JSON text, as NoETL 5 binds it"
)

TOOLS: dict[str, N5Tool] = {
    t.kind: t
    for t in (
        N5Tool(
            "postgres",
            "`{columns, rows, row_count}` for a SELECT/WITH (`{columns: [], rows: [], "
            "row_count: 0}` when empty; numeric as exact decimal strings), else "
            "`{affected_rows}`",
            _src(_PG, 336),
            (
                N5Key("query", "string", "required", "the SQL (alias `command`)", _src(_PG, 25)),
                N5Key("command", "string", "-", "same as `query` (serde alias)", _src(_PG, 24)),
                N5Key("params", "list | mapping", "[]", _PARAMS_LIST, _src(_PG, 29)),
                N5Key(
                    "connection_string",
                    "string",
                    "-",
                    "a libpq URL or key/value string; wins over the host fields. On Airflow: a "
                    "connection built at run time from the rendered value (never written into "
                    "the DAG file; X601 refuses a literal password in it)",
                    _src(_PG, 33),
                ),
                N5Key("host", "string", "localhost", "server host", _src(_PG, 238)),
                N5Key("port", "integer", "5432", "server port", _src(_PG, 239)),
                N5Key("database", "string", "postgres", "database name", _src(_PG, 240)),
                N5Key("user", "string", "postgres", "user name", _src(_PG, 241)),
                N5Key(
                    "password",
                    "string",
                    "-",
                    "the password, after rendering (use `{{ secret.x }}`/keychain: X601 refuses "
                    "a literal one)",
                    _src(_PG, 53),
                ),
                N5Key(
                    "schema",
                    "string",
                    "-",
                    "`SET search_path TO <schema>` before the query (on Airflow: on a "
                    "connection of the call's own, never a pooled one)",
                    _src(_PG, 285),
                ),
                N5Key(
                    "as_objects",
                    "boolean",
                    "true",
                    "rows as `{column: value}` objects (false: as lists in column order)",
                    _src(_PG, 61),
                ),
            ),
        ),
        N5Tool(
            "duckdb",
            "`{columns, rows, row_count}` for a SELECT/WITH, else `{affected_rows}`",
            _src(_DUCK, 287),
            (
                N5Key("query", "string", "required", "the SQL (alias `command`)", _src(_DUCK, 22)),
                N5Key("command", "string", "-", "same as `query` (serde alias)", _src(_DUCK, 21)),
                N5Key(
                    "params",
                    "list | mapping",
                    "[]",
                    "values bound to `$1..$n` (or `?`) as real parameters; a mapping keyed by "
                    "position is accepted as for postgres",
                    _src(_DUCK, 26),
                ),
                N5Key(
                    "db_path",
                    "string",
                    "in-memory",
                    "the database file (NoETL 5: a fresh in-memory database when absent; the "
                    "Airflow runtime's default is a file per execution, see docs/tools/duckdb.md)",
                    _src(_DUCK, 30),
                ),
                N5Key(
                    "as_objects",
                    "boolean",
                    "true",
                    "rows as objects (false: as lists)",
                    _src(_DUCK, 34),
                ),
            ),
        ),
        N5Tool(
            "http",
            "`{status_code, headers, data, body}` (`data` and `body` the same parsed body); a "
            "status outside 2xx is an error result",
            _src(_HTTP, 320),
            (
                N5Key("url", "string", "required", "the URL", _src(_HTTP, 49)),
                N5Key("method", "string", "GET", "the HTTP method", _src(_HTTP, 53)),
                N5Key("headers", "mapping", "{}", "request headers", _src(_HTTP, 57)),
                N5Key(
                    "body",
                    "any",
                    "-",
                    "the body: a string raw, else JSON (after `json` and `form`)",
                    _src(_HTTP, 61),
                ),
                N5Key(
                    "json", "any", "-", "a JSON body (wins over `form`, `body`)", _src(_HTTP, 65)
                ),
                N5Key(
                    "form",
                    "mapping",
                    "-",
                    "fields sent as `application/x-www-form-urlencoded` (wins over `body`; null "
                    "fields left out)",
                    _src(_HTTP, 73),
                ),
                N5Key("params", "mapping", "{}", "query parameters", _src(_HTTP, 77)),
                N5Key(
                    "timeout_seconds",
                    "integer",
                    "30",
                    "the request's timeout; a timeout fails the call (default: the client's 30 s, "
                    "line 168)",
                    _src(_HTTP, 81),
                ),
                N5Key(
                    "follow_redirects",
                    "boolean",
                    "true",
                    "follow 3xx responses (NoETL 5's client follows whatever the key says, "
                    "http.rs:167; the Airflow runtime follows by default, as NoETL 5, and "
                    "honours an explicit `false`)",
                    _src(_HTTP, 85),
                ),
                N5Key(
                    "response_type",
                    "string",
                    "json",
                    "`json` (parsed, text when not JSON), `text`, or `binary` (`{base64, size}`)",
                    _src(_HTTP, 89),
                ),
                N5Key(
                    "auth",
                    "mapping",
                    "-",
                    "credentials resolved and applied to the request (ToolConfig `auth`)",
                    _src(_HTTP, 363),
                ),
            ),
        ),
        N5Tool(
            "python",
            "the `result` the code sets (or returns; `main()`'s value), else `{stdout, stderr}`; "
            "a non-zero exit is an error with `exit_code`, a timeout `Execution timed out after "
            "N seconds`",
            _src(_PY, 727),
            (
                N5Key("code", "string", "required", "the code (or `script`)", _src(_PY, 196)),
                N5Key(
                    "script",
                    "mapping",
                    "-",
                    "`{uri, source: {type: inline|file|gcs|http, code, endpoint, method, "
                    "timeout}}`",
                    _src(_PY, 201),
                ),
                N5Key(
                    "args",
                    "mapping",
                    "{}",
                    "the inputs, globals of the code (alias `input`)",
                    _src(_PY, 207),
                ),
                N5Key("input", "mapping", "{}", "same as `args` (serde alias)", _src(_PY, 206)),
                N5Key(
                    "python",
                    "string",
                    "$PYTHON_PATH or python3",
                    "the interpreter the code runs in (on Airflow: without the key, the task's "
                    "own; with it, a process of that interpreter, inputs as JSON on stdin)",
                    _src(_PY, 211),
                ),
                N5Key(
                    "env",
                    "mapping",
                    "{}",
                    "environment variables added while the code runs",
                    _src(_PY, 215),
                ),
                N5Key(
                    "timeout_seconds",
                    "integer",
                    "-",
                    "seconds the code may run; past them the call fails (`TimeoutError`)",
                    _src(_PY, 219),
                ),
                N5Key(
                    "timeout",
                    "integer",
                    "-",
                    "ToolConfig `timeout`: used when `timeout_seconds` is absent",
                    _src(_PY, 810),
                ),
                N5Key(
                    "cwd",
                    "string",
                    "-",
                    "the working directory while the code runs",
                    _src(_PY, 223),
                ),
            ),
        ),
        N5Tool(
            "noop",
            "its `result` when given, else `{status: ok, message}` (message `noop` by default)",
            _src(_NOOP, 60),
            (
                N5Key(
                    "message",
                    "string",
                    "noop",
                    "the message of the default result `{status: ok, message}`",
                    _src(_NOOP, 17),
                ),
                N5Key(
                    "result",
                    "any",
                    "-",
                    "the tool's result as given (rendered)",
                    _src(_NOOP, 20),
                ),
            ),
        ),
        N5Tool(
            "playbook",
            "without `return_step`/`return_result`: `{status: started, execution_id, path, "
            "async: true}` at once; `return_result: true`: the child's result (of `result_step`, "
            "else its last); `return_step`: the child's status payload `{execution_id, status, "
            "current_step, progress, is_cancelled}` once it has ended (a failed child too)",
            _src(_PB, 387),
            (
                N5Key("path", "string", "-", "the child's catalog path", _src(_PB, 19)),
                N5Key(
                    "catalog_id",
                    "integer",
                    "-",
                    "the child's catalog id",
                    _src(_PB, 22),
                    _PB_RUNTIME,
                ),
                N5Key(
                    "version",
                    "integer",
                    "latest",
                    "the child's version",
                    _src(_PB, 25),
                    _PB_RUNTIME,
                ),
                N5Key(
                    "payload",
                    "mapping",
                    "{}",
                    "the child's workload overrides (used when `args` is empty)",
                    _src(_PB, 28),
                ),
                N5Key("args", "mapping", "-", "the child's payload, over `payload`", _src(_PB, 31)),
                N5Key(
                    "parent_execution_id",
                    "integer",
                    "the caller's",
                    "the parent recorded for the child (a positive id)",
                    _src(_PB, 34),
                ),
                N5Key(
                    "return_step",
                    "string",
                    "-",
                    "wait for the child and return its status payload",
                    _src(_PB, 41),
                ),
                N5Key(
                    "return_result",
                    "boolean",
                    "false",
                    "wait for the child and return its result",
                    _src(_PB, 55),
                ),
                N5Key(
                    "result_step",
                    "string",
                    "-",
                    "the child step whose result `return_result` returns",
                    _src(_PB, 63),
                ),
                N5Key(
                    "timeout",
                    "integer",
                    "180 (return_result) / 300",
                    "in a pipeline task: seconds to wait for the child, checked before each poll "
                    "(past them `return_result` fails the task, `return_step` returns `{status: "
                    "timeout}`); on a step the worker's ToolConfig takes the key (serde's flatten, "
                    "noetl/worker f6fae7ef command.rs:694): the timeout of each HTTP request of the "
                    "call, the wait keeps its default",
                    _src(_PB, 401),
                    "the call waits for the child to end (run inline) or for the child DAG run "
                    "(deployed): no bound is put on the wait (docs/semantics.md section 1, 'A nested "
                    "`playbook` task's `timeout` in a pipeline on NoETL 5')",
                ),
                N5Key(
                    "poll_interval",
                    "integer",
                    "2",
                    "seconds between status polls (at least 1)",
                    _src(_PB, 402),
                ),
            ),
        ),
    )
}


def keys_of(kind: str) -> frozenset[str]:
    """The keys NoETL 5's ``kind`` tool reads (empty for a kind not tabled here)."""
    tool = TOOLS.get(kind)
    return frozenset(k.name for k in tool.keys) if tool else frozenset()


def not_run(kind: str, key: str) -> str | None:
    """Why the Airflow runtime does not act on ``key`` of ``kind``; None when it does (or the
    key is not NoETL 5's)."""
    tool = TOOLS.get(kind)
    for entry in tool.keys if tool else ():
        if entry.name == key:
            return entry.airflow or None
    return None


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_tables() -> str:
    """docs/noetl5.md's tool tables (between the markers :func:`rewrite_page` keeps)."""
    intro = (
        f"Read at {TOOLS_REPO} (`src/tools/*.rs`) and {SERVER}; generated from "
        '`noetl_compile/noetl5_tools.py`. "On Airflow" says *runs* when the Airflow runtime '
        "acts on the key as NoETL 5's tool does; otherwise why not (`noetlc check` says so, "
        "S116, at the key).\n"
    )
    parts = [intro]
    for tool in TOOLS.values():
        parts.append(f"\n### `{tool.kind}`\n\nResult: {tool.result} ({tool.result_source}).\n\n")
        parts.append("| key | type | default | meaning | source | on Airflow |\n")
        parts.append("| --- | --- | --- | --- | --- | --- |\n")
        for k in tool.keys:
            where = "runs" if k.airflow == RUNS else _cell(k.airflow)
            parts.append(
                f"| `{k.name}` | {_cell(k.type)} | {_cell(k.default)} | {_cell(k.meaning)} | "
                f"{_cell(k.source)} | {where} |\n"
            )
    return "".join(parts)


BEGIN = (
    "<!-- noetl5-tools: generated by `python -m noetl_compile.noetl5_tools docs/noetl5.md` -->\n"
)
END = "<!-- /noetl5-tools -->\n"


def rewrite_page(text: str) -> str:
    """``text`` (docs/noetl5.md) with its generated block replaced by :func:`render_tables`."""
    if BEGIN not in text or END not in text:
        raise ValueError("the page has no noetl5-tools block (its two marker lines)")
    start = text.index(BEGIN)
    end = text.index(END, start) + len(END)
    return text[:start] + BEGIN + render_tables() + END + text[end:]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m noetl_compile.noetl5_tools docs/noetl5.md", file=sys.stderr)
        return 2
    page = Path(argv[0])
    page.write_text(rewrite_page(page.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
