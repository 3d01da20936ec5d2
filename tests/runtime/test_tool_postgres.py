"""``kind: postgres`` against a real PostgreSQL 15 cluster (tests/harness/postgres.py)."""

from __future__ import annotations

import base64
import multiprocessing
import re
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest
import yaml

from airflow_plugin.hooks import postgres as pg_hook
from airflow_plugin.tools import ToolCall, get_tool
from airflow_plugin.tools import postgres as pg
from noetl_compile.engine_profiles import CASE_V2
from tests.corpus import CORPUS
from tests.harness.postgres import CORPUS_POSTGRES_CONNECTIONS, airflow_conn_env


def _duplicate_key(table: str) -> str:
    """PostgreSQL's message for a second row with id 1 in ``table`` (primary key ``id``)."""
    return (
        f'duplicate key value violates unique constraint "{table}_pkey"'
        "\nDETAIL:  Key (id)=(1) already exists."
    )


def run(config: dict[str, Any], **call: Any):
    return pg.run_postgres(
        ToolCall(step="s", task="s", config={"kind": "postgres", **config}, **call)
    )


def sql(dsn: str, text: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(text, params)
        return cur.fetchall() if cur.description else []


@pytest.fixture
def table(pg_test_dsn: str) -> str:
    """A fresh table name (tests share one database)."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    yield name
    sql(pg_test_dsn, f'DROP TABLE IF EXISTS "{name}"')


# --------------------------------------------------------------------------------------------
# Harness
# --------------------------------------------------------------------------------------------


def test_every_corpus_connection_name_points_at_the_test_database(pg_connections, pg_test_dsn):
    import os

    assert set(pg_connections) == set(CORPUS_POSTGRES_CONNECTIONS)
    for name in pg_connections:
        assert os.environ[airflow_conn_env(name)] == pg_test_dsn
        out = run({"auth": name, "query": "SELECT current_database() AS db"})
        assert out.data["rows"] == [{"db": "noetl_test"}]


def _postgres_auth_names() -> set[str]:
    """Connection names of postgres tools, sinks and transfer ends in the corpus."""
    names: set[str] = set()

    def kind_of(node: dict) -> str | None:
        for key in ("kind", "type", "tool", "storage", "backend"):
            value = node.get(key)
            if isinstance(value, str):
                return value.strip().lower()
            if isinstance(value, dict):
                inner = kind_of(value)
                if inner:
                    return inner
        return None

    def auth_names(auth: Any):
        if isinstance(auth, str):
            yield auth
        elif isinstance(auth, dict):
            for key in ("name", "credential", "key", "conn_id", "connection"):
                if isinstance(auth.get(key), str):
                    yield auth[key]

    def resolve(value: str, workload: dict) -> str | None:
        match = re.fullmatch(r"\s*\{\{\s*(?:workload\.|ctx\.)?(\w+)\s*\}\}\s*", value)
        if match:
            default = workload.get(match.group(1))
            return default if isinstance(default, str) and "{{" not in default else None
        return None if "{{" in value else value

    def walk(node: Any, workload: dict) -> None:
        if isinstance(node, dict):
            if kind_of(node) == "postgres":
                for auth in (
                    node.get("auth"),
                    (node.get("tool") or {}).get("auth")
                    if isinstance(node.get("tool"), dict)
                    else None,
                ):
                    for value in auth_names(auth):
                        resolved = resolve(value, workload)
                        if resolved:
                            names.add(resolved)
            for value in node.values():
                walk(value, workload)
        elif isinstance(node, list):
            for value in node:
                walk(value, workload)

    for path in sorted(CORPUS.rglob("*.yaml")):
        try:
            documents = list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))
        except yaml.YAMLError:
            continue  # the corpus has a few broken files on purpose
        for document in documents:
            if isinstance(document, dict):
                workload = (
                    document.get("workload") if isinstance(document.get("workload"), dict) else {}
                )
                walk(document, workload)
    return names


@pytest.mark.corpus
def test_harness_covers_every_postgres_connection_name_of_the_corpus():
    found = _postgres_auth_names()
    assert {"pg_local", "pg_k8s"} <= found
    assert found <= set(CORPUS_POSTGRES_CONNECTIONS), found - set(CORPUS_POSTGRES_CONNECTIONS)


def test_cluster_stop_start_keeps_port_and_data(pg_cluster, pg_test_dsn, table):
    sql(pg_test_dsn, f'CREATE TABLE "{table}" (i int); INSERT INTO "{table}" VALUES (1)')
    port = pg_cluster.port
    pg_cluster.stop()
    try:
        assert not pg_cluster.running
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(pg_test_dsn, connect_timeout=2)
    finally:
        pg_cluster.start()
    assert pg_cluster.port == port
    assert sql(pg_test_dsn, f'SELECT i FROM "{table}"') == [(1,)]


# --------------------------------------------------------------------------------------------
# SQL and results
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alias", ["query", "queries", "command", "commands", "cmd", "cmds"])
def test_every_inline_alias_runs(pg_connections, alias):
    out = run({"auth": "pg_local", alias: ["SELECT 1 AS a;", "SELECT 2 AS b"]})
    assert out.ok, out.error
    assert out.data == {
        "status": "success",
        "rows": [{"b": 2}],
        "row_count": 1,
        "columns": ["b"],
        "statement_count": 2,
    }


@pytest.mark.parametrize("alias", ["command_b64", "commands_b64", "query_b64"])
def test_every_base64_alias_runs_rendered_with_step_input(pg_connections, alias):
    encoded = base64.b64encode(b"SELECT {{ n }} + 1 AS v").decode()
    out = run({"auth": "pg_k8s", alias: encoded}, step_input={"n": 41})
    assert out.data["rows"] == [{"v": 42}]


def test_script_file_runs(pg_connections, tmp_path):
    path = tmp_path / "setup.sql"
    path.write_text("-- setup\nSELECT 'from a file' AS src;\n")
    out = run({"auth": "pg_local", "script": {"uri": str(path), "source": {"type": "file"}}})
    assert out.data["rows"] == [{"src": "from a file"}]


def test_dml_without_returning_gives_row_count(pg_connections, pg_test_dsn, table):
    out = run(
        {
            "auth": "pg_local",
            "command": f'CREATE TABLE "{table}" (id int primary key, v text);'
            f"INSERT INTO \"{table}\" VALUES (1, 'a'), (2, 'b'), (3, 'c');"
            f"UPDATE \"{table}\" SET v = 'z' WHERE id > 1",
        }
    )
    # NoETL's shape for a last statement without a result set (recorded at 138c10ed).
    assert out.data == {
        "status": "success",
        "row_count": 2,
        "message": "Command executed. 2 rows affected.",
        "statement_count": 3,
    }
    out = run({"auth": "pg_local", "query": f'DELETE FROM "{table}" WHERE id = 1 RETURNING v'})
    assert out.data["rows"] == [{"v": "a"}] and out.data["row_count"] == 1


def test_ddl_row_count_is_minus_one_as_noetl_reports_it(pg_connections, table):
    out = run({"auth": "pg_local", "command": f'CREATE TABLE "{table}" (i int)'})
    assert out.data["row_count"] == -1 and "rows" not in out.data
    assert out.data["message"] == "Command executed. -1 rows affected."


def test_statements_share_one_transaction_and_roll_back(pg_connections, pg_test_dsn, table):
    sql(pg_test_dsn, f'CREATE TABLE "{table}" (id int primary key)')
    out = run(
        {
            "auth": "pg_local",
            "commands": f'INSERT INTO "{table}" VALUES (1); INSERT INTO "{table}" VALUES (2);'
            f'INSERT INTO "{table}" VALUES (1); INSERT INTO "{table}" VALUES (3)',
        }
    )
    assert not out.ok
    assert out.error["type"] == "UniqueViolation"
    assert out.error["code"] == "23505"
    assert out.error["retryable"] is False
    assert out.error["statement_index"] == 2
    assert out.error["detail"] == "Key (id)=(1) already exists."
    assert out.meta == {"pg": {"code": "23505", "sqlstate": "23505"}}
    assert sql(pg_test_dsn, f'SELECT count(*) FROM "{table}"') == [(0,)]  # nothing written
    # the step result is NoETL's document for a failed statement (138c10ed,
    # tests/differential/cases/tools_postgres/pg_failure_after_insert.yaml)
    message = _duplicate_key(table)
    assert out.reported == {
        "id": out.reported["id"],
        "status": "error",
        "error": f"command_2: {message};",
        "data": {
            "status": "error",
            "message": f"statement_2: {message}",
            "statement_count": 4,
            "errors": [{"statement_index": 2, "message": message}],
        },
    }
    # the pooled connection is clean for the next call
    assert run({"auth": "pg_local", "query": f'INSERT INTO "{table}" VALUES (9)'}).ok
    assert sql(pg_test_dsn, f'SELECT id FROM "{table}"') == [(9,)]


def test_case_v2_result_has_one_entry_per_statement(pg_connections, pg_test_dsn, table):
    # dc55c492's shape (tests/differential/cases/tools_case_v2/v2_pg_insert_rows.yaml): each
    # statement keyed command_N; the canonical result of the same call stays collapsed.
    commands = (
        f'CREATE TABLE "{table}" (id int, name text); '
        f"INSERT INTO \"{table}\" VALUES (1, 'a'), (2, 'b'); "
        f'SELECT id, name FROM "{table}" ORDER BY id'
    )
    out = run({"auth": "pg_local", "command": commands}, profile=CASE_V2)
    assert out.ok
    assert out.data == {
        "command_0": {
            "status": "success",
            "row_count": -1,
            "message": "Command executed. -1 rows affected.",
        },
        "command_1": {
            "status": "success",
            "row_count": 2,
            "message": "Command executed. 2 rows affected.",
        },
        "command_2": {
            "status": "success",
            "rows": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
            "row_count": 2,
            "columns": ["id", "name"],
        },
    }
    again = run({"auth": "pg_local", "query": f'SELECT count(*) AS n FROM "{table}"'})
    assert again.data["rows"] == [{"n": 2}] and again.data["statement_count"] == 1


def test_case_v2_failure_reports_the_failed_statement_and_rolls_back(
    pg_connections, pg_test_dsn, table
):
    sql(pg_test_dsn, f'CREATE TABLE "{table}" (id int primary key)')
    out = run(
        {
            "auth": "pg_local",
            "commands": f'INSERT INTO "{table}" VALUES (1); INSERT INTO "{table}" VALUES (1);'
            f'INSERT INTO "{table}" VALUES (3)',
        },
        profile=CASE_V2,
    )
    assert not out.ok
    assert out.error["type"] == "UniqueViolation" and out.error["statement_index"] == 1
    message = _duplicate_key(table)
    # dc55c492's document (v2_pg_error_case_route.yaml); only the failed statement's entry,
    # since the call rolled back and nothing after it ran
    assert out.reported == {
        "id": out.reported["id"],
        "status": "error",
        "error": f"command_1: {message};",
        "data": {"command_1": {"status": "error", "message": message}},
    }
    assert sql(pg_test_dsn, f'SELECT count(*) FROM "{table}"') == [(0,)]


def test_a_single_statement_is_all_or_nothing_and_leaves_no_transaction(
    pg_connections, pg_test_dsn, table
):
    # one plain statement runs in PostgreSQL's implicit transaction (one round trip): a failure
    # half-way through its rows writes none of them, a success is committed and visible at once
    sql(pg_test_dsn, f'CREATE TABLE "{table}" (id int primary key)')
    out = run(
        {
            "auth": "pg_local",
            "command": f'INSERT INTO "{table}" SELECT 10 / (3 - g) FROM generate_series(1, 5) g',
        }
    )
    assert not out.ok and out.error["code"] == "22012"  # division by zero at the third row
    assert sql(pg_test_dsn, f'SELECT count(*) FROM "{table}"') == [(0,)]
    out = run({"auth": "pg_local", "command": f'INSERT INTO "{table}" VALUES (1), (2)'})
    assert out.ok and out.data["row_count"] == 2 and "transaction" not in out.data
    assert sql(pg_test_dsn, f'SELECT id FROM "{table}" ORDER BY id') == [(1,), (2,)]
    # the pooled connection went back idle and out of autocommit: the next call is a transaction
    target = pg_hook.resolve_target({"auth": "pg_local"})
    with pg_hook.connect(target) as conn:
        assert conn.autocommit is False
        assert conn.info.transaction_status.name == "IDLE"


def test_syntax_error(pg_connections):
    out = run({"auth": "pg_local", "query": "SELECT 1; SELEC 2"})
    assert out.error["type"] == "SyntaxError"
    assert out.error["code"] == "42601"
    assert out.error["retryable"] is False
    assert out.error["statement_index"] == 1
    assert 'syntax error at or near "SELEC"' in out.error["message"]


def test_undefined_table_error(pg_connections):
    out = run({"auth": "pg_local", "query": "SELECT * FROM no_such_table"})
    assert (out.error["type"], out.error["code"]) == ("UndefinedTable", "42P01")


def test_json_safe_types_round_trip(pg_connections, pg_test_dsn, table):
    sql(
        pg_test_dsn,
        f'CREATE TABLE "{table}" (n numeric, i numeric, ts timestamptz, d date, iv interval, '
        "u uuid, b bytea, j jsonb, a int[], ta text[], r int4range, inf timestamptz, f float8)",
    )
    out = run(
        {
            "auth": "pg_local",
            "command": f"SET TIME ZONE 'UTC'; INSERT INTO \"{table}\" VALUES (12.30, 7, "
            "'2024-01-02 03:04:05+02', '2024-02-29', '1 day 02:03:04.5', "
            "'12345678-1234-5678-1234-567812345678', '\\xdeadbeef', "
            "'{\"k\": [1, {\"x\": null}]}', '{1,2,3}', '{a,\"b c\"}', '[1,5)', 'infinity', "
            f"'NaN'); SELECT * FROM \"{table}\"",
        }
    )
    assert out.ok, out.error
    assert out.data["rows"] == [
        {
            "n": 12.3,
            "i": 7,
            "ts": "2024-01-02T01:04:05+00:00",
            "d": "2024-02-29",
            "iv": "1 days 02:03:04.5",
            "u": "12345678-1234-5678-1234-567812345678",
            "b": "\\xdeadbeef",
            "j": {"k": [1, {"x": None}]},
            "a": [1, 2, 3],
            "ta": ["a", "b c"],
            "r": "[1,5)",
            "inf": "infinity",
            "f": "NaN",
        }
    ]
    # the text forms are PostgreSQL input: written back, they give the same values
    row = out.data["rows"][0]
    back = sql(
        pg_test_dsn,
        "SELECT %s::interval = '1 day 02:03:04.5'::interval, %s::bytea = '\\xdeadbeef'::bytea, "
        "%s::int4range = '[1,5)'::int4range, %s::timestamptz = '2024-01-02 03:04:05+02'",
        [row["iv"], row["b"], row["r"], row["ts"]],
    )
    assert back == [(True, True, True, True)]


def test_result_is_capped_and_says_so(pg_connections, monkeypatch):
    monkeypatch.setenv("NOETL_POSTGRES_MAX_RESULT_ROWS", "5")
    out = run({"auth": "pg_local", "query": "SELECT g FROM generate_series(1, 20) g"})
    assert out.data["row_count"] == 5
    assert out.data["truncated"] is True
    assert out.data["truncation"]["reason"] == "max_rows"


def test_statements_refused_in_a_transaction_run_in_autocommit(pg_connections, pg_cluster):
    name = f"db_{uuid.uuid4().hex[:8]}"
    out = run({"auth": "pg_local", "command": f"CREATE DATABASE {name}; SELECT 1 AS ok"})
    assert out.ok, out.error
    assert out.data["transaction"] == "autocommit"
    assert sql(pg_cluster.dsn(), "SELECT 1 FROM pg_database WHERE datname = %s", [name]) == [(1,)]
    assert run({"auth": "pg_local", "command": f"DROP DATABASE {name}"}).ok


def test_a_refused_statement_behind_a_comment_still_runs_in_autocommit(pg_connections):
    # the statement does not start with its keyword: classified through the tokenizer
    out = run({"auth": "pg_local", "command": "/* nightly */ VACUUM; SELECT 1 AS ok"})
    assert out.ok, out.error
    assert out.data["transaction"] == "autocommit"
    assert out.data["rows"] == [{"ok": 1}]


def test_comment_only_sql_runs_nothing(pg_connections):
    out = run({"auth": "pg_local", "query": "-- nothing\n"})
    assert out.data == {
        "status": "success",
        "rows": [],
        "row_count": 0,
        "columns": [],
        "statement_count": 0,
    }


def test_registry_resolves_the_kind(pg_connections):
    out = get_tool("postgres")(
        ToolCall(step="s", task="s", config={"auth": "pg_local", "query": "SELECT 1 AS one"})
    )
    assert out.data["rows"] == [{"one": 1}]


# --------------------------------------------------------------------------------------------
# Auth
# --------------------------------------------------------------------------------------------


def test_missing_auth_is_a_config_error():
    out = run({"query": "SELECT 1"})
    assert out.error["type"] == "ConfigError"
    assert "needs `auth`" in out.error["message"]
    assert out.error["retryable"] is False


def test_auth_from_the_step_input_and_nested_forms(pg_connections):
    assert run({"query": "SELECT 1"}, step_input={"auth": "pg_local"}).ok
    assert run({"auth": {"type": "postgres", "credential": "pg_k8s"}, "query": "SELECT 1"}).ok
    assert run(
        {
            "auth": {"source": "credential", "tool": "postgres", "key": "pg_local"},
            "query": "SELECT 1",
        }
    ).ok


def test_unknown_connection(monkeypatch):
    monkeypatch.delenv(airflow_conn_env("no_such_conn"), raising=False)
    out = run({"auth": "no_such_conn", "query": "SELECT 1"})
    assert out.error["type"] == "ConnectionNotFound"
    assert "AIRFLOW_CONN_NO_SUCH_CONN" in out.error["message"]


@pytest.mark.parametrize(
    "key", ["db_host", "db_port", "db_user", "db_password", "db_name", "db_conn_string"]
)
def test_inline_connection_fields_are_refused(pg_connections, key):
    out = run({"auth": "pg_local", key: "x", "query": "SELECT 1"})
    assert out.error["type"] == "ConfigError"
    assert key in out.error["message"]
    out = run({"auth": "pg_local", "query": "SELECT 1"}, step_input={key: "x"})
    assert out.error["type"] == "ConfigError"


def test_extras_reach_libpq_and_hook_options_do_not(pg_cluster, pg_test_dsn, monkeypatch):
    monkeypatch.setenv(
        airflow_conn_env("pg_extras"),
        f"{pg_test_dsn}?sslmode=disable&application_name=from_extra&cursor=realdictcursor",
    )
    out = run({"auth": "pg_extras", "query": "SELECT current_setting('application_name') AS a"})
    assert out.data["rows"] == [{"a": "from_extra"}]


def test_password_never_appears(pg_cluster, monkeypatch, caplog):
    password = "S3cret-Pa55word-xyz"
    # nothing listens on port 1: the connection fails
    monkeypatch.setenv(
        airflow_conn_env("pg_secret"), f"postgresql://someone:{password}@127.0.0.1:1/db"
    )
    started = time.monotonic()
    out = run({"auth": "pg_secret", "query": "SELECT 1"})
    assert time.monotonic() - started < 5
    assert not out.ok and out.error["retryable"] is True
    assert out.error["type"] == "OperationalError"
    assert password not in repr(out)
    assert password not in caplog.text
    target = pg_hook.resolve_target({"auth": "pg_secret"})
    assert password not in repr(target)
    assert target.scrub(f"oops {password}") == "oops ***"


# --------------------------------------------------------------------------------------------
# Pools and a server that goes away
# --------------------------------------------------------------------------------------------


def test_one_pool_per_connection_and_process(pg_connections):
    pg_hook.close_pools()
    for _ in range(5):
        assert run({"auth": "pg_local", "query": "SELECT 1"}).ok
    target = pg_hook.resolve_target({"auth": "pg_local"})
    stats = pg_hook.pool_stats(target)
    assert stats is not None
    assert stats["connections_num"] == 1  # one connection made, reused four times
    assert stats["requests_num"] == 5


def _child_run(queue) -> None:
    out = run({"auth": "pg_local", "query": "SELECT pg_backend_pid() AS pid"})
    target = pg_hook.resolve_target({"auth": "pg_local"})
    queue.put((out.data["rows"][0]["pid"], pg_hook.pool_stats(target)["connections_num"]))


def test_a_forked_process_gets_its_own_pool(pg_connections):
    parent = run({"auth": "pg_local", "query": "SELECT pg_backend_pid() AS pid"}).data
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_run, args=(queue,))
    child.start()
    child_pid, child_connections = queue.get(timeout=30)
    child.join(30)
    assert child.exitcode == 0
    assert child_connections == 1
    assert child_pid != parent["rows"][0]["pid"]  # never the parent's socket
    assert run({"auth": "pg_local", "query": "SELECT 1"}).ok  # the parent's pool still works


def test_server_stopped_mid_run_then_restarted(pg_cluster, pg_connections, pg_test_dsn):
    assert run({"auth": "pg_local", "query": "SELECT 1"}).ok  # a pooled connection exists
    outcome: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: outcome.update(out=run({"auth": "pg_local", "query": "SELECT pg_sleep(30)"}))
    )
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while not sql(
            pg_test_dsn, "SELECT 1 FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'"
        ):
            assert time.monotonic() < deadline, "the query never started"
            time.sleep(0.05)
        pg_cluster.stop()
        worker.join(15)
        out = outcome["out"]
        assert not out.ok
        assert out.error["retryable"] is True
        assert out.error["code"] in ("57P01", None)  # admin shutdown, or the socket closing
        assert out.meta["pg"]["sqlstate"] == out.error["code"]

        started = time.monotonic()
        down = run({"auth": "pg_local", "query": "SELECT 1"})
        assert time.monotonic() - started < 5  # refused at once, not after the pool timeout
        assert not down.ok and down.error["retryable"] is True
        assert down.error["type"] == "OperationalError"
    finally:
        pg_cluster.start()
    up = run({"auth": "pg_local", "query": "SELECT 2 AS two"})
    assert up.ok, up.error
    assert up.data["rows"] == [{"two": 2}]


def test_restart_between_calls_is_invisible(pg_cluster, pg_connections):
    assert run({"auth": "pg_local", "query": "SELECT 1"}).ok
    pg_cluster.stop()
    pg_cluster.start()
    out = run({"auth": "pg_local", "query": "SELECT 1 AS one"})  # the pool checks connections
    assert out.ok, out.error
