"""``kind: transfer`` against a real PostgreSQL cluster and DuckDB files: chunks, modes,
mappings, failures (the ``sink`` writer is in test_tool_sink.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_plugin.tools import ToolCall, ToolNotAvailable, get_tool
from airflow_plugin.tools.transfer import run_transfer
from tests.runtime.db_support import duck, pg


def transfer(**config: Any):
    return run_transfer(ToolCall(step="t", task="t", config={"kind": "transfer", **config}))


@pytest.fixture
def source_2500(pg_test_dsn: str, name) -> str:
    table = name("src")
    pg(
        pg_test_dsn,
        f"CREATE TABLE {table} AS SELECT g AS id, 'name ' || g AS name, "
        "(g * 1.5)::numeric(10, 2) AS amount, jsonb_build_object('g', g, 'tags', jsonb_build_array('a')) "
        "AS meta, timestamptz '2024-01-01 00:00:00+00' + g * interval '1 minute' AS created "
        "FROM generate_series(1, 2500) g",
    )
    return table


# --------------------------------------------------------------------------------------------
# transfer
# --------------------------------------------------------------------------------------------


def test_postgres_to_postgres_append_in_chunks(pg_connections, pg_test_dsn, source_2500, name):
    target = name("tgt")
    pg(
        pg_test_dsn,
        f"CREATE TABLE {target} (id int PRIMARY KEY, name text, amount numeric(10, 2), "
        "meta jsonb, created timestamptz)",
    )
    out = transfer(
        source={
            "type": "postgres",
            "auth": "pg_local",
            "query": f"SELECT * FROM {source_2500} ORDER BY id",
        },
        target={"type": "postgres", "auth": "pg_k8s", "table": f"public.{target}"},
        chunk_size=1000,
    )
    assert out.ok, out.error
    # NoETL's transfer result (recorded at 138c10ed, tests/differential/cases/tools_transfer)
    assert out.data == {
        "direction": "postgres_to_postgres",
        "source_type": "postgres",
        "target_type": "postgres",
        "mode": "append",
        "status": "success",
        "rows_transferred": 2500,
        "chunks_processed": 3,
        "target_table": f"public.{target}",
        "columns": ["id", "name", "amount", "meta", "created"],
    }
    assert pg(
        pg_test_dsn,
        f"SELECT count(*), sum(amount), count(*) FILTER (WHERE meta = jsonb_build_object('g', id, "
        f"'tags', jsonb_build_array('a'))) FROM {target}",
    ) == [(2500, pg(pg_test_dsn, f"SELECT sum(amount) FROM {source_2500}")[0][0], 2500)]
    # append again: a key collision fails the whole call, nothing of it is written
    again = transfer(
        source={
            "kind": "postgres",
            "auth": "pg_local",
            "query": f"SELECT * FROM {source_2500} WHERE id > 2400",
        },
        target={"kind": "postgres", "auth": "pg_local", "table": target},
        mode="insert",
    )
    assert again.error["code"] == "23505" and again.error["side"] == "target"
    assert pg(pg_test_dsn, f"SELECT count(*) FROM {target}") == [(2500,)]


def test_postgres_to_duckdb_replace(pg_connections, source_2500, tmp_path):
    db = tmp_path / "warehouse.duckdb"
    duck(
        db,
        "CREATE TABLE sales (id INTEGER, name VARCHAR, amount DECIMAL(10, 2), meta JSON, created TIMESTAMPTZ)",
    )
    duck(db, "INSERT INTO sales VALUES (-1, 'stale', 0, NULL, NULL)")
    out = transfer(
        source={"tool": "postgres", "auth": "pg_local", "query": f"SELECT * FROM {source_2500}"},
        target={"tool": "duckdb", "database": str(db), "table": "sales"},
        chunk_size=1000,
        mode="replace",
    )
    assert out.ok, out.error
    assert (out.data["rows_transferred"], out.data["chunks_processed"], out.data["mode"]) == (
        2500,
        3,
        "replace",
    )
    assert duck(db, "SELECT count(*), min(id), sum(amount) FROM sales") == [
        (2500, 1, pytest.approx(2500 * 2501 / 2 * 1.5))
    ]
    meta, created = duck(db, "SELECT meta, created::VARCHAR FROM sales WHERE id = 7")[0]
    assert json.loads(meta) == {"g": 7, "tags": ["a"]}
    assert created == "2024-01-01 00:07:00+00"


def test_duckdb_to_postgres_upsert(pg_connections, pg_test_dsn, name, tmp_path):
    db = tmp_path / "src.duckdb"
    duck(db, "CREATE TABLE people AS SELECT i AS id, 'new ' || i AS label FROM range(1, 2501) t(i)")
    target = name("people")
    pg(
        pg_test_dsn,
        f"CREATE TABLE {target} (id int PRIMARY KEY, label text, note text DEFAULT 'kept')",
    )
    pg(
        pg_test_dsn,
        f"INSERT INTO {target} (id, label) SELECT g, 'old' FROM generate_series(1, 100) g",
    )
    out = transfer(
        source={
            "type": "duckdb",
            "database": str(db),
            "query": "SELECT id, label FROM people ORDER BY id",
        },
        target={"type": "postgres", "auth": "pg_local", "table": target, "key": "id"},
        chunk_size=1000,
        mode="upsert",
    )
    assert out.ok, out.error
    assert (out.data["rows_transferred"], out.data["chunks_processed"]) == (2500, 3)
    assert pg(
        pg_test_dsn,
        f"SELECT count(*), count(*) FILTER (WHERE label LIKE 'new %'), min(note) FROM {target}",
    ) == [(2500, 2500, "kept")]


def test_duckdb_to_duckdb_creates_the_target(tmp_path):
    db = tmp_path / "one.duckdb"
    duck(db, "CREATE TABLE a AS SELECT i AS id, i * 2 AS twice, now() AS at FROM range(0, 10) t(i)")
    out = transfer(
        source={"kind": "duckdb", "database": str(db), "query": "SELECT * FROM a"},
        target={"kind": "duckdb", "database": str(db), "table": "b"},
        chunk_size=4,
    )
    assert out.ok, out.error
    assert (out.data["rows_transferred"], out.data["chunks_processed"]) == (10, 3)
    assert duck(db, "SELECT count(*), sum(twice) FROM b") == [(10, 90)]
    assert duck(
        db,
        "SELECT data_type FROM information_schema.columns WHERE table_name = 'b' AND column_name = 'at'",
    ) == [("TIMESTAMP WITH TIME ZONE",)]


def test_custom_target_query_and_mapping(pg_connections, pg_test_dsn, name, tmp_path):
    source = name("s")
    target = name("d")
    pg(
        pg_test_dsn,
        f"CREATE TABLE {source} AS SELECT g AS id, 'n' || g AS name, jsonb_build_object('city', 'c' || g) AS addr FROM generate_series(1, 50) g",
    )
    pg(pg_test_dsn, f"CREATE TABLE {target} (ident int PRIMARY KEY, label text, city text)")
    out = transfer(
        source={"type": "postgres", "auth": "pg_local", "query": f"SELECT * FROM {source}"},
        target={
            "type": "postgres",
            "auth": "pg_local",
            "table": target,
            "mapping": {"ident": "id", "label": "name", "city": "addr.city"},
        },
        chunk_size=20,
    )
    assert out.ok, out.error
    assert (out.data["chunks_processed"], out.data["columns"]) == (3, ["ident", "label", "city"])
    assert pg(pg_test_dsn, f"SELECT label, city FROM {target} WHERE ident = 7") == [("n7", "c7")]
    # NoETL's custom target query: %s markers in source column order, run per row
    out = transfer(
        source={
            "type": "postgres",
            "auth": "pg_local",
            "query": f"SELECT id, 'x' || id FROM {source}",
        },
        target={
            "type": "postgres",
            "auth": "pg_local",
            "query": f"INSERT INTO {target} (ident, label) VALUES (%s, %s) "
            "ON CONFLICT (ident) DO UPDATE SET label = EXCLUDED.label",
        },
    )
    assert out.ok, out.error
    assert out.data["mode"] == "custom"
    assert pg(pg_test_dsn, f"SELECT label, city FROM {target} WHERE ident = 7") == [("x7", "c7")]
    # the same into DuckDB, where the markers become ?; a jsonb value arrives as JSON text
    db = tmp_path / "q.duckdb"
    duck(db, "CREATE TABLE d (ident INTEGER, label VARCHAR, addr JSON)")
    out = transfer(
        source={
            "type": "postgres",
            "auth": "pg_local",
            "query": f"SELECT id, name, addr FROM {source}",
        },
        target={
            "type": "duckdb",
            "database": str(db),
            "query": "INSERT INTO d VALUES (%s, %s, %s)",
        },
    )
    assert out.ok, out.error
    assert duck(db, "SELECT count(*), max(addr->>'city') FROM d") == [(50, "c9")]


def test_http_source_with_mapping(pg_connections, pg_test_dsn, name, http_server):
    target = name("posts")
    pg(
        pg_test_dsn,
        f"CREATE TABLE {target} (user_id int, post_id int PRIMARY KEY, title text, body text)",
    )
    out = transfer(
        source={"type": "http", "url": f"{http_server}/posts", "method": "GET"},
        target={
            "type": "postgres",
            "auth": {"source": "credential", "key": "pg_local"},
            "table": f"public.{target}",
            "mapping": {"user_id": "userId", "post_id": "id", "title": "title", "body": "body"},
        },
        chunk_size=30,
    )
    assert out.ok, out.error
    assert out.data["records_fetched"] == 100
    assert (out.data["rows_transferred"], out.data["chunks_processed"]) == (100, 4)
    assert pg(pg_test_dsn, f"SELECT count(*), count(DISTINCT user_id) FROM {target}") == [(100, 10)]


@pytest.mark.parametrize(("status", "retryable"), [(404, False), (503, True)])
def test_http_source_errors(pg_connections, name, http_server, status, retryable):
    out = transfer(
        source={"type": "http", "url": f"{http_server}/status/{status}"},
        target={"type": "postgres", "auth": "pg_local", "table": name("never")},
    )
    assert out.error["side"] == "source"
    assert out.error["code"] == f"HTTP_{status}"
    assert out.error["retryable"] is retryable


def test_failure_in_a_later_chunk_writes_nothing(pg_connections, pg_test_dsn, name):
    source = name("s")
    target = name("d")
    pg(
        pg_test_dsn,
        f"CREATE TABLE {source} AS SELECT g AS id, CASE WHEN g = 1500 THEN NULL ELSE 'v' END AS v FROM generate_series(1, 2500) g",
    )
    pg(pg_test_dsn, f"CREATE TABLE {target} (id int, v text NOT NULL)")
    out = transfer(
        source={
            "type": "postgres",
            "auth": "pg_local",
            "query": f"SELECT * FROM {source} ORDER BY id",
        },
        target={"type": "postgres", "auth": "pg_local", "table": target},
        chunk_size=1000,
    )
    assert (out.error["type"], out.error["code"], out.error["side"]) == (
        "NotNullViolation",
        "23502",
        "target",
    )
    assert pg(pg_test_dsn, f"SELECT count(*) FROM {target}") == [(0,)]


def test_source_error_keeps_the_target(pg_connections, pg_test_dsn, name):
    target = name("d")
    pg(pg_test_dsn, f"CREATE TABLE {target} (id int)")
    pg(pg_test_dsn, f"INSERT INTO {target} VALUES (1), (2)")
    out = transfer(
        source={"type": "postgres", "auth": "pg_local", "query": "SELECT * FROM no_such_table"},
        target={"type": "postgres", "auth": "pg_local", "table": target},
        mode="replace",
    )
    assert (out.error["type"], out.error["code"], out.error["side"]) == (
        "UndefinedTable",
        "42P01",
        "source",
    )
    assert out.meta == {"pg": {"code": "42P01", "sqlstate": "42P01"}}
    assert pg(pg_test_dsn, f"SELECT count(*) FROM {target}") == [(2,)]


def test_replace_with_an_empty_source_empties_the_target(pg_connections, pg_test_dsn, name):
    target = name("d")
    pg(pg_test_dsn, f"CREATE TABLE {target} (id int)")
    pg(pg_test_dsn, f"INSERT INTO {target} VALUES (1)")
    out = transfer(
        source={"type": "postgres", "auth": "pg_local", "query": "SELECT 1 AS id WHERE false"},
        target={"type": "postgres", "auth": "pg_local", "table": target},
        mode="replace",
    )
    assert out.ok and (out.data["rows_transferred"], out.data["chunks_processed"]) == (0, 0)
    assert pg(pg_test_dsn, f"SELECT count(*) FROM {target}") == [(0,)]


def test_unsupported_ends_are_not_available():
    with pytest.raises(ToolNotAvailable, match="source 'snowflake'"):
        transfer(
            source={"tool": "snowflake", "query": "SELECT 1"},
            target={"tool": "postgres", "table": "t"},
        )
    with pytest.raises(ToolNotAvailable, match="target 'http'"):
        transfer(
            source={"tool": "postgres", "query": "SELECT 1"}, target={"tool": "http", "url": "x"}
        )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"source": None}, "needs `source` and `target`"),
        ({"source": {"query": "x"}, "target": {"type": "postgres"}}, "`source` needs `tool`"),
        ({"chunk_size": "many"}, "`chunk_size` must be an integer"),
        ({"chunk_size": 0}, "at least 1"),
        ({"mode": "merge"}, "transfer mode 'merge'"),
        ({"mode": "upsert"}, "needs `key`"),
        ({"target": {"type": "postgres", "auth": "pg_local"}}, "needs `table` or `query`"),
    ],
)
def test_transfer_config_errors(pg_connections, config, message):
    base = {
        "source": {"type": "postgres", "auth": "pg_local", "query": "SELECT 1 AS id"},
        "target": {"type": "postgres", "auth": "pg_local", "table": "whatever"},
    }
    out = transfer(**{**base, **config})
    assert out.error["type"] == "ConfigError", out.error
    assert message in out.error["message"]


def test_registry_resolves_transfer(tmp_path):
    db = tmp_path / "r.duckdb"
    out = get_tool("transfer")(
        ToolCall(
            step="t",
            task="t",
            config={
                "source": {"type": "duckdb", "database": str(db), "query": "SELECT 1 AS one"},
                "target": {"type": "duckdb", "database": str(db), "table": "copy"},
            },
        )
    )
    assert out.ok and duck(db, "FROM copy") == [(1,)]
