"""The connection NoETL 5's postgres tool builds from its own keys (noetl/tools ded94546
``postgres.rs``: ``connection_string``, else ``host``/``port``/``database``/``user``/``password``
with the defaults localhost, 5432, postgres, postgres), built here at run time from the rendered
values, when the tool names no ``auth`` connection.

Nothing of it is in the DAG file: the values are the tool config's templates (`{{ secret.x }}`, a
keychain entry), rendered in the task; X601 refuses a literal password in either key at check and
compile time. The password is registered with Airflow's log masker and scrubbed from errors, as
for a named connection; the target's name (``conn_id``) shows user, host, port and database only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .connections import mask
from .postgres import PgTarget, ToolConfigError

__all__ = ["INLINE_KEYS", "inline_target"]

INLINE_KEYS = ("connection_string", "host", "port", "database", "user", "password")
_DEFAULTS = {"host": "localhost", "port": 5432, "dbname": "postgres", "user": "postgres"}


def _text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ToolConfigError(f"postgres `{key}` must be text, got {type(value).__name__}")
    return str(value).strip()


def inline_target(config: Mapping[str, Any]) -> PgTarget | None:
    """The target NoETL 5's keys of ``config`` name; None when it holds none of them."""
    if not any(_text(config, key) is not None for key in INLINE_KEYS):
        return None
    conn_string = _text(config, "connection_string")
    if conn_string is not None:
        try:
            params: dict[str, Any] = conninfo_to_dict(conn_string)
        except psycopg.ProgrammingError:
            # The parser's message can quote the string, password included: say only what.
            raise ToolConfigError(
                "postgres `connection_string` is neither a postgresql:// URL nor libpq "
                "key=value text"
            ) from None
    else:
        params = {
            "host": _text(config, "host"),
            "port": _text(config, "port"),
            "dbname": _text(config, "database"),
            "user": _text(config, "user"),
            "password": _text(config, "password"),
        }
    params = {key: value for key, value in params.items() if value not in (None, "")}
    if conn_string is None:  # the string is used as written (libpq's defaults), as NoETL 5 does
        for key, default in _DEFAULTS.items():
            params.setdefault(key, default)
    password = params.get("password")
    mask(password)
    display = (
        f"{params.get('user', '')}@{params.get('host', '')}:{params.get('port', '')}"
        f"/{params.get('dbname', '')}"
    )
    return PgTarget(
        conn_id=f"inline {display}",
        conninfo=make_conninfo("", **params),
        display=display,
        password=str(password) if password is not None else None,
    )
