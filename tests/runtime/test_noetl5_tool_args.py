"""NoETL 5's tool arguments on the Airflow runtime (noetl_compile/noetl5_tools.py, docs/noetl5.md
"NoETL 5's tool arguments"): bound ``params`` on a real PostgreSQL and DuckDB, connections built
from NoETL 5's own keys, http ``timeout_seconds``/``form`` against a server on 127.0.0.1, python
``env``/``cwd``/``timeout_seconds``, noop ``message``/``result``."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from airflow_plugin.templating.render import render_value
from airflow_plugin.tools import ToolCall
from airflow_plugin.tools.duckdb import run_duckdb
from airflow_plugin.tools.http import run_http
from airflow_plugin.tools.noop import run_noop
from airflow_plugin.tools.postgres import run_postgres
from airflow_plugin.tools.python import run_python
from noetl_compile.engine_profiles import PROFILES

# Values a bound parameter must carry unchanged: quotes, a template, non-ASCII, a backslash.
TRICKY = ['O\'Brien "quoted"', "{{ workload.secret }} {% raw %}", "Zürich 東京 🚀", "a\\b;--"]


def call(run, config: dict[str, Any], **extra: Any):
    return run(ToolCall(step="s", task="s", config=config, **extra))


def pg(config: dict[str, Any]):
    return call(run_postgres, {"kind": "postgres", "auth": "pg_local", **config})


# -- postgres params ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", TRICKY)
def test_postgres_params_round_trip_unchanged(pg_connections, value):
    out = pg({"query": "SELECT $1::text AS v, length($1::text) AS n", "params": [value]})
    assert out.ok, out.error
    assert out.data["rows"] == [{"v": value, "n": len(value)}]


def test_postgres_params_insert_then_read_with_a_percent_in_the_sql(pg_connections):
    table = f"n5_{os.getpid()}"
    assert pg({"command": f"CREATE TABLE {table} (id int, name text)"}).ok
    try:
        for i, name in enumerate(TRICKY):
            out = pg({"command": f"INSERT INTO {table} VALUES ($1, $2)", "params": [i, name]})
            assert out.ok, out.error
            assert out.data["row_count"] == 1
        # `%` is SQL text here, not a placeholder: psycopg's raw cursor binds `$n` only.
        out = pg(
            {
                "query": f"SELECT name FROM {table} WHERE name LIKE '%' || $1 || '%' ORDER BY id",
                "params": ["Bri"],
            }
        )
        assert out.ok, out.error
        assert [row["name"] for row in out.data["rows"]] == ['O\'Brien "quoted"']
    finally:
        pg({"command": f"DROP TABLE {table}"})


def test_postgres_params_as_the_servers_mapping_by_position(pg_connections):
    out = pg(
        {
            "query": "SELECT $1::int + $2::int AS s, $3::text AS t",
            "params": {"2": 40, 1: 2, "$3": "x"},
        }
    )
    assert out.ok, out.error
    assert out.data["rows"] == [{"s": 42, "t": "x"}]


def test_postgres_json_bound_through_tojson_and_b64encode(pg_connections):
    # A real NoETL 5 application's form: the request as base64 of its JSON, decoded in SQL.
    request = {"name": "O'Brien", "tags": ["{{ x }}", "é"], "n": 3}
    params = render_value(["{{ request | tojson | b64encode }}"], {"request": request}, strict=True)
    out = pg(
        {
            "query": "SELECT convert_from(decode($1, 'base64'), 'UTF8')::jsonb AS doc",
            "params": params,
        }
    )
    assert out.ok, out.error
    assert out.data["rows"][0]["doc"] == request


def test_postgres_mapping_and_list_values_bind_as_json_text(pg_connections):
    out = pg({"query": "SELECT $1::jsonb AS a, $2::jsonb AS b", "params": [{"k": "v'"}, [1, None]]})
    assert out.ok, out.error
    assert out.data["rows"] == [{"a": {"k": "v'"}, "b": [1, None]}]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"query": "SELECT $1; SELECT 2", "params": [1]}, "this SQL has 2"),
        ({"query": "SELECT $1", "params": {"name": 1}}, "keyed by position"),
        ({"query": "SELECT $1", "params": {"1": 1, "3": 2}}, "without gaps"),
        ({"query": "SELECT $1", "params": "1"}, "must be a list"),
    ],
)
def test_postgres_params_of_a_wrong_shape_fail_the_call(pg_connections, config, message):
    out = pg(config)
    assert not out.ok
    assert out.error["type"] == "ConfigError"
    assert message in out.error["message"]


def test_postgres_a_missing_parameter_is_postgres_own_error(pg_connections):
    out = pg({"query": "SELECT $1::int + $2::int AS s", "params": [1]})
    assert not out.ok and out.error["code"] == "08P01"  # bind message supplies 1 parameter


# -- postgres connections from NoETL 5's keys ----------------------------------------------------


def test_postgres_host_fields_build_the_connection_at_run_time(pg_test_dsn):
    parts = conninfo_to_dict(pg_test_dsn)
    config = {
        "kind": "postgres",
        "host": parts["host"],
        "port": int(parts["port"]),
        "user": parts["user"],
        "database": parts["dbname"],
        "query": "SELECT current_database() AS db, $1::text AS v",
        "params": ["ok"],
    }
    out = call(run_postgres, config)
    assert out.ok, out.error
    assert out.data["rows"] == [{"db": "noetl_test", "v": "ok"}]


def test_postgres_connection_string_builds_the_connection(pg_test_dsn):
    out = call(
        run_postgres,
        {"kind": "postgres", "connection_string": pg_test_dsn, "query": "SELECT 1 AS one"},
    )
    assert out.ok, out.error
    assert out.data["rows"] == [{"one": 1}]


def test_postgres_auth_wins_over_noetl5_host_fields(pg_connections):
    out = pg({"host": "no-such-host.invalid", "port": 1, "query": "SELECT 1 AS one"})
    assert out.ok, out.error
    assert out.data["rows"] == [{"one": 1}]


def test_postgres_inline_password_never_reaches_the_error(pg_test_dsn):
    parts = conninfo_to_dict(pg_test_dsn)
    password = "s3cr3t-Pa55word"
    out = call(
        run_postgres,
        {
            "kind": "postgres",
            "host": parts["host"],
            "port": 1,  # nothing listens: the connect fails
            "user": "nobody",
            "password": password,
            "query": "SELECT 1",
        },
    )
    assert not out.ok
    assert password not in repr([out.data, out.error, out.meta])
    assert out.error["connection"].startswith("inline nobody@")


def test_postgres_bad_connection_string_says_what_without_quoting_it():
    out = call(
        run_postgres,
        {
            "kind": "postgres",
            "connection_string": "host=x password='unterminated",
            "query": "SELECT 1",
        },
    )
    assert not out.ok and out.error["type"] == "ConfigError"
    assert "unterminated" not in out.error["message"]


# -- duckdb params and db_path ---------------------------------------------------------------


@pytest.mark.parametrize("marker", ["$1", "?"])
def test_duckdb_params_round_trip_unchanged(marker):
    for value in TRICKY:
        out = call(
            run_duckdb,
            {
                "kind": "duckdb",
                "database": ":memory:",
                "query": f"SELECT {marker}::VARCHAR AS v",
                "params": [value],
            },
        )
        assert out.ok, out.error
        assert out.data["rows"] == [{"v": value}]


def test_duckdb_db_path_is_the_database_file_and_params_bind_inserts(tmp_path):
    path = tmp_path / "n5" / "app.duckdb"
    base = {"kind": "duckdb", "db_path": str(path)}
    assert call(run_duckdb, {**base, "command": "CREATE TABLE t (id INT, name VARCHAR)"}).ok
    out = call(
        run_duckdb, {**base, "command": "INSERT INTO t VALUES ($1, $2)", "params": [1, TRICKY[0]]}
    )
    assert out.ok, out.error
    out = call(
        run_duckdb, {**base, "query": "SELECT name FROM t WHERE id = $1", "params": {"1": 1}}
    )
    assert out.ok, out.error
    assert out.data["rows"] == [{"name": TRICKY[0]}]
    assert out.data["database"] == str(path) and path.exists()


def test_duckdb_params_with_several_statements_fail_the_call():
    out = call(
        run_duckdb,
        {"kind": "duckdb", "database": ":memory:", "query": "SELECT 1; SELECT $1", "params": [1]},
    )
    assert not out.ok and "this SQL has 2" in out.error["message"]


# -- http timeout_seconds and form -------------------------------------------------------------


def test_http_timeout_seconds_fails_the_call(http_server):
    started = time.monotonic()
    out = call(
        run_http,
        {
            "kind": "http",
            "url": f"{http_server}/api/v1/slow",
            "params": {"delay": 4},
            "timeout_seconds": 1,
        },
    )
    assert out.status == "error" and out.error["code"] == "HTTP_TIMEOUT"
    assert "timeout 1 s" in out.error["message"]
    assert time.monotonic() - started < 3.5


def test_http_form_is_sent_form_urlencoded(http_server):
    out = call(
        run_http,
        {
            "kind": "http",
            "method": "POST",
            "url": f"{http_server}/echo",
            "form": {"grant_type": "client_credentials", "n": 1, "gone": None},
            "body": "not sent: form wins over body",
        },
    )
    assert out.ok, out.error
    seen = out.data["data"]
    assert seen["form"] == {"grant_type": "client_credentials", "n": "1"}
    assert seen["content_type"] == "application/x-www-form-urlencoded"


def test_http_json_wins_over_form(http_server):
    out = call(
        run_http,
        {
            "kind": "http",
            "method": "POST",
            "url": f"{http_server}/echo",
            "form": {"a": "b"},
            "json": {"x": 1},
        },
    )
    assert out.ok and out.data["data"]["json"] == {"x": 1}


# -- python env, cwd, timeout_seconds -------------------------------------------------------------


def py(config: dict[str, Any], generation: str | None = None):
    profile = PROFILES[generation or "canonical"]
    return run_python(
        ToolCall(step="s", task="s", config={"kind": "python", **config}, profile=profile)
    )


@pytest.mark.parametrize("generation", [None, "noetl5"])
def test_python_env_and_cwd_apply_while_the_code_runs_and_are_restored(tmp_path, generation):
    before_cwd, name = os.getcwd(), "NOETL5_TOOL_ARG_TEST"
    assert name not in os.environ
    out = py(
        {
            "code": f"import os\nresult = {{'v': os.environ['{name}'], 'cwd': os.getcwd()}}",
            "env": {name: "é'x"},
            "cwd": str(tmp_path),
        },
        generation,
    )
    assert out.ok, out.error
    assert out.data == {"v": "é'x", "cwd": str(tmp_path)}
    assert os.getcwd() == before_cwd and name not in os.environ


@pytest.mark.parametrize("key", ["timeout_seconds", "timeout"])
@pytest.mark.parametrize("generation", [None, "noetl5"])
def test_python_timeout_fails_the_call(key, generation):
    started = time.monotonic()
    out = py({"code": "import time\ntime.sleep(60)\nresult = 1", key: 1}, generation)
    assert not out.ok
    assert out.error["type"] == "TimeoutError"
    assert "Execution timed out after 1 seconds" in out.error["message"]
    # Interrupted, not slept out (a first failure report may load the redaction patterns).
    assert time.monotonic() - started < 30


def test_python_timeout_in_a_thread_other_than_the_main_one():
    box: dict[str, Any] = {}
    code = "x = 0\nwhile True:\n    x += 1\n"
    worker = threading.Thread(
        target=lambda: box.update(out=py({"code": code, "timeout_seconds": 1}))
    )
    worker.start()
    worker.join(10)
    assert not worker.is_alive()
    assert box["out"].error["type"] == "TimeoutError"


def test_python_code_within_its_timeout_succeeds_and_leaves_no_alarm():
    out = py({"code": "result = 7", "timeout_seconds": 1})
    assert out.ok and out.data == 7
    time.sleep(1.2)  # an alarm left armed would kill this test


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"env": ["A=1"]}, "`env` must be a mapping"),
        ({"cwd": "/no/such/dir"}, "is not a directory"),
        ({"timeout_seconds": 0}, "positive number"),
    ],
)
def test_python_bad_scope_values_fail_the_call(config, message):
    out = py({"code": "result = 1", **config})
    assert not out.ok and message in out.error["message"]


# -- noop message and result ----------------------------------------------------------------


def test_noop_result_is_the_result_and_message_is_added():
    assert call(run_noop, {"kind": "noop", "result": {"a": [1]}}).data == {"a": [1]}
    assert call(run_noop, {"kind": "noop", "message": "hi"}).data == {
        "status": "noop",
        "step": "s",
        "message": "hi",
    }
    assert call(run_noop, {"kind": "noop"}).data == {"status": "noop", "step": "s"}


# -- the whole chain: compiled, run on a real local Airflow ----------------------------------


def test_noetl5_tool_arguments_run_on_airflow(tmp_path_factory, pg_test_dsn):
    """`noetlc run` of tests/noetl5_tools/tool_args_run.yaml: the DSN and the bound
    values are run values (`--set`), bound as parameters end to end; the compiled DAG file
    holds neither."""
    pytest.importorskip("airflow")
    import uuid

    import psycopg

    from tests.harness.run_cli import noetlc_run, report_of

    playbook = Path(__file__).resolve().parents[1] / "noetl5_tools" / "tool_args_run.yaml"
    home = tmp_path_factory.mktemp("noetl5-tool-args-home")
    table = f"n5_app_{uuid.uuid4().hex[:8]}"
    name = 'it\'s "{{ not a template }}" — Zürich'
    sets = {
        "pg_dsn": pg_test_dsn,
        "table": table,
        "duck_file": str(home / "n5.duckdb"),
        "name": name,
    }
    # A string workload key takes the --set text as it is.
    args = [a for key, value in sets.items() for a in ("--set", f"{key}={value}")]
    try:
        result = noetlc_run(home, playbook, "--json", *args)
        assert result.returncode == 0, result.stdout + result.stderr
        steps = report_of(result)["steps"]
        assert {n: s["state"] for n, s in steps.items()} == dict.fromkeys(
            ("start", "save", "local", "env", "end"), "success"
        )
        assert steps["save"]["result"]["rows"] == [
            {"title": "O'Brien's \"notes\"", "tags": ["é", "東京"], "name": name}
        ]
        assert steps["local"]["result"]["rows"] == [{"name": name, "answer": 42}]
        assert steps["end"]["result"] == {"answer": 42, "greeting": "hello"}
        with psycopg.connect(pg_test_dsn) as conn:
            assert conn.execute(f"SELECT name FROM {table}").fetchall() == [(name,)]
        dags = "".join(
            p.read_text(encoding="utf-8") for p in home.rglob("*.py") if "dags" in p.parts
        )
        assert dags and pg_test_dsn not in dags
    finally:
        with psycopg.connect(pg_test_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


class _Outer(Exception):
    pass


@pytest.fixture
def outer_alarm():
    """An armed SIGALRM timer whose handler raises _Outer, as Airflow's execution_timeout arms
    one in the task process; restored after the test."""
    import signal

    fired: list[float] = []

    def handler(*_):
        fired.append(time.monotonic())
        raise _Outer("execution_timeout")

    previous = signal.signal(signal.SIGALRM, handler)
    old = signal.getitimer(signal.ITIMER_REAL)

    def arm(seconds: float) -> list[float]:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        return fired

    yield arm
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)
    if old[0] > 0:
        signal.setitimer(signal.ITIMER_REAL, *old)


def test_python_timeout_keeps_an_armed_outer_alarm(outer_alarm):
    import signal

    fired = outer_alarm(30)
    started = time.monotonic()
    out = py({"code": "import time\ntime.sleep(60)", "timeout_seconds": 1})
    assert out.error["type"] == "TimeoutError" and time.monotonic() - started < 30
    assert not fired and 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30


def test_an_outer_alarm_due_first_fires_with_its_own_handler_once(outer_alarm):
    import signal

    fired = outer_alarm(0.5)
    out = py({"code": "import time\ntime.sleep(3)", "timeout_seconds": 10})
    assert out.error["type"] == "_Outer" and len(fired) == 1
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0  # neither timer is left armed
