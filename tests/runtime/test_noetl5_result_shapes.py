"""NoETL 5's result shapes, tool by tool, against the same tools under the April engine's
profile (engine profile fields `sql_result_shape`, `http_result_keys`, `noop_result`; the cases
of tests/noetl5/cases/result_shapes run them end to end): the shape follows the profile, never
the engine's name."""

from __future__ import annotations

import decimal

import pytest

from airflow_plugin.hooks.values import jsonable_value
from airflow_plugin.tools import ToolCall
from airflow_plugin.tools.duckdb import run_duckdb
from airflow_plugin.tools.http import run_http
from airflow_plugin.tools.noop import run_noop
from airflow_plugin.tools.postgres import run_postgres
from noetl_compile.engine_profiles import CANONICAL, NOETL5


def call(run, config, profile):
    return run(ToolCall(step="s", task="s", config=config, profile=profile))


def pg(config, profile=NOETL5):
    return call(run_postgres, {"kind": "postgres", "auth": "pg_local", **config}, profile)


def test_exact_decimals_are_positional_text_and_only_when_asked():
    assert jsonable_value(decimal.Decimal("12.50"), exact_decimals=True) == "12.50"
    assert jsonable_value(decimal.Decimal("1E-7"), exact_decimals=True) == "0.0000001"
    assert jsonable_value(decimal.Decimal("1E+3"), exact_decimals=True) == "1000"
    assert jsonable_value(decimal.Decimal("NaN"), exact_decimals=True) == "NaN"
    assert jsonable_value({"p": [decimal.Decimal("2.0")]}, exact_decimals=True) == {"p": ["2.0"]}
    assert jsonable_value(decimal.Decimal("12.50")) == 12.5


def test_postgres_shapes_follow_the_profile(pg_connections):
    query = "SELECT 12.50::numeric(6,2) AS p, 'x' AS s"
    n5 = pg({"query": query})
    assert n5.ok and n5.data == {
        "columns": ["p", "s"],
        "rows": [{"p": "12.50", "s": "x"}],
        "row_count": 1,
    }
    april = pg({"query": query}, CANONICAL)
    assert april.data["status"] == "success" and april.data["rows"] == [{"p": 12.5, "s": "x"}]
    assert pg({"query": "SELECT 1 WHERE false"}).data == {"columns": [], "rows": [], "row_count": 0}
    lists = pg({"query": query, "as_objects": "false"})  # a rendered template gives text
    assert lists.data["rows"] == [["12.50", "x"]]


def test_postgres_truncation_note_survives_the_reshape(pg_connections, monkeypatch):
    monkeypatch.setenv("NOETL_POSTGRES_MAX_RESULT_ROWS", "2")
    out = pg({"query": "SELECT g AS n FROM generate_series(1, 5) g"})
    assert out.data["row_count"] == 2 and out.data["truncated"] is True
    assert out.data["truncation"]["reason"] == "max_rows"


def test_postgres_statement_without_rows_is_affected_rows(pg_connections):
    out = pg(
        {
            "command": "DROP TABLE IF EXISTS pg_temp.n5_rs_dml; CREATE TEMP TABLE n5_rs_dml (x int); "
            "INSERT INTO n5_rs_dml VALUES (1), (2)"
        }
    )
    assert out.data == {"affected_rows": 2}
    ddl = pg(
        {"command": "DROP TABLE IF EXISTS pg_temp.n5_rs_ddl; CREATE TEMP TABLE n5_rs_ddl (x int)"}
    )
    assert ddl.data == {"affected_rows": 0}  # psycopg's -1 for DDL is NoETL 5's 0
    returning = pg(
        {
            "command": "DROP TABLE IF EXISTS pg_temp.n5_rs_ret; CREATE TEMP TABLE n5_rs_ret (x int); "
            "INSERT INTO n5_rs_ret VALUES (3) RETURNING x"
        }
    )
    assert returning.data == {
        "columns": ["x"],
        "rows": [{"x": 3}],
        "row_count": 1,
        "affected_rows": 1,
    }


def test_duckdb_shapes_follow_the_profile():
    query = "SELECT 12.50::DECIMAL(6,2) AS p"
    n5 = call(run_duckdb, {"kind": "duckdb", "query": query}, NOETL5)
    assert n5.data == {"columns": ["p"], "rows": [{"p": "12.50"}], "row_count": 1}
    april = call(run_duckdb, {"kind": "duckdb", "query": query}, CANONICAL)
    assert april.data["rows"] == [{"p": 12.5}] and "statement_count" in april.data
    empty = call(run_duckdb, {"kind": "duckdb", "query": "SELECT 1 AS n WHERE false"}, NOETL5)
    assert empty.data == {"columns": ["n"], "rows": [], "row_count": 0}


def test_http_result_keys_follow_the_profile(http_server):
    config = {"kind": "http", "url": f"{http_server}/get", "params": {"k": "v"}}
    n5 = call(run_http, config, NOETL5)
    assert sorted(n5.data) == ["body", "data", "headers", "status_code"]
    assert n5.data["body"] == n5.data["data"] and n5.data["data"]["args"] == {"k": "v"}
    april = call(run_http, config, CANONICAL)
    assert sorted(april.data) == ["data", "elapsed", "headers", "status_code", "url"]


@pytest.mark.parametrize(
    ("config", "profile", "result"),
    [
        ({}, NOETL5, {"status": "ok", "message": "noop"}),
        ({"message": "hi"}, NOETL5, {"status": "ok", "message": "hi"}),
        ({}, CANONICAL, {"status": "noop", "step": "s"}),
        ({"message": "hi"}, CANONICAL, {"status": "noop", "step": "s", "message": "hi"}),
        ({"result": {"a": 1}}, NOETL5, {"a": 1}),
    ],
)
def test_noop_result_follows_the_profile(config, profile, result):
    assert call(run_noop, {"kind": "noop", **config}, profile).data == result
