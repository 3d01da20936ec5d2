"""Table (a)'s specs for NoETL dc55c492 (case-v2) rows recorded after the first rounds.

The same shape as ``dsl_key_specs.CANONICAL`` (name, engine, key, default, file, playbook with
the key absent, playbook with it present); the builders come from ``dsl_key_specs`` and
``dsl_key_specs_older``. Kept apart so that those modules stay under the size the project keeps.
"""

from __future__ import annotations

from typing import Any

from tests.differential.dsl_key_specs import _MAP, _USERS, _http, _pg_target, _playbook, _py
from tests.differential.dsl_key_specs_older import _c2, _c2_case

_AFTER = {"step": "after", "tool": _py("result = {'after': True}")}
_RAISES = "raise ValueError('boom')"
_PG_SELECT = {"kind": "postgres", "auth": "pg_local", "command": "SELECT 40 + 2 AS n;"}


def _c2_args(tool: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """case-v2: `start` with the tool under test and the step `args` under test (dc55c492's
    worker hands a step's `args` to the http tool as its overrides, `task_with`), then `after`."""
    return _playbook(
        {"step": "start", "args": args, "tool": tool, "next": [{"step": "after"}]}, _AFTER
    )


def _c2_transfer(table: str, **config: Any) -> dict[str, Any]:
    """case-v2: `start` (marked by its `args`) makes `table`, `copy` moves the local API's
    `/users` into it with `config` (its `target` unless `config` names one)."""
    create = f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int, username text);"
    tool = {"kind": "transfer", "source": {"tool": "http", "url": _USERS}}
    tool.update(config)
    return _playbook(
        {
            "step": "start",
            "args": {"m": 1},
            "tool": {"kind": "postgres", "auth": "pg_local", "command": create},
            "next": [{"step": "copy"}],
        },
        {"step": "copy", "tool": tool},
    )


def _c2_retry(**retry: Any) -> dict[str, Any]:
    """case-v2: `start` raises and its `call.error` rule retries it with `retry` (D905:
    dc55c492 re-issues the call while `event.attempt` stays 1, so a bound above 1 never ends)."""
    return _playbook(
        {
            "step": "start",
            "tool": _py(_RAISES),
            "case": [{"when": "{{ event.name == 'call.error' }}", "then": {"retry": retry}}],
        },
        _AFTER,
    )


_DUCK = {"kind": "duckdb", "query": "SELECT 41 + 1 AS n"}
# tests/harness/http_server.py's route answering only `{method, body}`: the request body decides.
_ECHO = "@HTTP@/request-body"


def _c2_duck(**config: Any) -> dict[str, Any]:
    """case-v2: the duckdb tool (dc55c492's worker hands `{**config, **args}` to
    noetl/tools/duckdb as its `task_with`) with `config` beside its query."""
    return _c2({**_DUCK, **config})


def _target(table: str) -> dict[str, Any]:
    return _pg_target(table, tool="postgres", mapping=_MAP)


def _c2_transfer_events(table: str, **source: Any) -> dict[str, Any]:
    """case-v2: `start` makes `table`, `copy` moves the local API's first page of `/events`
    (`{page, has_more, items: [{id, event}]}`) into it with `source` keys beside its url."""
    create = f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int, event text);"
    url = "@HTTP@/events?page=1&pageSize=3"
    mapping = {"id": "id", "event": "event"}
    return _playbook(
        {
            "step": "start",
            "args": {"m": 1},
            "tool": {"kind": "postgres", "auth": "pg_local", "command": create},
            "next": [{"step": "copy"}],
        },
        {
            "step": "copy",
            "tool": {
                "kind": "transfer",
                "source": {"tool": "http", "url": url, **source},
                "target": _pg_target(table, tool="postgres", mapping=mapping),
            },
        },
    )


def _c2_collect(collect: dict[str, Any]) -> dict[str, Any]:
    """case-v2: `start`'s `call.done` rule collects from its result with `collect` (the engine's
    server-side then-action, engine.py 960-1000) and goes on to `after`."""
    then = {"collect": collect, "next": [{"step": "after"}]}
    return _c2_case([{"when": "{{ event.name == 'call.done' }}", "then": then}])


def _c2_sink(table: str, sink: dict[str, Any]) -> dict[str, Any]:
    """case-v2: `start` makes `table`, `fetch`'s `call.done` rule runs `sink` (dc55c492's worker,
    v2_worker_nats.py 1015-1215) and goes on to `read`, which selects the table's rows."""
    create = f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int, email text);"
    then = {"sink": sink, "next": [{"step": "read"}]}
    return _playbook(
        {
            "step": "start",
            "args": {"m": 1},
            "tool": {"kind": "postgres", "auth": "pg_local", "command": create},
            "next": [{"step": "fetch"}],
        },
        {
            "step": "fetch",
            "tool": _py("result = {'id': 3, 'email': 'c@example.test'}"),
            "case": [{"when": "{{ event.name == 'call.done' }}", "then": then}],
        },
        {
            "step": "read",
            "tool": {
                "kind": "postgres",
                "auth": "pg_local",
                "command": f"SELECT id, email FROM {table} ORDER BY id;",
            },
        },
    )


_SINK_DATA = {"id": "{{ result.id }}", "email": "{{ result.email }}"}


def _sink_tool(table: str, **keys: Any) -> dict[str, Any]:
    return {"auth": "pg_local", "table": table, "data": _SINK_DATA, **keys}


# A sink whose data cannot render on dc55c492 (`result.nope` is undefined there, and an attribute of
# an undefined name raises in its plain jinja2 Environment): its worker's error handler runs.
_SINK_BAD_DATA = {"id": "{{ result.id }}", "email": "{{ result.nope.x }}"}


def _pg_auth(**auth: Any) -> dict[str, Any]:
    """A postgres call whose `auth` is a mapping (dc55c492's auth_resolver single-item form:
    `source: credential` with the credential's `key`) plus `auth` keys under test."""
    return {**_PG_SELECT, "auth": {"source": "credential", "key": "pg_local", **auth}}


def _c2_transfer_without(table: str, key: str, target_key: str | None = None) -> dict[str, Any]:
    """`_c2_transfer` into `table` with `key` dropped from the transfer (`source`), or
    `target_key` from its target (`table`, `auth`)."""
    playbook = _c2_transfer(table, target=_target(table))
    tool = playbook["workflow"][1]["tool"]
    if target_key is None:
        del tool[key]
    else:
        del tool[key][target_key]
    return playbook


CASE_V2_MORE: tuple[tuple[str, str, str, str, str, dict, dict], ...] = (
    (
        "c2_http_args_params",
        "case-v2",
        "params",
        "None",
        "noetl/tools/http/executor.py",
        _c2_args(_http(url="@HTTP@/respond", params={"body": "tool"}), {"m": 1}),
        _c2_args(_http(url="@HTTP@/respond", params={"body": "tool"}), {"params": {"body": "arg"}}),
    ),
    (
        "c2_http_args_headers",
        "case-v2",
        "headers",
        "None",
        "noetl/tools/http/executor.py",
        _c2_args(_http(url="@HTTP@/respond", params={"body": "h"}), {"m": 1}),
        _c2_args(_http(url="@HTTP@/respond", params={"body": "h"}), {"headers": {"X-K": "v"}}),
    ),
    (
        "c2_transfer_chunk_size",
        "case-v2",
        "chunk_size",
        "1000",
        "noetl/tools/transfer/executor.py",
        _c2_transfer("diff_k_c2chunk_a", target=_target("diff_k_c2chunk_a")),
        _c2_transfer("diff_k_c2chunk_p", target=_target("diff_k_c2chunk_p"), chunk_size=3),
    ),
    (
        "c2_transfer_mode",
        "case-v2",
        "mode",
        "'append'",
        "noetl/tools/transfer/executor.py",
        _c2_transfer("diff_k_c2mode_a", target=_target("diff_k_c2mode_a")),
        _c2_transfer("diff_k_c2mode_p", target=_target("diff_k_c2mode_p"), mode="replace"),
    ),
    (
        "c2_transfer_target",
        "case-v2",
        "target",
        "{}",
        "noetl/tools/transfer/executor.py",
        _c2_transfer("diff_k_c2tgt_a"),
        _c2_transfer("diff_k_c2tgt_p", target=_target("diff_k_c2tgt_p")),
    ),
    (
        "c2_case_then",
        "case-v2",
        "then",
        "None",
        "noetl/worker/v2_worker_nats.py",
        _c2_case([{"when": "{{ event.name == 'call.done' }}"}]),
        _c2_case(
            [{"when": "{{ event.name == 'call.done' }}", "then": {"next": [{"step": "after"}]}}]
        ),
    ),
    (
        "c2_retry_max_attempts",
        "case-v2",
        "max_attempts",
        "3",
        "noetl/core/dsl/v2/engine.py",
        _c2_retry(delay=0.1),
        _c2_retry(delay=0.1, max_attempts=1),
    ),
    (
        "c2_retry_delay",
        "case-v2",
        "delay",
        "0",
        "noetl/core/dsl/v2/engine.py",
        _c2_retry(max_attempts=2),
        _c2_retry(max_attempts=2, delay=0.2),
    ),
    (
        "c2_retry_backoff",
        "case-v2",
        "backoff",
        "'linear'",
        "noetl/core/dsl/v2/engine.py",
        _c2_retry(max_attempts=2),
        _c2_retry(max_attempts=2, backoff="exponential"),
    ),
    (
        "c2_then_retry",
        "case-v2",
        "retry",
        "None",
        "noetl/core/dsl/v2/engine.py",
        _playbook(
            {
                "step": "start",
                "tool": _py(_RAISES),
                "case": [
                    {
                        "when": "{{ event.name == 'call.error' }}",
                        "then": {"next": [{"step": "after"}]},
                    }
                ],
            },
            _AFTER,
        ),
        _c2_retry(max_attempts=1),
    ),
    (
        "c2_postgres_pool",
        "case-v2",
        "pool",
        "None",
        "noetl/tools/postgres/executor.py",
        _c2(_PG_SELECT),
        _c2({**_PG_SELECT, "pool": {"name": "k33c2"}}),
    ),
    (
        "c2_duckdb_tool_database",
        "case-v2",
        "database",
        "None",
        "noetl/tools/duckdb/config.py",
        _c2_duck(),
        _c2_duck(database="@WORK@/k33c2b.duckdb"),
    ),
    (
        "c2_duckdb_db_type",
        "case-v2",
        "db_type",
        "'postgres'",
        "noetl/tools/duckdb/__init__.py",
        _c2_duck(),
        _c2_duck(db_type="sqlite"),
    ),
    (
        "c2_duckdb_auto_secrets",
        "case-v2",
        "auto_secrets",
        "True",
        "noetl/tools/duckdb/config.py",
        _c2_duck(),
        _c2_duck(auto_secrets=False),
    ),
    (
        "c2_duckdb_require_cloud_output",
        "case-v2",
        "require_cloud_output",
        "None",
        "noetl/tools/duckdb/__init__.py",
        _c2_duck(),
        _c2_duck(require_cloud_output=True),
    ),
    (
        "c2_http_endpoint",
        "case-v2",
        "endpoint",
        "None",
        "noetl/tools/http/executor.py",
        _c2(_http(url="@HTTP@/respond?body=url")),
        _c2(_http(url="@HTTP@/respond?body=url", endpoint="@HTTP@/respond?body=endpoint")),
    ),
    (
        "c2_http_payload",
        "case-v2",
        "payload",
        "{}",
        "noetl/tools/http/executor.py",
        _c2(_http(url=_ECHO, method="POST")),
        _c2(_http(url=_ECHO, method="POST", payload={"a": 1})),
    ),
    (
        "c2_http_args_payload",
        "case-v2",
        "payload",
        "None",
        "noetl/tools/http/executor.py",
        _c2_args(_http(url=_ECHO, method="POST", payload={"a": 1}), {"m": 1}),
        _c2_args(_http(url=_ECHO, method="POST", payload={"a": 1}), {"payload": {"b": 2}}),
    ),
    (
        "c2_transfer_source",
        "case-v2",
        "source",
        "{}",
        "noetl/tools/transfer/executor.py",
        _c2_transfer_without("diff_k_c2src_a", "source"),
        _c2_transfer("diff_k_c2src_p", target=_target("diff_k_c2src_p")),
    ),
    (
        "c2_transfer_target_table",
        "case-v2",
        "table",
        "None",
        "noetl/tools/transfer/executor.py",
        _c2_transfer_without("diff_k_c2ttab_a", "target", "table"),
        _c2_transfer("diff_k_c2ttab_p", target=_target("diff_k_c2ttab_p")),
    ),
    (
        "c2_transfer_target_auth",
        "case-v2",
        "auth",
        "None",
        "noetl/tools/transfer/executor.py",
        _c2_transfer_without("diff_k_c2tauth_a", "target", "auth"),
        _c2_transfer("diff_k_c2tauth_p", target=_target("diff_k_c2tauth_p")),
    ),
    (
        "c2_duckdb_credentials",
        "case-v2",
        "credentials",
        "None",
        "noetl/tools/duckdb/config.py",
        _c2_duck(),
        _c2_duck(credentials={"pg": {"key": "pg_local"}}),
    ),
    (
        "c2_duckdb_gcs_credential",
        "case-v2",
        "gcs_credential",
        "None",
        "noetl/tools/duckdb/__init__.py",
        _c2_duck(),
        _c2_duck(gcs_credential="gcs_k33c2"),
    ),
    (
        "c2_transfer_source_data_path",
        "case-v2",
        "data_path",
        "None",
        "noetl/tools/transfer/executor.py",
        _c2_transfer_events("diff_k_c2dpath_a"),
        _c2_transfer_events("diff_k_c2dpath_p", data_path="items"),
    ),
    *(
        (
            f"c2_then_collect_{key}",
            "case-v2",
            key,
            default,
            "noetl/core/dsl/v2/engine.py",
            _c2_collect(base),
            _c2_collect({**base, key: value}),
        )
        for key, default, base, value in (
            ("strategy", "'append'", {"path": "ok"}, "replace"),
            ("path", "None", {"strategy": "append"}, "ok"),
            ("into", "'_collected_pages'", {"path": "ok"}, "pages"),
        )
    ),
    (
        "c2_sink_tool",
        "case-v2",
        "tool",
        "{}",
        "noetl/worker/v2_worker_nats.py",
        _c2_sink("diff_k_c2sink_a", {"table": "diff_k_c2sink_a", "data": _SINK_DATA}),
        _c2_sink("diff_k_c2sink_p", {"tool": _sink_tool("diff_k_c2sink_p", kind="postgres")}),
    ),
    (
        "c2_sink_tool_kind",
        "case-v2",
        "kind",
        "'unknown'",
        "noetl/worker/v2_worker_nats.py",
        _c2_sink("diff_k_c2skind_a", {"tool": _sink_tool("diff_k_c2skind_a", type="postgres")}),
        _c2_sink("diff_k_c2skind_p", {"tool": _sink_tool("diff_k_c2skind_p", kind="postgres")}),
    ),
    (
        "c2_sink_error_tool",
        "case-v2",
        "tool",
        "'unknown'",
        "noetl/worker/v2_worker_nats.py",
        _c2_sink("diff_k_c2serr_a", {"table": "diff_k_c2serr_a", "data": _SINK_BAD_DATA}),
        _c2_sink("diff_k_c2serr_p", {"tool": "postgress", **_sink_tool("diff_k_c2serr_p")}),
    ),
    (
        "c2_sink_tool_text",
        "case-v2",
        "tool",
        "{}",
        "noetl/worker/v2_worker_nats.py",
        _c2_sink("diff_k_c2stxt_a", {"table": "diff_k_c2stxt_a", "data": _SINK_DATA}),
        _c2_sink("diff_k_c2stxt_p", {"tool": "postgres", **_sink_tool("diff_k_c2stxt_p")}),
    ),
    (
        "c2_sink_error_tool_shape",
        "case-v2",
        "tool",
        "None",
        "noetl/worker/v2_worker_nats.py",
        _c2_sink(
            "diff_k_c2sshp_a",
            {"tool": {**_sink_tool("diff_k_c2sshp_a", kind="postgres"), "data": _SINK_BAD_DATA}},
        ),
        _c2_sink("diff_k_c2sshp_p", {"tool": ["postgres"], **_sink_tool("diff_k_c2sshp_p")}),
    ),
    (
        "c2_auth_spec_tool",
        "case-v2",
        "tool",
        "None",
        "noetl/worker/auth_resolver.py",
        _c2(_pg_auth()),
        _c2(_pg_auth(tool="postgres")),
    ),
    (
        "c2_auth_spec_tool_other",
        "case-v2",
        "tool",
        "None",
        "noetl/worker/auth_resolver.py",
        _c2(_pg_auth(type="postgres")),
        _c2(_pg_auth(tool="duckdb")),
    ),
)
