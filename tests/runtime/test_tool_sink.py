"""The ``sink`` writer against a real PostgreSQL cluster and DuckDB files: spec shapes, postgres,
duckdb, the event log and the other tools (``kind: transfer`` is in test_tool_transfer.py)."""

from __future__ import annotations

import json

import pytest
from psycopg import sql as pgsql

from airflow_plugin.tools import ToolNotAvailable
from airflow_plugin.tools.sink import run_sink, sink_rows, sink_spec
from tests.runtime.db_support import duck, pg

# --------------------------------------------------------------------------------------------
# sink: spec shapes
# --------------------------------------------------------------------------------------------


def test_sink_spec_shapes():
    case_v2 = sink_spec(
        {
            "tool": {"kind": "postgres", "auth": "pg", "table": "t", "mode": "upsert", "key": "id"},
            "args": {"id": 1},
        }
    )
    assert (case_v2.kind, case_v2.table, case_v2.mode, case_v2.keys, case_v2.data) == (
        "postgres",
        "t",
        "upsert",
        ("id",),
        {"id": 1},
    )
    v1_flat = sink_spec(
        {"save": {"storage": "postgres", "data": {"a": 1}, "auth": "pg", "table": "t"}}
    )
    assert (v1_flat.kind, v1_flat.config["auth"], v1_flat.mode, v1_flat.data) == (
        "postgres",
        "pg",
        "insert",
        {"a": 1},
    )
    v1_nested = sink_spec(
        {
            "storage": {
                "type": "duckdb",
                "args": {"a": 1},
                "table": "t",
                "keys": ["a", "b"],
                "mode": "UPSERT",
            }
        }
    )
    assert (v1_nested.kind, v1_nested.keys, v1_nested.mode) == ("duckdb", ("a", "b"), "upsert")
    backend = sink_spec({"backend": "postgres", "table": "noetl.r", "from": [{"x": 1}]})
    assert (backend.kind, backend.data) == ("postgres", [{"x": 1}])
    statement = sink_spec({"tool": {"kind": "postgres", "auth": "pg", "statement": "INSERT ..."}})
    assert statement.mode == "statement"
    assert sink_spec({"args": {"a": 1}}).kind == ""  # no destination: the event log
    # the destination mapping wins over the top level
    assert (
        sink_spec({"tool": {"kind": "postgres", "table": "inner"}, "table": "outer"}).table
        == "inner"
    )


def test_sink_rows_shapes():
    assert sink_rows({"a": 1}) == [{"a": 1}]
    assert sink_rows([{"a": 1}, {"b": 2}]) == [{"a": 1}, {"b": 2}]
    assert sink_rows({"rows": [{"a": 1}], "row_count": 1, "columns": ["a"]}) == [{"a": 1}]
    assert sink_rows({"rows": [{"a": 1}]}) == [{"a": 1}]
    assert sink_rows({"rows": [1, 2], "other": 3}) == [{"rows": [1, 2], "other": 3}]  # a row
    assert sink_rows(None) == [] and sink_rows([]) == []


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"tool": {"kind": "postgres", "auth": "pg_local"}, "args": {"a": 1}}, "needs `table`"),
        (
            {
                "tool": {"kind": "postgres", "auth": "pg_local", "table": "t", "mode": "upsert"},
                "args": {"a": 1},
            },
            "needs `key`",
        ),
        (
            {
                "tool": {"kind": "postgres", "auth": "pg_local", "table": "t", "mode": "merge"},
                "args": {"a": 1},
            },
            "mode 'merge'",
        ),
        (
            {"tool": {"kind": "postgres", "auth": "pg_local", "table": "t"}, "args": [1, 2]},
            "row 0 is a int",
        ),
        (
            {"tool": {"kind": "postgres", "auth": "pg_local", "table": "t"}, "args": "text"},
            "got str",
        ),
        (
            {
                "tool": {
                    "kind": "postgres",
                    "auth": "pg_local",
                    "table": "t",
                    "mode": "upsert",
                    "key": "id",
                },
                "args": {"a": 1},
            },
            "upsert key id is not among",
        ),
        ({"tool": 5}, "must be a kind or a mapping"),
    ],
)
def test_sink_config_errors(spec, message):
    out = run_sink(spec, step="save")
    assert out.error["type"] == "ConfigError"
    assert message in out.error["message"] and "step 'save'" in out.error["message"]


# --------------------------------------------------------------------------------------------
# sink: postgres
# --------------------------------------------------------------------------------------------


def test_case_v2_sink_insert_and_seed_upsert(pg_connections, pg_test_dsn, name):
    table = name("users")
    pg(pg_test_dsn, f"CREATE TABLE {table} (id int PRIMARY KEY, email text, seen int DEFAULT 1)")
    spec = {
        "tool": {
            "kind": "postgres",
            "auth": "pg_local",
            "table": f"public.{table}",
            "mode": "upsert",
            "key": "id",
        },
        "args": {"id": 1, "email": "a@example.com"},
    }
    out = run_sink(spec, step="fetch_user")
    assert out.ok, out.error
    assert out.data == {
        "status": "success",
        "kind": "postgres",
        "table": f"public.{table}",
        "mode": "upsert",
        "rows_written": 1,
    }
    spec["args"] = {"id": 1, "email": "b@example.com"}
    assert run_sink(spec, step="fetch_user").data["rows_written"] == 1
    assert pg(pg_test_dsn, f"SELECT id, email, seen FROM {table}") == [(1, "b@example.com", 1)]
    insert = {"tool": {"kind": "postgres", "auth": "pg_k8s", "table": table}, "args": {"id": 2}}
    assert run_sink(insert, step="s").data["mode"] == "insert"
    assert pg(pg_test_dsn, f"SELECT count(*) FROM {table}") == [(2,)]


def test_v1_save_shapes(pg_connections, pg_test_dsn, name):
    table = name("saves")
    pg(pg_test_dsn, f"CREATE TABLE {table} (id text PRIMARY KEY, execution_id text, message text)")
    flat = {
        "storage": "postgres",
        "data": {"id": "1_flat", "execution_id": "1", "message": "flat"},
        "auth": "pg_k8s",
        "table": f"public.{table}",
        "mode": "upsert",
        "key": "id",
    }
    nested = {
        "storage": {
            "type": "postgres",
            "data": {"id": "1_nested", "execution_id": "1", "message": "nested"},
            "auth": {"type": "postgres", "credential": "pg_k8s"},
            "table": f"public.{table}",
            "mode": "upsert",
            "key": "id",
        }
    }
    assert run_sink({"save": flat}, step="a").ok
    assert run_sink(nested, step="b").ok
    assert pg(pg_test_dsn, f"SELECT id, message FROM {table} ORDER BY id") == [
        ("1_flat", "flat"),
        ("1_nested", "nested"),
    ]


def test_v1_save_dsn_names_the_database(pg_test_dsn, name):
    """58c2a16b's postgres save takes `dsn` as its connection (plugin/save/postgres.py:183):
    without `auth` the row goes to the database the URI names."""
    table = name("dsn_saves")
    pg(pg_test_dsn, f"CREATE TABLE {table} (v int)")
    spec = {"storage": {"type": "postgres", "dsn": pg_test_dsn, "table": table}, "data": {"v": 4}}
    outcome = run_sink(spec, step="a")
    assert outcome.ok, outcome.error
    assert pg(pg_test_dsn, f"SELECT v FROM {table}") == [(4,)]
    # A refused connection fails the write (and so the step), naming no password.
    bad = {
        "storage": {
            "type": "postgres",
            "dsn": "postgresql://u:s3cret@127.0.0.1:1/x",
            "table": table,
        },
        "data": {"v": 5},
    }
    failed = run_sink(bad, step="a")
    assert not failed.ok
    assert "s3cret" not in json.dumps(failed.error, default=str)


def test_rows_with_different_keys_get_column_defaults(pg_connections, pg_test_dsn, name):
    table = name("mixed")
    pg(pg_test_dsn, f"CREATE TABLE {table} (id int, a text DEFAULT 'dflt', b int DEFAULT 7)")
    out = run_sink(
        {
            "tool": {"kind": "postgres", "auth": "pg_local", "table": table, "mode": "append"},
            "data": [{"id": 1, "a": "x"}, {"id": 2, "b": 3}, {"id": 3, "a": "y"}],
        },
        step="s",
    )
    assert out.data["rows_written"] == 3
    assert pg(pg_test_dsn, f"SELECT id, a, b FROM {table} ORDER BY id") == [
        (1, "x", 7),
        (2, "dflt", 3),
        (3, "y", 7),
    ]
    # a SQL step result is written row by row
    result = {
        "status": "success",
        "rows": [{"id": 4}, {"id": 5}],
        "row_count": 2,
        "columns": ["id"],
    }
    assert (
        run_sink(
            {"tool": {"kind": "postgres", "auth": "pg_local", "table": table}, "args": result},
            step="s",
        ).data["rows_written"]
        == 2
    )


def test_json_values_reach_json_columns(pg_connections, pg_test_dsn, name):
    table = name("docs")
    pg(pg_test_dsn, f"CREATE TABLE {table} (jb jsonb, j json, t text, arr int[], items jsonb)")
    out = run_sink(
        {
            "tool": {"kind": "postgres", "auth": "pg_local", "table": table},
            "args": {
                "jb": {"a": [1, None]},
                "j": [1, "x"],
                "t": {"k": "v"},
                "arr": [1, 2],
                "items": '[{"id": 1}]',
            },
        },
        step="s",
    )
    assert out.ok, out.error
    jb, j, t, arr, items = pg(pg_test_dsn, f"SELECT jb, j, t, arr, items FROM {table}")[0]
    assert jb == {"a": [1, None]} and j == [1, "x"] and json.loads(t) == {"k": "v"}
    assert arr == [1, 2] and items == [{"id": 1}]  # JSON text (`| tojson`) into jsonb


def test_hostile_table_and_column_names(pg_connections, pg_test_dsn, name):
    victim = name("victim")
    pg(pg_test_dsn, f"CREATE TABLE {victim} (i int)")
    table = f'we"ird; DROP TABLE {victim}; --'
    pg(
        pg_test_dsn,
        pgsql.SQL('CREATE TABLE {} ("a""b" text, "Sel;ect" text, "1st col" int)').format(
            pgsql.Identifier(table)
        ),
    )
    try:
        hostile_value = "'); DROP TABLE " + victim + "; --"
        out = run_sink(
            {
                "tool": {
                    "kind": "postgres",
                    "auth": "pg_local",
                    "table": f'"{table.replace(chr(34), chr(34) * 2)}"',
                },
                "args": {'a"b': hostile_value, "Sel;ect": "ok", "1st col": 1},
            },
            step="s",
        )
        assert out.ok, out.error
        assert pg(
            pg_test_dsn,
            pgsql.SQL('SELECT "a""b", "Sel;ect", "1st col" FROM {}').format(
                pgsql.Identifier(table)
            ),
        ) == [(hostile_value, "ok", 1)]
        # an injection attempt through a data key is just an unknown column
        out = run_sink(
            {
                "tool": {"kind": "postgres", "auth": "pg_local", "table": victim},
                "args": {f"i) VALUES (1); DROP TABLE {victim}; --": 1},
            },
            step="s",
        )
        assert out.error["code"] == "42703"
        assert pg(pg_test_dsn, f"SELECT count(*) FROM {victim}") == [(0,)]  # still there, empty
    finally:
        pg(pg_test_dsn, pgsql.SQL("DROP TABLE IF EXISTS {}").format(pgsql.Identifier(table)))


def test_sink_is_one_transaction(pg_connections, pg_test_dsn, name):
    table = name("tx")
    pg(pg_test_dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    out = run_sink(
        {
            "tool": {"kind": "postgres", "auth": "pg_local", "table": table},
            "data": [{"id": 1}, {"id": 2}, {"id": 1}],
        },
        step="s",
    )
    assert (out.error["type"], out.error["code"], out.error["retryable"]) == (
        "UniqueViolation",
        "23505",
        False,
    )
    assert out.error["table"] == table
    assert pg(pg_test_dsn, f"SELECT count(*) FROM {table}") == [(0,)]


def test_replace_mode(pg_connections, pg_test_dsn, name):
    table = name("rep")
    pg(pg_test_dsn, f"CREATE TABLE {table} (id int)")
    pg(pg_test_dsn, f"INSERT INTO {table} VALUES (100), (200)")
    out = run_sink(
        {
            "tool": {"kind": "postgres", "auth": "pg_local", "table": table, "mode": "replace"},
            "data": [{"id": 1}],
        },
        step="s",
    )
    assert out.ok
    assert pg(pg_test_dsn, f"SELECT id FROM {table}") == [(1,)]


def test_statement_sinks(pg_connections, pg_test_dsn, name):
    table = name("stmt")
    pg(pg_test_dsn, f"CREATE TABLE {table} (id text PRIMARY KEY, payload jsonb, n int)")
    # the corpus form: the values were rendered into the statement
    out = run_sink(
        {
            "tool": {
                "kind": "postgres",
                "auth": "pg_local",
                "statement": f"INSERT INTO public.{table} (id, payload) VALUES ('1', '{{\"a\": 1}}'::jsonb);\n",
            }
        },
        step="s",
    )
    assert out.ok, out.error
    assert (out.data["mode"], out.data["rows_written"], out.data["statement_count"]) == (
        "statement",
        1,
        1,
    )
    # NoETL's :name markers: bound as parameters, once per row
    out = run_sink(
        {
            "tool": {
                "kind": "postgres",
                "auth": "pg_local",
                "command": f"INSERT INTO {table} (id, payload, n) VALUES (:id, :payload::jsonb, :n) "
                "ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n -- 100% safe: ':n' in a comment",
            },
            "data": [
                {"id": "2", "payload": {"b": "it's"}, "n": 2},
                {"id": "1", "payload": None, "n": 5},
            ],
        },
        step="s",
    )
    assert out.ok, out.error
    assert out.data["rows_written"] == 2
    assert pg(pg_test_dsn, f"SELECT id, payload, n FROM {table} ORDER BY id") == [
        ("1", {"a": 1}, 5),
        ("2", {"b": "it's"}, 2),
    ]


def test_postgres_sink_errors(pg_connections, monkeypatch):
    out = run_sink({"tool": {"kind": "postgres", "table": "t"}, "args": {"a": 1}}, step="s")
    assert out.error["type"] == "ConfigError" and "needs `auth`" in out.error["message"]
    out = run_sink(
        {
            "tool": {"kind": "postgres", "auth": "pg_local", "table": "no_such_table"},
            "args": {"a": 1},
        },
        step="s",
    )
    assert (out.error["type"], out.error["code"]) == ("UndefinedTable", "42P01")
    out = run_sink(
        {"tool": {"kind": "postgres", "auth": "missing_conn", "table": "t"}, "args": {"a": 1}},
        step="s",
    )
    assert out.error["type"] == "ConnectionNotFound"


# --------------------------------------------------------------------------------------------
# sink: duckdb, event log, other tools
# --------------------------------------------------------------------------------------------


def test_duckdb_sink_creates_upserts_and_quotes(tmp_path):
    db = tmp_path / "sink.duckdb"
    spec = {
        "tool": {
            "kind": "duckdb",
            "database": str(db),
            "table": 'main."Odd ""Table"""',
            "mode": "upsert",
            "key": "id",
        },
        "args": [
            {"id": 1, "Name": "a", "score": 1.5, "tags": ["x"], "meta": {"k": 1}, "ok": True},
            {"id": 2, "Name": "b", "score": 2.5, "tags": [], "meta": None, "ok": False},
        ],
    }
    out = run_sink(spec, step="s")
    assert out.ok, out.error
    assert out.data["rows_written"] == 2 and out.data["database"] == str(db)
    spec["args"] = [
        {"id": 2, "Name": "b2", "score": 9.0, "tags": ["y"], "meta": {"k": 2}, "ok": True}
    ]
    assert run_sink(spec, step="s").ok
    rows = duck(db, 'SELECT id, name, score, tags, meta, ok FROM "Odd ""Table""" ORDER BY id')
    assert rows[0][:3] == (1, "a", 1.5)
    assert rows[1][:3] == (2, "b2", 9.0)
    assert json.loads(rows[1][3]) == ["y"] and json.loads(rows[1][4]) == {"k": 2}
    columns = dict(
        duck(
            db,
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'Odd \"Table\"'",
        )
    )
    assert columns == {
        "id": "BIGINT",
        "name": "VARCHAR",
        "score": "DOUBLE",
        "tags": "JSON",
        "meta": "JSON",
        "ok": "BOOLEAN",
    }


def test_duckdb_sink_into_an_existing_table_and_statements(tmp_path):
    db = tmp_path / "s.duckdb"
    duck(db, "CREATE TABLE events (id INTEGER, kind VARCHAR DEFAULT 'none', body JSON)")
    out = run_sink(
        {
            "storage": {
                "type": "duckdb",
                "database": str(db),
                "table": "events",
                "data": [{"id": 1, "body": {"a": 1}}, {"id": 2, "kind": "x"}],
            }
        },
        step="s",
    )
    assert out.ok, out.error
    rows = duck(db, "SELECT id, kind, body FROM events ORDER BY id")
    assert [(i, kind, body and json.loads(body)) for i, kind, body in rows] == [
        (1, "none", {"a": 1}),
        (2, "x", None),
    ]
    out = run_sink(
        {
            "tool": {
                "kind": "duckdb",
                "database": str(db),
                "commands": "INSERT INTO events (id, kind) VALUES (:id, :kind)",
            },
            "args": [{"id": 3, "kind": "y"}, {"id": 4, "kind": "z"}],
        },
        step="s",
    )
    assert out.ok, out.error
    assert out.data["rows_written"] == 2
    assert duck(db, "SELECT count(*) FROM events") == [(4,)]
    bad = run_sink(
        {
            "tool": {"kind": "duckdb", "database": str(db), "table": "events"},
            "args": [{"id": 5}, {"nope": 1}],
        },
        step="s",
    )
    assert bad.error["type"] == "BinderException"
    assert duck(db, "SELECT count(*) FROM events") == [(4,)]  # the good row was rolled back


def test_duckdb_sink_uses_the_execution_database(tmp_path, monkeypatch):
    monkeypatch.setenv("NOETL_DATA_DIR", str(tmp_path))
    out = run_sink(
        {"tool": {"kind": "duckdb", "table": "t"}, "args": {"a": 1}},
        step="s",
        context={"execution_id": "77"},
    )
    assert out.ok, out.error
    assert duck(tmp_path / "noetldb" / "duckdb_77.duckdb", "FROM t") == [(1,)]


def test_event_log_sink_returns_the_data():
    out = run_sink(
        {"tool": {"kind": "event_log"}, "args": {"status": "success", "message": "hi"}}, step="s"
    )
    assert out.data == {
        "status": "success",
        "kind": "event_log",
        "table": None,
        "mode": "event",
        "rows_written": 1,
        "data": {"status": "success", "message": "hi"},
    }
    assert run_sink({"storage": "event_log", "data": [1, 2]}, step="s").data["rows_written"] == 2
    assert run_sink({"args": None}, step="s").data["rows_written"] == 0


def test_other_kinds_run_as_tools():
    out = run_sink(
        {"tool": {"kind": "python", "code": "result = {'doubled': x * 2}"}, "args": {"x": 21}},
        step="s",
    )
    assert out.ok, out.error
    assert out.data["result"] == {"doubled": 42}
    failed = run_sink(
        {"tool": {"kind": "python", "code": "raise ValueError('nope')"}, "args": {}}, step="s"
    )
    assert not failed.ok and failed.error["type"] == "ValueError"
    with pytest.raises(ToolNotAvailable):
        run_sink({"tool": {"kind": "gcs_nowhere"}, "args": {"a": 1}}, step="s")


def test_a_python_sink_sees_the_sink_data_as_data_never_none():
    # NoETL (core/storage/python.py): `data` is the sink's data mapping (here the whole `args`),
    # or {}; an explicit `args.data` never replaces it; the other args keys are bound as well.
    code = "result = {'data': data, 'keys': sorted(data), 'n': n}"
    out = run_sink(
        {"tool": {"kind": "python", "args": {"data": None, "n": 2}, "code": code}}, step="s"
    )
    assert out.ok, out.error
    assert out.data["result"] == {"data": {"data": None, "n": 2}, "keys": ["data", "n"], "n": 2}
    empty = run_sink({"tool": {"kind": "python", "code": "result = data"}}, step="s")
    assert empty.ok, empty.error
    assert empty.data["result"] == {}
    rows = run_sink({"tool": {"kind": "python", "code": "result = data"}, "data": [1]}, step="s")
    assert rows.ok and rows.data["result"] == {}  # not a mapping: NoETL passes {}
