"""Table (a)'s specs for NoETL 138c10ed (canonical) rows recorded after the first rounds.

The same shape as ``dsl_key_specs.CANONICAL`` (name, engine, key, default, file, playbook with
the key absent, playbook with it present); the builders come from ``dsl_key_specs`` and
``dsl_key_specs_older``. Kept apart so that those modules stay under the size the project keeps.
"""

from __future__ import annotations

from typing import Any

from tests.differential.dsl_key_specs import _MAP, _OK, _USERS, _http, _playbook, _py, _two

_TRANSFER = "noetl/tools/transfer/executor.py"
_HTTP = "noetl/tools/http/executor.py"
_DUCKDB = "noetl/tools/duckdb/__init__.py"
# The local API's answer to a request: its method and parsed body only (no port, no header).
_BODY = "@HTTP@/request-body"
# A page of the local API's users under `users` (beside `has_more`, `offset`...).
_USERS_PAGE = "@HTTP@/api/v1/users?limit=3"


def _copy(table: str, copy: dict[str, Any]) -> dict[str, Any]:
    """`start` makes the Postgres table `table` (one per case: the recorder keeps one database
    per session), then `copy` runs the transfer tool `copy` (its keys as given, so that a case
    can leave out any of them) into it; the runner compares the copy's result."""
    create = f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int, username text);"
    return _playbook(
        {
            "step": "start",
            "tool": {"kind": "postgres", "auth": "pg_local", "command": create},
            "next": [{"step": "copy"}],
        },
        {"step": "copy", "tool": {"kind": "transfer", **copy}},
    )


def _http_users(**keys: Any) -> dict[str, Any]:
    return {"tool": "http", "url": _USERS, **keys}


def _pg(table: str, **keys: Any) -> dict[str, Any]:
    return {"tool": "postgres", "auth": "pg_local", "table": table, "mapping": _MAP, **keys}


def _transfer_row(
    name: str, key: str, default: str, absent: dict[str, Any], present: dict[str, Any]
) -> tuple[str, str, str, str, str, dict, dict]:
    """A transfer row: `absent`/`present` are the copy tool's keys; each variant its table."""
    return (
        f"transfer_{name}",
        "canonical",
        key,
        default,
        _TRANSFER,
        _copy(f"diff_k35_{name}_a", _with_table(absent, f"diff_k35_{name}_a")),
        _copy(f"diff_k35_{name}_p", _with_table(present, f"diff_k35_{name}_p")),
    )


def _with_table(copy: dict[str, Any], table: str) -> dict[str, Any]:
    """The copy's keys with the target's `@TABLE@` (if any) named `table`."""
    target = copy.get("target")
    if isinstance(target, dict) and target.get("table") == "@TABLE@":
        return {**copy, "target": {**target, "table": table}}
    return copy


def _broken(**second: Any) -> dict[str, Any]:
    """A pipeline whose first task's rule says `break`, so that NoETL's engine hands the tasks
    not run (here `t2`, with the keys `second`) to its `then` action handler as actions
    (engine.py 5034: `remaining_actions`); `after` follows the step."""
    rule = {"when": "{{ true }}", "then": {"do": "break"}}
    return _playbook(
        {
            "step": "start",
            "tool": [
                {**_py(_OK), "name": "t1", "spec": {"policy": {"rules": [rule]}}},
                {**_py("result = {'b': 2}"), "name": "t2", **second},
            ],
            "next": [{"step": "after"}],
        },
        {"step": "after", "tool": _py("result = {'after': True}")},
    )


def _pipeline(*tasks: dict[str, Any]) -> dict[str, Any]:
    return _playbook(
        {"step": "start", "tool": list(tasks), "next": [{"step": "after"}]},
        {"step": "after", "tool": _py("result = {'after': True}")},
    )


def _init_page_break(*names: str | None) -> dict[str, Any]:
    """A pipeline that breaks at its first task `init_page`, the tasks after it named `names`
    (None: no `name`), with a `patient_count` in the workload: what 138c10ed's no-progress
    guard (task_sequence_executor.py 338-370) reads the remaining tasks' names for."""
    rule = {"when": "{{ true }}", "then": {"do": "break"}}
    rest = [
        {**_py(f"result = {{'t{i}': 1}}"), **({"name": name} if name else {})}
        for i, name in enumerate(names, 2)
    ]
    playbook = _pipeline(
        {**_py(_OK), "name": "init_page", "spec": {"policy": {"rules": [rule]}}}, *rest
    )
    return {**playbook, "workload": {"patient_count": 3}}


def _output(**output: Any) -> dict[str, Any]:
    """A python step whose tool carries `output:` (NoETL's result handler: result_handler.py)."""
    return _two(_py("result = {'ok': 1, 'text': 'abc'}", output=output))


def _duckdb(**keys: Any) -> dict[str, Any]:
    return _two({"kind": "duckdb", "query": "SELECT 41 + 1 AS n", **keys})


_T = "@TABLE@"
_ENGINE = "noetl/core/dsl/v2/engine.py"
_RESULTS = "noetl/worker/result_handler.py"

CANONICAL_MORE: tuple[tuple[str, str, str, str, str, dict, dict], ...] = (
    _transfer_row(
        "chunk_size",
        "chunk_size",
        "1000",
        {"source": _http_users(), "target": _pg(_T)},
        {"source": _http_users(), "target": _pg(_T), "chunk_size": 3},
    ),
    _transfer_row(
        "mode",
        "mode",
        "'append'",
        {"source": _http_users(), "target": _pg(_T)},
        {"source": _http_users(), "target": _pg(_T), "mode": "replace"},
    ),
    _transfer_row(
        "data_path",
        "data_path",
        "None",
        {"source": {"tool": "http", "url": _USERS_PAGE}, "target": _pg(_T)},
        {"source": {"tool": "http", "url": _USERS_PAGE, "data_path": "users"}, "target": _pg(_T)},
    ),
    _transfer_row(
        "source",
        "source",
        "{}",
        {"target": _pg(_T)},
        {"source": _http_users(), "target": _pg(_T)},
    ),
    _transfer_row(
        "target",
        "target",
        "{}",
        {"source": _http_users()},
        {"source": _http_users(), "target": _pg(_T)},
    ),
    _transfer_row(
        "table",
        "table",
        "None",
        {
            "source": _http_users(),
            "target": {"tool": "postgres", "auth": "pg_local", "mapping": _MAP},
        },
        {"source": _http_users(), "target": _pg(_T)},
    ),
    _transfer_row(
        "url",
        "url",
        "None",
        {"source": {"tool": "http"}, "target": _pg(_T)},
        {"source": _http_users(), "target": _pg(_T)},
    ),
    _transfer_row(
        "auth",
        "auth",
        "None",
        {
            "source": _http_users(),
            "target": {"tool": "postgres", "table": _T, "mapping": _MAP},
        },
        {"source": _http_users(), "target": _pg(_T)},
    ),
    (
        "http_endpoint",
        "canonical",
        "endpoint",
        "None",
        _HTTP,
        _two(_http(url="@HTTP@/respond", params={"body": "by-url"})),
        _two(
            _http(
                url="@HTTP@/respond",
                endpoint="@HTTP@/respond?status=201",
                params={"body": "by-endpoint"},
            )
        ),
    ),
    (
        # The step's `input` is the command's input: NoETL's http tool merges its `params` over
        # the tool's (executor.py 319, `task_with`).
        "http_input_params",
        "canonical",
        "params",
        "None",
        _HTTP,
        _two(_http(url="@HTTP@/respond", params={"body": "tool"})),
        _two(
            _http(url="@HTTP@/respond", params={"body": "tool"}),
            {"input": {"params": {"body": "input"}}},
        ),
    ),
    (
        "http_body",
        "canonical",
        "body",
        "None",
        _HTTP,
        _two(_http(url=_BODY, method="POST")),
        _two(_http(url=_BODY, method="POST", body={"order": 7})),
    ),
    (
        "http_payload",
        "canonical",
        "payload",
        "None",
        _HTTP,
        _two(_http(url=_BODY, method="POST")),
        _two(_http(url=_BODY, method="POST", payload={"order": 8})),
    ),
    (
        "postgres_pool",
        "canonical",
        "pool",
        "None",
        "noetl/tools/postgres/executor.py",
        _two({"kind": "postgres", "auth": "pg_local", "command": "SELECT 41 + 1 AS n"}),
        _two(
            {"kind": "postgres", "auth": "pg_local", "command": "SELECT 41 + 1 AS n", "pool": False}
        ),
    ),
    (
        "duckdb_auto_secrets",
        "canonical",
        "auto_secrets",
        "True",
        "noetl/tools/duckdb/config.py",
        _duckdb(),
        _duckdb(auto_secrets=False),
    ),
    (
        "duckdb_db_type",
        "canonical",
        "db_type",
        "'postgres'",
        _DUCKDB,
        _duckdb(),
        _duckdb(db_type="sqlite"),
    ),
    (
        "duckdb_require_cloud_output",
        "canonical",
        "require_cloud_output",
        "None",
        _DUCKDB,
        _duckdb(),
        _duckdb(require_cloud_output=True),
    ),
    (
        "duckdb_gcs_credential",
        "canonical",
        "gcs_credential",
        "None",
        _DUCKDB,
        _duckdb(),
        _duckdb(gcs_credential="gcs_k35"),
    ),
    (
        "duckdb_credentials",
        "canonical",
        "credentials",
        "None",
        "noetl/tools/duckdb/config.py",
        _duckdb(),
        _duckdb(credentials={"pg": {"key": "pg_local"}}),
    ),
    (
        "duckdb_database_file",
        "canonical",
        "database",
        "None",
        "noetl/tools/duckdb/config.py",
        _duckdb(),
        _duckdb(database="@WORK@/k35.duckdb"),
    ),
    (
        "python_args",
        "canonical",
        "args",
        "{}",
        "noetl/tools/python/executor.py",
        _two(_py("result = {'x': x}")),
        _two(_py("result = {'x': x}", args={"x": 5})),
    ),
    *(
        (
            f"then_retry_{key}",
            "canonical",
            key,
            default,
            _ENGINE,
            _broken(retry=base),
            _broken(retry={**base, key: value}),
        )
        for key, default, base, value in (
            ("max_attempts", "3", {"delay": 0}, 1),
            ("delay", "0", {"max_attempts": 2}, 1),
            ("backoff", "'linear'", {"max_attempts": 2}, "exponential"),
            ("input", "{}", {"max_attempts": 2}, {"x": 1}),
        )
    ),
    (
        "then_action_retry",
        "canonical",
        "retry",
        "None",
        _ENGINE,
        _broken(),
        _broken(retry={"max_attempts": 2}),
    ),
    *(
        (
            f"then_collect_{key}",
            "canonical",
            key,
            default,
            _ENGINE,
            _broken(collect=base),
            _broken(collect={**base, key: value}),
        )
        for key, default, base, value in (
            ("strategy", "'append'", {"path": "b"}, "replace"),
            ("path", "None", {"strategy": "append"}, "b"),
            ("into", "'_collected_pages'", {"path": "b"}, "pages"),
        )
    ),
    (
        "tool_input",
        "canonical",
        "input",
        "None",
        "noetl/worker/v2_worker_nats.py",
        _two(_py("result = {'x': x}")),
        _two(_py("result = {'x': x}", input={"x": 7})),
    ),
    (
        "pipeline_task_kind",
        "canonical",
        "kind",
        "'unknown'",
        "noetl/worker/task_sequence_executor.py",
        _pipeline({"name": "t1", "code": _OK}),
        _pipeline({**_py(_OK), "name": "t1"}),
    ),
    (
        "pipeline_task_name",
        "canonical",
        "name",
        "None",
        "noetl/worker/task_sequence_executor.py",
        _init_page_break(None, None),
        _init_page_break("paginate", "fetch_page"),
    ),
    (
        "pipeline_rule_to",
        "canonical",
        "to",
        "None",
        "noetl/worker/task_sequence_executor.py",
        _pipeline(
            {
                **_py(_OK),
                "name": "t1",
                "spec": {"policy": {"rules": [{"when": "{{ true }}", "then": {"do": "jump"}}]}},
            },
            {**_py("result = {'t2': 1}"), "name": "t2"},
            {**_py("result = {'t3': 1}"), "name": "t3"},
        ),
        _pipeline(
            {
                **_py(_OK),
                "name": "t1",
                "spec": {
                    "policy": {
                        "rules": [{"when": "{{ true }}", "then": {"do": "jump", "to": "t3"}}]
                    }
                },
            },
            {**_py("result = {'t2': 1}"), "name": "t2"},
            {**_py("result = {'t3': 1}"), "name": "t3"},
        ),
    ),
    (
        "tool_output",
        "canonical",
        "output",
        "None",
        "noetl/worker/v2_worker_nats.py",
        _two(_py("result = {'ok': 1, 'text': 'abc'}")),
        _output(select=["ok"]),
    ),
    (
        "output_select",
        "canonical",
        "output_select",
        "None",
        _RESULTS,
        _output(inline_max_bytes=65536),
        _output(output_select=["ok"]),
    ),
    (
        "output_inline_max_bytes",
        "canonical",
        "inline_max_bytes",
        "self.inline_max_bytes",
        _RESULTS,
        _output(store={}),
        _output(inline_max_bytes=1),
    ),
    (
        "output_store",
        "canonical",
        "store",
        "{}",
        _RESULTS,
        _output(inline_max_bytes=1),
        _output(inline_max_bytes=1, store={"kind": "kv"}),
    ),
    (
        "output_store_kind",
        "canonical",
        "kind",
        "'auto'",
        _RESULTS,
        _output(inline_max_bytes=1, store={}),
        _output(inline_max_bytes=1, store={"kind": "memory"}),
    ),
)
