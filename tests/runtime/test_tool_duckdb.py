"""``kind: duckdb`` against real DuckDB files."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from airflow_plugin.tools import ToolCall, get_tool
from airflow_plugin.tools.duckdb import run_duckdb


def run(config: dict[str, Any], **call: Any):
    return run_duckdb(ToolCall(step="s", task="s", config={"kind": "duckdb", **config}, **call))


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "work.duckdb")


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the per-execution default databases inside the test's directory."""
    path = tmp_path / "noetl-data"
    monkeypatch.setenv("NOETL_DATA_DIR", str(path))
    return path


@pytest.mark.parametrize("alias", ["query", "queries", "command", "commands", "cmd", "cmds"])
def test_every_inline_alias(db, alias):
    out = run({"database": db, alias: ["SELECT 1 AS a;", "SELECT 2 AS b"]})
    assert out.ok, out.error
    assert out.data["rows"] == [{"b": 2}]
    assert out.data["statement_count"] == out.data["executed_commands"] == 2


@pytest.mark.parametrize("alias", ["command_b64", "commands_b64", "query_b64"])
def test_every_base64_alias_rendered_with_inputs(db, alias):
    encoded = base64.b64encode(b"SELECT '{{ who }}' AS who").decode()
    out = run({"database": db, alias: encoded, "args": {"who": "duck"}})
    assert out.data["rows"] == [{"who": "duck"}]


def test_noetl_result_keys_and_last_statement_rows(db):
    out = run(
        {
            "database": db,
            "commands": """
                CREATE TABLE items (id INTEGER PRIMARY KEY, name VARCHAR, price DECIMAL(6, 2));
                INSERT INTO items VALUES (1, 'a', 1.50), (2, 'b', 2.00), (3, 'c', 3.25),
                                         (4, 'd', 4), (5, 'e', 5), (6, 'f', 6);
                SELECT id FROM items ORDER BY id;  -- 6 rows: command_3
                UPDATE items SET price = price * 2 WHERE id <= 2;
                SELECT name, price FROM items WHERE id = 1
            """,
        }
    )
    assert out.ok, out.error
    data = out.data
    assert data["executed_commands"] == 5
    assert data["command_3_rows"] == 6
    assert data["command_3_sample"] == [[1], [2], [3], [4], [5]]
    assert "command_4_rows" not in data  # DML returns no rows
    assert data["command_5_rows"] == 1
    assert data["command_5_sample"] == [["a", 3.0]]
    assert data["rows"] == [{"name": "a", "price": 3.0}]
    assert data["columns"] == ["name", "price"]
    assert data["row_count"] == 1
    assert data["status"] == "success"
    assert data["database"] == db


def test_dml_row_count_and_returning(db):
    run({"database": db, "command": "CREATE TABLE t (i INTEGER)"})
    out = run({"database": db, "command": "INSERT INTO t VALUES (1), (2), (3)"})
    assert (out.data["rows"], out.data["row_count"]) == ([], 3)
    out = run({"database": db, "command": "DELETE FROM t WHERE i > 1 RETURNING i"})
    assert sorted(row["i"] for row in out.data["rows"]) == [2, 3]


def test_one_transaction_rolls_back_everything(db):
    run({"database": db, "command": "CREATE TABLE t (i INTEGER PRIMARY KEY)"})
    out = run(
        {
            "database": db,
            "commands": "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); "
            "INSERT INTO t VALUES (1); INSERT INTO t VALUES (3)",
        }
    )
    assert not out.ok
    assert out.error["type"] == "ConstraintException"
    assert out.error["statement_index"] == 2
    assert out.error["retryable"] is False
    assert run({"database": db, "query": "SELECT count(*) AS n FROM t"}).data["rows"] == [{"n": 0}]


def test_script_with_its_own_transactions_runs_as_written(db):
    out = run(
        {
            "database": db,
            "commands": "CREATE TABLE t (i INTEGER); BEGIN; INSERT INTO t VALUES (1); COMMIT; "
            "SELECT count(*) AS n FROM t",
        }
    )
    assert out.ok, out.error
    assert out.data["rows"] == [{"n": 1}]


def test_json_safe_types(db):
    out = run(
        {
            "database": db,
            "commands": "SET TimeZone = 'UTC'; "
            "SELECT 2.50::DECIMAL(4, 2) AS d, 7::DECIMAL(4, 0) AS whole, "
            "TIMESTAMPTZ '2024-01-02 03:04:05+02' AS ts, DATE '2024-02-29' AS day, "
            "INTERVAL 90 MINUTE AS iv, '12345678-1234-5678-1234-567812345678'::UUID AS u, "
            "'\\xAB\\x01'::BLOB AS b, [1, 2] AS l, {'k': 'v'} AS s, "
            "'{\"a\": [1]}'::JSON AS j, 'inf'::DOUBLE AS f",
        }
    )
    assert out.ok, out.error
    row = out.data["rows"][0]
    assert row["d"] == 2.5 and row["whole"] == 7
    # with or without pytz (DuckDB's own converter needs it; the tool falls back to UTC)
    assert row["ts"] == "2024-01-02T01:04:05+00:00"
    assert row["day"] == "2024-02-29"
    assert row["iv"] == "01:30:00"
    assert row["u"] == "12345678-1234-5678-1234-567812345678"
    assert row["b"] == "\\xab01"
    assert row["l"] == [1, 2] and row["s"] == {"k": "v"}
    assert row["j"] == '{"a": [1]}'  # DuckDB hands JSON back as its text
    assert row["f"] == "Infinity"


def test_timestamptz_from_a_statement_that_cannot_run_twice(db):
    out = run(
        {
            "database": db,
            "commands": "CREATE TABLE t (x TIMESTAMPTZ); "
            "INSERT INTO t VALUES ('2024-01-02 03:04:05+00') RETURNING x",
        }
    )
    try:
        import pytz  # noqa: F401
    except ImportError:
        assert out.error["type"] == "PytzMissing"
        assert "install pytz" in out.error["message"]
        assert out.error["statement_index"] == 1
    else:
        assert out.ok, out.error
        assert out.data["rows"][0]["x"].startswith("2024-01-02")


def test_database_parent_directories_are_created(tmp_path):
    path = tmp_path / "a" / "b" / "c.duckdb"
    assert run({"database": str(path), "command": "CREATE TABLE t (i INTEGER)"}).ok
    assert path.exists()


def test_memory_database(tmp_path):
    out = run({"database": ":memory:", "commands": "CREATE TABLE t AS SELECT 1 AS i; FROM t"})
    assert out.data["rows"] == [{"i": 1}] and out.data["database"] == ":memory:"
    # no execution id and no database: memory, nothing persists
    assert run({"command": "CREATE TABLE t (i INTEGER)"}).data["database"] == ":memory:"
    assert not run({"query": "SELECT * FROM t"}).ok


def test_steps_of_one_execution_share_its_database(data_dir):
    context = {"execution_id": "5501"}
    assert run({"command": "CREATE TABLE shared AS SELECT 42 AS v"}, context=context).ok
    out = run({"query": "SELECT v FROM shared"}, context=context)
    assert out.data["rows"] == [{"v": 42}]
    assert out.data["database"] == str(data_dir / "noetldb" / "duckdb_5501.duckdb")
    other = run({"query": "SELECT v FROM shared"}, context={"execution_id": "5502"})
    assert other.error["type"] == "CatalogException"


def test_install_of_a_missing_extension_never_downloads(db, tmp_path):
    empty = tmp_path / "no-extensions"
    empty.mkdir()
    out = run(
        {
            "database": db,
            "commands": f"SET extension_directory = '{empty}';\n-- geo\nINSTALL spatial; SELECT 1",
        }
    )
    assert not out.ok
    assert out.error["type"] == "ExtensionNotInstalled"
    assert out.error["code"] == "EXTENSION_NOT_INSTALLED"
    assert out.error["extension"] == "spatial"
    assert out.error["statement_index"] == 1
    assert "never downloads" in out.error["message"]
    assert list(empty.iterdir()) == []  # nothing was fetched


def test_autoloading_a_missing_extension_names_it(db, tmp_path):
    empty = tmp_path / "no-extensions"
    empty.mkdir()
    out = run(
        {
            "database": db,
            "commands": f"SET extension_directory = '{empty}'; "
            "SELECT * FROM read_parquet('s3://bucket/data.parquet')",
        }
    )
    assert out.error["type"] == "ExtensionNotInstalled"
    assert out.error["extension"] == "httpfs"
    assert "never downloads" in out.error["message"]


def test_install_of_an_installed_extension_is_a_no_op(db):
    out = run({"database": db, "commands": "INSTALL json; LOAD json; SELECT 1 AS ok"})
    assert out.ok, out.error
    assert out.data["rows"] == [{"ok": 1}]


def test_file_locked_by_another_process_is_retryable(db):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; con = duckdb.connect(sys.argv[1]); "
            "con.execute('CREATE TABLE IF NOT EXISTS t (i INTEGER)'); "
            "print('ready', flush=True); sys.stdin.read()",
            db,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        out = run({"database": db, "query": "SELECT 1"})
        assert not out.ok
        assert out.error["type"] == "IOException"
        assert out.error["code"] == "LOCK_CONFLICT"
        assert out.error["retryable"] is True
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert run({"database": db, "query": "SELECT count(*) AS n FROM t"}).data["rows"] == [{"n": 0}]


def test_connection_is_closed_after_each_call(db):
    assert run({"database": db, "command": "CREATE TABLE t AS SELECT 1 AS i"}).ok
    # another process can open the file right away
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; print(duckdb.connect(sys.argv[1]).sql('FROM t').fetchall())",
            db,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(1,)]"


def test_errors_and_config(db):
    out = run({"database": db, "query": "SELEC 1"})
    assert (out.error["type"], out.error["retryable"]) == ("ParserException", False)
    out = run({"database": db})
    assert out.error["type"] == "ConfigError"
    out = run({"database": 5, "query": "SELECT 1"})
    assert out.error["type"] == "ConfigError"


def test_require_cloud_output_fails_without_a_bucket_copy(db):
    """NoETL's duckdb tool refuses SQL that writes no gs:// or s3:// COPY when the step says
    `require_cloud_output: true`, before any statement runs."""
    out = run(
        {
            "database": db,
            "commands": "CREATE TABLE t AS SELECT 1 AS a",
            "require_cloud_output": True,
        }
    )
    assert not out.ok and "No cloud COPY targets detected" in str(out.error)
    with duckdb.connect(db) as con:
        assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)
    # Without the flag the same SQL runs; `false` is the default.
    assert run({"database": db, "commands": "SELECT 1 AS a", "require_cloud_output": False}).ok


def test_registry_resolves_the_kind(db):
    out = get_tool("duckdb")(
        ToolCall(step="s", task="s", config={"database": db, "query": "SELECT 3 AS x"})
    )
    assert out.data["rows"] == [{"x": 3}]
    assert duckdb.connect(db).execute("SELECT 1").fetchall() == [(1,)]
