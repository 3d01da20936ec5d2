"""Table (a)'s v1 (58c2a16b) specs for the tools' keys: duckdb, a step's `save` block and its
storages, the transfer tool, and the python tool's legacy `input_data`.

The same shape as ``dsl_key_specs.CANONICAL``; ``dsl_key_specs_v1.V1_MORE`` includes them (the
broker, retry, iterator and workbook keys stay there).
"""

from __future__ import annotations

import base64
from typing import Any

from tests.differential.dsl_key_specs import _POST_ONLY
from tests.differential.dsl_key_specs_older import _V1_OK, _v1

_DUCK_CONFIG = "noetl/plugin/duckdb/config.py"


def _v1_book(steps: list[dict[str, Any]], key: str = "workflow", **top: Any) -> dict[str, Any]:
    """v1: the given steps under `workflow` (or `steps`, the alias 58c2a16b also reads)."""
    return {
        "apiVersion": "noetl.io/v1",
        "kind": "Playbook",
        "metadata": {"name": "keys", "path": "v1/keys"},
        **top,
        key: steps,
    }


def _v1_duck(**keys: Any) -> dict[str, Any]:
    """v1: step `a` a duckdb call with ``keys`` (its statement, database, `with`)."""
    return _v1({"type": "duckdb", **keys})


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


_DUCK_SQL = "SELECT 7 AS x;"
# The python tool's legacy one-argument form: `main(input_data)` gets `with.input_data` itself.
_V1_INPUT_DATA = "def main(input_data=None):\n    return {'v': input_data}\n"


def _v1_save(storage: dict[str, Any] | None) -> dict[str, Any]:
    """v1: python step `a` (x = 4) whose `save` block writes `{v: x}` to ``storage`` (None: no
    `save` at all)."""
    step: dict[str, Any] = {"type": "python", "code": _V1_OK}
    if storage is not None:
        step["save"] = {"storage": storage, "data": {"v": "{{ result.x }}"}}
    return _v1(step)


def _v1_pg_save(storage: dict[str, Any]) -> dict[str, Any]:
    """v1: `make` creates table `saved_dsn`, then python step `a` (x = 4) saves `{v: x}` into it
    through a postgres `save` whose connection is ``storage``'s (`auth`, or a `dsn`)."""
    create = "DROP TABLE IF EXISTS saved_dsn; CREATE TABLE saved_dsn (v int);"
    return _v1_book(
        [
            {"step": "start", "next": [{"step": "make"}]},
            {
                "step": "make",
                "type": "postgres",
                "auth": "pg_local",
                "command": create,
                "next": [{"step": "a"}],
            },
            {
                "step": "a",
                "type": "python",
                "code": "def main():\n    return {'x': 4}\n",
                "save": {
                    "storage": {"type": "postgres", "table": "saved_dsn", **storage},
                    "data": {"v": "{{ result.x }}"},
                },
                "next": [{"step": "end"}],
            },
            {"step": "end"},
        ]
    )


_SAVE_CODE = "def main(data):\n    return {'saved': data}\n"


def _v1_transfer(table: str, drop: str = "", **over: Any) -> dict[str, Any]:
    """v1: `start` makes Postgres table ``table`` (its own per case), then `copy` transfers the
    local API's `/users` into it (the keys after the first step: 58c2a16b's broker copies a
    transfer's `source`/`target`/`chunk_size` only onto a step reached by an arc). ``over``
    replaces `source.X`/`target.X`/X keys (None drops one); ``drop`` names one to leave out."""
    create = f"DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int, username text);"
    source: dict[str, Any] = {"type": "http", "url": "@HTTP@/users"}
    target: dict[str, Any] = {
        "type": "postgres",
        "auth": "pg_local",
        "table": table,
        "mapping": {"id": "id", "username": "username"},
    }
    copy: dict[str, Any] = {"step": "copy", "type": "transfer", "source": source, "target": target}
    for path, value in over.items():
        holder, _, key = path.rpartition("__")
        {"source": source, "target": target, "": copy}[holder][key] = value
    if drop:
        holder, _, key = drop.rpartition("__")
        del {"source": source, "target": target, "": copy}[holder][key]
    copy["next"] = [{"step": "end"}]
    return _v1_book(
        [
            {
                "step": "start",
                "next": [{"step": "make"}],
            },
            {
                "step": "make",
                "type": "postgres",
                "auth": "pg_local",
                "command": create,
                "next": [{"step": "copy"}],
            },
            copy,
            {"step": "end"},
        ]
    )


V1_TOOLS: tuple[tuple[str, str, str, str, str, dict, dict], ...] = (
    # The duckdb tool.
    (
        "v1_duckdb_command_b64",
        "v1",
        "command_b64",
        "''",
        "noetl/plugin/duckdb/config.py",
        _v1_duck(command=_DUCK_SQL),
        _v1_duck(command_b64=_b64(_DUCK_SQL)),
    ),
    (
        "v1_duckdb_commands_b64",
        "v1",
        "commands_b64",
        "''",
        "noetl/plugin/duckdb/config.py",
        _v1_duck(commands=_DUCK_SQL),
        _v1_duck(commands_b64=_b64(_DUCK_SQL)),
    ),
    (
        "v1_duckdb_database",
        "v1",
        "database",
        "None",
        "noetl/plugin/duckdb/config.py",
        _v1_duck(command=_DUCK_SQL),
        _v1_duck(command=_DUCK_SQL, database="@WORK@/keys.duckdb"),
    ),
    *(
        (
            f"v1_duckdb_{key}",
            "v1",
            key,
            default,
            "noetl/plugin/duckdb/__init__.py" if key != "auto_secrets" else _DUCK_CONFIG,
            _v1_duck(command=_DUCK_SQL),
            _v1_duck(command=_DUCK_SQL, **{"with": {key: value}}),
        )
        for key, default, value in (
            ("auto_secrets", "True", False),
            ("db_type", "'postgres'", "sqlite"),
            ("require_cloud_output", "None", True),
        )
    ),
    # A step's `save` block and its storage keys.
    (
        "v1_save",
        "v1",
        "save",
        "None",
        "noetl/worker/worker.py",
        _v1_save(None),
        _v1_save({"type": "python", "code": _SAVE_CODE}),
    ),
    *(
        (
            f"v1_save_python_{key}",
            "v1",
            key,
            "None",
            "noetl/plugin/save/python.py",
            _v1_save({"type": "python"}),
            _v1_save({"type": "python", key: _SAVE_CODE}),
        )
        for key in ("code", "script")
    ),
    (
        "v1_save_http_url",
        "v1",
        "url",
        "None",
        "noetl/plugin/save/http.py",
        _v1_save({"type": "http"}),
        _v1_save({"type": "http", "url": "@HTTP@/respond"}),
    ),
    (
        "v1_save_http_method",
        "v1",
        "method",
        "'POST'",
        "noetl/plugin/save/http.py",
        _v1_save({"type": "http", "url": _POST_ONLY}),
        _v1_save({"type": "http", "url": _POST_ONLY, "method": "GET"}),
    ),
    *(
        (
            f"v1_save_duckdb_{key}",
            "v1",
            key,
            "None",
            "noetl/plugin/save/duckdb.py",
            _v1_save({"type": "duckdb"}),
            _v1_save({"type": "duckdb", key: "CREATE TABLE saved AS SELECT 7 AS v;"}),
        )
        for key in ("commands", "sql")
    ),
    (
        "v1_save_duckdb_table",
        "v1",
        "table",
        "'save_data'",
        "noetl/plugin/save/duckdb.py",
        _v1_save({"type": "duckdb"}),
        _v1_save({"type": "duckdb", "table": "saved"}),
    ),
    (
        "v1_save_postgres_dsn",
        "v1",
        "dsn",
        "None",
        "noetl/plugin/save/postgres.py",
        _v1_pg_save({"auth": "pg_local"}),
        # @PG_DSN@: the `pg_local` database's URI (the recorder and the runner substitute it).
        _v1_pg_save({"dsn": "@PG_DSN@"}),
    ),
    # The transfer tool (http -> postgres, the one pair 58c2a16b has without Snowflake).
    *(
        (
            f"v1_transfer_{name}",
            "v1",
            key,
            default,
            "noetl/plugin/transfer/executor.py",
            _v1_transfer(f"v1_t_{name}_a", **absent),
            _v1_transfer(f"v1_t_{name}_p", **present),
        )
        for name, key, default, absent, present in (
            ("source", "source", "{}", {"drop": "source"}, {}),
            ("target", "target", "{}", {"drop": "target"}, {}),
            ("type", "type", "''", {"drop": "source__type"}, {}),
            ("auth", "auth", "None", {"drop": "target__auth"}, {}),
            ("table", "table", "None", {"drop": "target__table"}, {}),
            ("mapping", "mapping", "{}", {"drop": "target__mapping"}, {}),
            ("data_path", "data_path", "None", {}, {"source__data_path": "data"}),
            ("query", "query", "None", {}, {"source__query": "SELECT 1"}),
            ("chunk_size", "chunk_size", "1000", {}, {"chunk_size": 4}),
            ("mode", "mode", "'append'", {}, {"mode": "replace"}),
        )
    ),
    # The rest: an http save's `endpoint`, the python tool's legacy `input_data`, duckdb's
    # legacy `credentials`.
    (
        "v1_save_http_endpoint",
        "v1",
        "endpoint",
        "None",
        "noetl/plugin/save/http.py",
        _v1_save({"type": "http", "url": "@HTTP@/respond"}),
        _v1_save({"type": "http", "endpoint": "@HTTP@/respond"}),
    ),
    (
        "v1_python_input_data",
        "v1",
        "input_data",
        "None",
        "noetl/plugin/python/executor.py",
        _v1({"type": "python", "code": _V1_INPUT_DATA}),
        _v1({"type": "python", "code": _V1_INPUT_DATA, "with": {"input_data": {"k": 2}}}),
    ),
    (
        "v1_duckdb_credentials",
        "v1",
        "credentials",
        "None",
        "noetl/plugin/duckdb/__init__.py",
        _v1_duck(command=_DUCK_SQL),
        _v1_duck(command=_DUCK_SQL, credentials={"db": {"key": "pg_local"}}),
    ),
)
