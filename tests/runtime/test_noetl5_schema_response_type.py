"""NoETL 5's postgres ``schema`` (postgres.rs:285, the session's search_path), http
``response_type`` (http.rs:247, how the body becomes ``data``) and python ``python`` (python.rs:637,
the interpreter the code runs in) on the Airflow runtime, against a real PostgreSQL, a server on
127.0.0.1 and a real interpreter other than the task's."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from airflow_plugin.tools import ToolCall
from airflow_plugin.tools.http import run_http
from airflow_plugin.tools.postgres import run_postgres
from airflow_plugin.tools.python import run_python
from noetl_compile.engine_profiles import PROFILES

NOETL5 = PROFILES["noetl5"]


def pg(config: dict[str, Any]):
    return run_postgres(
        ToolCall(
            step="s",
            task="s",
            config={"kind": "postgres", "auth": "pg_local", **config},
            profile=NOETL5,
        )
    )


def http(base: str, response_type: str | None, **params: str):
    config: dict[str, Any] = {"kind": "http", "url": f"{base}/respond", "params": params}
    if response_type is not None:
        config["response_type"] = response_type
    return run_http(ToolCall(step="s", task="s", config=config, profile=NOETL5))


# -- postgres schema ------------------------------------------------------------------------------


@pytest.fixture
def two_schemas(pg_connections):
    """Schemas ``n5a_<pid>`` and ``n5b_<pid>``, each with a table ``t`` holding its own name."""
    names = [f"n5a_{os.getpid()}", f"n5b_{os.getpid()}"]
    for name in names:
        out = pg(
            {
                "command": f"CREATE SCHEMA {name}; CREATE TABLE {name}.t (v text); "
                f"INSERT INTO {name}.t VALUES ('{name}')"
            }
        )
        assert out.ok, out.error
    yield names
    for name in names:
        pg({"command": f"DROP SCHEMA {name} CASCADE"})


def test_schema_is_the_search_path_unqualified_names_resolve_in(two_schemas):
    for name in two_schemas:
        out = pg({"query": "SELECT v FROM t", "schema": name})
        assert out.ok, out.error
        assert out.data["rows"] == [{"v": name}]


def test_schema_with_bound_params_and_a_write(two_schemas):
    a, _ = two_schemas
    out = pg({"command": "INSERT INTO t VALUES ($1)", "params": ["it's"], "schema": a})
    assert out.ok, out.error
    out = pg({"query": f"SELECT v FROM {a}.t ORDER BY v"})
    assert [row["v"] for row in out.data["rows"]] == sorted([a, "it's"])


def test_schema_never_reaches_the_next_call_on_a_pooled_connection(two_schemas):
    default = pg({"query": "SELECT current_setting('search_path') AS s"}).data["rows"][0]["s"]
    for _ in range(3):  # more calls than the pool has connections
        assert pg({"query": "SELECT 1 AS n", "schema": two_schemas[0]}).ok
        out = pg({"query": "SELECT current_setting('search_path') AS s"})
        assert out.data["rows"] == [{"s": default}]


def test_schema_is_a_value_not_sql(two_schemas):
    # Bound through set_config: a value holding SQL is a search_path PostgreSQL refuses as a
    # list (the call fails, naming it), never a statement that runs.
    hostile = f"{two_schemas[0]}; DROP SCHEMA {two_schemas[1]} CASCADE"
    out = pg({"query": "SELECT current_setting('search_path') AS s", "schema": hostile})
    assert out.status == "error" and "search_path" in out.error["message"]
    out = pg({"query": f"SELECT v FROM {two_schemas[1]}.t"})
    assert out.ok and out.data["rows"] == [{"v": two_schemas[1]}]


# -- http response_type ---------------------------------------------------------------------------


def test_response_type_json_parses_any_content_type(http_server):
    out = http(http_server, "json", body="42")  # text/plain
    assert out.ok, out.error
    assert out.data["data"] == 42 and out.data["body"] == 42
    out = http(http_server, "json", body="not json")
    assert out.data["data"] == "not json"


def test_without_response_type_the_content_type_decides(http_server):
    assert http(http_server, None, body="42").data["data"] == "42"


def test_response_type_text_keeps_a_json_body_as_text(http_server):
    out = http(http_server, "text", body='{"a": 1}', content_type="application/json")
    assert out.ok, out.error
    assert out.data["data"] == '{"a": 1}'


def test_response_type_binary_is_base64_and_size(http_server):
    out = http(http_server, "binary", body="é!")
    assert out.ok, out.error
    assert out.data["data"] == {"base64": "w6kh", "size": 3}


def test_an_unknown_response_type_fails_the_call(http_server):
    out = http(http_server, "xml", body="x")
    assert out.status == "error"
    assert "response_type" in out.error["message"] and "binary" in out.error["message"]


# -- python `python`: the interpreter the code runs in ------------------------------------------


def py(config: dict[str, Any], step_input: dict[str, Any] | None = None):
    return run_python(
        ToolCall(
            step="s",
            task="s",
            config={"kind": "python", **config},
            step_input=step_input,
            profile=NOETL5,
        )
    )


@pytest.fixture
def other_python(tmp_path):
    """A real interpreter that is not the task's: a venv of its own, without noetlc."""
    venv = tmp_path / "py"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def test_python_runs_the_code_in_the_named_interpreter(other_python):
    code = "import sys\nprint('seen')\nreturn {'exe': sys.executable, 'n': n + 1, 'd': input_data}"
    out = py({"python": other_python, "code": code, "args": {"n": 41}})
    assert out.ok, out.error
    assert out.data == {"exe": other_python, "n": 42, "d": {"n": 41}}
    # The task's own interpreter, without the key.
    assert py({"code": code, "args": {"n": 1}}).data["exe"] == sys.executable


def test_python_main_env_cwd_and_no_result(other_python, tmp_path):
    code = "import os\ndef main(a, **kw):\n    return [a, kw, os.environ['N5'], os.getcwd()]\n"
    out = py(
        {
            "python": other_python,
            "code": code,
            "args": {"a": 1, "b": 2},
            "env": {"N5": "x"},
            "cwd": str(tmp_path),
        }
    )
    assert out.ok, out.error
    assert out.data == [1, {"b": 2}, "x", str(tmp_path)]
    out = py({"python": other_python, "code": "print('hi')"})
    assert out.data == {"stdout": "hi\n", "stderr": ""}


def test_python_exit_code_timeout_and_a_missing_interpreter(other_python, tmp_path):
    out = py({"python": other_python, "code": "print('a')\nraise ValueError('bad')"})
    assert out.status == "error" and out.error["message"] == "Python script exited with code 1"
    assert out.data["exit_code"] == 1 and "ValueError: bad" in out.data["stderr"]
    assert out.data["stdout"] == "a\n"
    out = py({"python": other_python, "code": "import time\ntime.sleep(5)", "timeout_seconds": 1})
    assert out.status == "error"
    assert out.error["message"] == "Execution timed out after 1 seconds"
    out = py({"python": str(tmp_path / "nope"), "code": "result = 1"})
    assert out.status == "error" and "nope" in out.error["message"]
