"""Table (a)'s rows to record, one compact spec each (``dsl_key_cases.py`` writes the cases).

Each :data:`SPECS` entry: a case name stem, the engine, the row's key and default (its identity
in ``tests/data/noetl-dsl-keys.json``), the engine file that reads it, and two playbooks: the
key absent (the engine's default decides) and present with a value other than the default.
The builders below keep each playbook to the construct under test.
"""

from __future__ import annotations

from typing import Any


def _py(code: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "python", "code": code, **extra}


def _playbook(*steps: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "noetl.io/v2",
        "kind": "Playbook",
        "metadata": {"name": "keys"},
        "workflow": list(steps),
    }


def _two(first_tool: dict, first_extra: dict | None = None) -> dict[str, Any]:
    """A step `start` with the tool under test, then `after` reading nothing of it."""
    return _playbook(
        {"step": "start", "tool": first_tool, **(first_extra or {})},
        {"step": "after", "tool": _py("result = {'after': True}")},
    )


def _http(**config: Any) -> dict[str, Any]:
    return {"kind": "http", **config}


# Routes of tests/harness/http_server.py whose answer holds no request echo (an echo carries the
# client's port and the server's, which differ between the two runs): a POST-only route and a
# slow one.
_POST_ONLY = "@HTTP@/api/v1/concurrency/reset"
_SLOW = "@HTTP@/api/v1/slow?delay=1.5"
_FAILS = _py("raise RuntimeError('boom')")
_OK = "result = {'ok': 1}"
# Reads `j`, a name only the tool's `libs` can bind.
_LIBS_CODE = "result = {'text': j.dumps({'a': 1})}"


def _retried(name: str, then: dict[str, Any]) -> dict[str, Any]:
    """A tool whose first call fails (`name`: its file under @WORK@, one per case: the recorder
    keeps one @WORK@ for its session) and whose retry (a policy rule's `then`) succeeds: its
    result says whether half a second passed between the two calls (the wait is measured in
    the result, since the runner compares results, not timings)."""
    code = (
        "import time\n"
        f"path = '@WORK@/{name}.txt'\n"
        "with open(path, 'a') as f:\n"
        "    f.write(str(time.time()) + '\\n')\n"
        "with open(path) as f:\n"
        "    stamps = [float(x) for x in f.read().split()]\n"
        "if len(stamps) < 2:\n"
        "    raise RuntimeError('the first call fails')\n"
        "result = {'calls': len(stamps), 'waited': stamps[1] - stamps[0] >= 0.5}\n"
    )
    rule = {
        "when": "{{ output.status == 'error' }}",
        "then": {"do": "retry", "attempts": 2, **then},
    }
    return _two(_py(code, spec={"policy": {"rules": [rule]}}), {"next": [{"step": "after"}]})


def _arcs(arc: dict[str, Any]) -> dict[str, Any]:
    return _playbook(
        {"step": "start", "tool": _py(_OK), "next": {"arcs": [arc]}},
        {"step": "after", "tool": _py("result = {'after': True}")},
    )


def _transfer(table: str, source: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """A Postgres table made by `start` (its own per case: the recorder keeps one database per
    session), then `copy`: a transfer from the local API's `/users` (10 records) into it. The
    copy's result (direction, types, rows transferred, chunks) is what the runner compares."""
    create = f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int, username text);"
    return _playbook(
        {
            "step": "start",
            "tool": {"kind": "postgres", "auth": "pg_local", "command": create},
            "next": [{"step": "copy"}],
        },
        {
            "step": "copy",
            "tool": {"kind": "transfer", "source": source, "target": target, "chunk_size": 4},
        },
    )


_USERS = "@HTTP@/users"
_MAP = {"id": "id", "username": "username"}


def _pg_target(table: str, **keys: Any) -> dict[str, Any]:
    return {"auth": "pg_local", "table": table, **keys}


# name, engine, key, default, the engine file that reads it, absent playbook, present playbook
CANONICAL: tuple[tuple[str, str, str, str, str, dict, dict], ...] = (
    (
        "python_code",
        "canonical",
        "code",
        "''",
        "noetl/worker/v2_worker_nats.py",
        _two({"kind": "python"}),
        _two(_py(_OK)),
    ),
    (
        "step_tool",
        "canonical",
        "tool",
        "None",
        "noetl/core/dsl/v2/parser.py",
        _playbook(
            {"step": "start", "next": [{"step": "after"}]}, {"step": "after", "tool": _py(_OK)}
        ),
        _playbook(
            {"step": "start", "tool": _py(_OK), "next": [{"step": "after"}]},
            {"step": "after", "tool": _py(_OK)},
        ),
    ),
    (
        "tool_kind",
        "canonical",
        "kind",
        "None",
        "noetl/core/dsl/v2/engine.py",
        _two({"code": _OK}),
        _two(_py(_OK)),
    ),
    (
        "next_arcs",
        "canonical",
        "arcs",
        "[]",
        "noetl/core/dsl/v2/engine.py",
        _playbook(
            {"step": "start", "tool": _py(_OK), "next": {"spec": {"mode": "exclusive"}}},
            {"step": "after", "tool": _py(_OK)},
        ),
        _playbook(
            {
                "step": "start",
                "tool": _py(_OK),
                "next": {"spec": {"mode": "exclusive"}, "arcs": [{"step": "after"}]},
            },
            {"step": "after", "tool": _py(_OK)},
        ),
    ),
    (
        "arc_when",
        "canonical",
        "when",
        "None",
        "noetl/core/dsl/v2/engine.py",
        _arcs({"step": "after"}),
        _arcs({"step": "after", "when": "{{ start.ok == 2 }}"}),
    ),
    (
        "arc_step",
        "canonical",
        "step",
        "None",
        "noetl/core/dsl/v2/engine.py",
        _arcs({"when": "{{ true }}"}),
        _arcs({"step": "after", "when": "{{ true }}"}),
    ),
    (
        "arc_set",
        "canonical",
        "set",
        "None",
        "noetl/core/dsl/v2/engine.py",
        _playbook(
            {"step": "start", "tool": _py(_OK), "next": {"arcs": [{"step": "after"}]}},
            {"step": "after", "tool": _py("result = {'k': k}", input={"k": "{{ ctx.k }}"})},
        ),
        _playbook(
            {
                "step": "start",
                "tool": _py(_OK),
                "next": {"arcs": [{"step": "after", "set": {"ctx.k": 7}}]},
            },
            {"step": "after", "tool": _py("result = {'k': k}", input={"k": "{{ ctx.k }}"})},
        ),
    ),
    (
        "spec_policy",
        "canonical",
        "policy",
        "{}",
        "noetl/core/dsl/v2/engine.py",
        _two({**_FAILS, "spec": {}}, {"next": [{"step": "after"}]}),
        _two(
            {
                **_FAILS,
                "spec": {
                    "policy": {
                        "rules": [
                            {"when": "{{ output.status == 'error' }}", "then": {"do": "continue"}}
                        ]
                    }
                },
            },
            {"next": [{"step": "after"}]},
        ),
    ),
    (
        "policy_rules",
        "canonical",
        "rules",
        "[]",
        "noetl/core/dsl/v2/engine.py",
        _two({**_FAILS, "spec": {"policy": {}}}, {"next": [{"step": "after"}]}),
        _two(
            {
                **_FAILS,
                "spec": {"policy": {"rules": [{"when": "{{ true }}", "then": {"do": "continue"}}]}},
            },
            {"next": [{"step": "after"}]},
        ),
    ),
    (
        "http_method",
        "canonical",
        "method",
        "'GET'",
        "noetl/worker/v2_worker_nats.py",
        _two(_http(url=_POST_ONLY)),
        _two(_http(url=_POST_ONLY, method="POST")),
    ),
    (
        "http_params",
        "canonical",
        "params",
        "{}",
        "noetl/worker/v2_worker_nats.py",
        _two(_http(url="@HTTP@/respond")),
        _two(_http(url="@HTTP@/respond", params={"body": "made", "status": 201})),
    ),
    (
        "http_headers",
        "canonical",
        "headers",
        "None",
        "noetl/tools/http/executor.py",
        _two(_http(url="@HTTP@/bearer")),
        _two(_http(url="@HTTP@/bearer", headers={"Authorization": "Bearer k33"})),
    ),
    (
        "http_timeout",
        "canonical",
        "timeout",
        "None",
        "noetl/tools/http/executor.py",
        _two(_http(url=_SLOW)),
        _two(_http(url=_SLOW, timeout=0.5)),
    ),
    (
        "http_follow_redirects",
        "canonical",
        "follow_redirects",
        "False",
        "noetl/tools/http/executor.py",
        _two(_http(url="@HTTP@/redirect-to", params={"url": "/respond", "status_code": 302})),
        _two(
            _http(
                url="@HTTP@/redirect-to",
                params={"url": "/respond", "status_code": 302},
                follow_redirects=True,
            )
        ),
    ),
    (
        "duckdb_database",
        "canonical",
        "database",
        "':memory:'",
        "noetl/worker/v2_worker_nats.py",
        _two({"kind": "duckdb", "query": "SELECT 41 + 1 AS n"}),
        _two({"kind": "duckdb", "query": "SELECT 41 + 1 AS n", "database": "@WORK@/k33.duckdb"}),
    ),
    (
        "http_verify",
        "canonical",
        "verify",
        "True",
        "noetl/tools/http/executor.py",
        _two(_http(url="@HTTP@/respond", params={"body": "v"})),
        _two(_http(url="@HTTP@/respond", params={"body": "v"}, verify=False)),
    ),
    (
        "tool_spec",
        "canonical",
        "spec",
        "{}",
        "noetl/core/dsl/v2/engine.py",
        _two(_FAILS, {"next": [{"step": "after"}]}),
        _two(
            {
                **_FAILS,
                "spec": {"policy": {"rules": [{"when": "{{ true }}", "then": {"do": "continue"}}]}},
            },
            {"next": [{"step": "after"}]},
        ),
    ),
    (
        "http_url",
        "canonical",
        "url",
        "''",
        "noetl/tools/http/executor.py",
        _two(_http(method="GET")),
        _two(_http(url="@HTTP@/respond", params={"body": "u"})),
    ),
    (
        "http_verify_ssl",
        "canonical",
        "verify_ssl",
        "None",
        "noetl/tools/http/executor.py",
        _two(_http(url="@HTTP@/respond", params={"body": "v"})),
        _two(_http(url="@HTTP@/respond", params={"body": "v"}, verify_ssl=False)),
    ),
    *(
        (
            f"duckdb_{key}",
            "canonical",
            key,
            "None",
            "noetl/worker/v2_worker_nats.py",
            _two({"kind": "duckdb"}),
            _two({"kind": "duckdb", key: "SELECT 41 + 1 AS n"}),
        )
        for key in ("query", "sql", "command")
    ),
    (
        "rule_backoff",
        "canonical",
        "backoff",
        "'none'",
        "noetl/worker/task_sequence_executor.py",
        _retried("backoff_absent", {"delay": 0.6}),
        _retried("backoff_present", {"delay": 0.6, "backoff": "linear"}),
    ),
    (
        "rule_delay",
        "canonical",
        "delay",
        "1.0",
        "noetl/worker/task_sequence_executor.py",
        _retried("delay_absent", {"backoff": "linear"}),
        _retried("delay_present", {"backoff": "linear", "delay": 0}),
    ),
    (
        "python_libs",
        "canonical",
        "libs",
        "None",
        "noetl/tools/python/executor.py",
        _two(_py(_LIBS_CODE), {"next": [{"step": "after"}]}),
        _two(_py(_LIBS_CODE, libs={"j": "json"}), {"next": [{"step": "after"}]}),
    ),
    (
        "http_data",
        "canonical",
        "data",
        "None",
        "noetl/tools/http/executor.py",
        _two(_http(url="@HTTP@/respond")),
        _two(_http(url="@HTTP@/respond", data={"query": {"body": "d", "status": 202}})),
    ),
    (
        "http_headers_map",
        "canonical",
        "headers",
        "{}",
        "noetl/tools/http/executor.py",
        _two(_http(url="@HTTP@/bearer")),
        _two(_http(url="@HTTP@/bearer", headers={"Authorization": "Bearer k33b"})),
    ),
    (
        "transfer_target_mapping",
        "canonical",
        "mapping",
        "{}",
        "noetl/tools/transfer/executor.py",
        _transfer(
            "diff_k_map_a",
            {"tool": "http", "url": _USERS},
            _pg_target("diff_k_map_a", tool="postgres"),
        ),
        _transfer(
            "diff_k_map_p",
            {"tool": "http", "url": _USERS},
            _pg_target("diff_k_map_p", tool="postgres", mapping=_MAP),
        ),
    ),
    (
        "transfer_source_tool",
        "canonical",
        "tool",
        "source_config.get('kind', source_config.get('type', ''))",
        "noetl/tools/transfer/executor.py",
        _transfer(
            "diff_k_stool_a",
            {"kind": "http", "url": _USERS},
            _pg_target("diff_k_stool_a", tool="postgres", mapping=_MAP),
        ),
        _transfer(
            "diff_k_stool_p",
            {"tool": "http", "url": _USERS},
            _pg_target("diff_k_stool_p", tool="postgres", mapping=_MAP),
        ),
    ),
    (
        "transfer_source_kind",
        "canonical",
        "kind",
        "source_config.get('type', '')",
        "noetl/tools/transfer/executor.py",
        _transfer(
            "diff_k_skind_a",
            {"type": "http", "url": _USERS},
            _pg_target("diff_k_skind_a", tool="postgres", mapping=_MAP),
        ),
        _transfer(
            "diff_k_skind_p",
            {"kind": "http", "url": _USERS},
            _pg_target("diff_k_skind_p", tool="postgres", mapping=_MAP),
        ),
    ),
    (
        "transfer_source_type",
        "canonical",
        "type",
        "''",
        "noetl/tools/transfer/executor.py",
        _transfer(
            "diff_k_stype_a",
            {"url": _USERS},
            _pg_target("diff_k_stype_a", tool="postgres", mapping=_MAP),
        ),
        _transfer(
            "diff_k_stype_p",
            {"type": "http", "url": _USERS},
            _pg_target("diff_k_stype_p", tool="postgres", mapping=_MAP),
        ),
    ),
    (
        "transfer_target_tool",
        "canonical",
        "tool",
        "target_config.get('kind', target_config.get('type', ''))",
        "noetl/tools/transfer/executor.py",
        _transfer(
            "diff_k_ttool_a",
            {"tool": "http", "url": _USERS},
            _pg_target("diff_k_ttool_a", kind="postgres", mapping=_MAP),
        ),
        _transfer(
            "diff_k_ttool_p",
            {"tool": "http", "url": _USERS},
            _pg_target("diff_k_ttool_p", tool="postgres", mapping=_MAP),
        ),
    ),
    (
        "transfer_target_kind",
        "canonical",
        "kind",
        "target_config.get('type', '')",
        "noetl/tools/transfer/executor.py",
        _transfer(
            "diff_k_tkind_a",
            {"tool": "http", "url": _USERS},
            _pg_target("diff_k_tkind_a", type="postgres", mapping=_MAP),
        ),
        _transfer(
            "diff_k_tkind_p",
            {"tool": "http", "url": _USERS},
            _pg_target("diff_k_tkind_p", kind="postgres", mapping=_MAP),
        ),
    ),
)
