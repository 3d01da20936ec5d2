"""Where the event log lives, from the environment (the same in every Airflow process).

| variable | meaning | default |
|---|---|---|
| ``NOETL_EVENTS`` | ``off`` (or 0/false/no) disables the event log | on |
| ``NOETL_EVENTS_URL`` | the store: SQLAlchemy/libpq URL, ``key=value`` DSN or SQLite path | SQLite file ``<dir>/events.db`` |
| ``NOETL_EVENTS_CONN_ID`` | an Airflow Connection holding the store (used when no URL is set) | - |
| ``NOETL_EVENTS_DIR`` | folder of the default SQLite file and of the outbox (with the processes' journals) | ``$AIRFLOW_HOME/noetl`` |
| ``NOETL_EVENTS_MAX_DATA`` | bytes of ``data`` kept per event before it is truncated | 65536 |
| ``NOETL_EVENTS_FLUSH_TIMEOUT`` | seconds a task end waits for its events to be stored | 2 |

Never Airflow's metadata DB: Airflow 3 task processes may not touch it, and the event log must
not compete with the scheduler for it. A dedicated Postgres (or database) is the production
setting; the SQLite default keeps a single-machine install working with nothing configured.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..hooks.connections import get_connection
from ..hooks.state import state_directory

__all__ = ["EventLogSettings", "settings"]


@dataclass(frozen=True)
class EventLogSettings:
    enabled: bool
    url: str
    directory: Path
    max_data_bytes: int
    flush_timeout: float

    @property
    def outbox(self) -> Path:
        return self.directory / "outbox"


def settings(environ: Mapping[str, str] | None = None) -> EventLogSettings:
    env = os.environ if environ is None else environ
    enabled = env.get("NOETL_EVENTS", "on").strip().lower() not in ("off", "0", "false", "no")
    directory = state_directory(env)
    url = env.get("NOETL_EVENTS_URL", "").strip()
    if not url and env.get("NOETL_EVENTS_CONN_ID"):
        url = _connection_url(env["NOETL_EVENTS_CONN_ID"])
    return EventLogSettings(
        enabled=enabled,
        url=url or str(directory / "events.db"),
        directory=directory,
        max_data_bytes=_number(env, "NOETL_EVENTS_MAX_DATA", 65536, int),
        flush_timeout=_number(env, "NOETL_EVENTS_FLUSH_TIMEOUT", 2.0, float),
    )


def _number(env: Mapping[str, str], name: str, default, kind):
    raw = env.get(name)
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


def _connection_url(conn_id: str) -> str:
    """The URL of an Airflow Connection (resolved through Airflow, env vars included)."""
    from sqlalchemy.engine import URL

    from ..compat import postgres_driver

    info = get_connection(conn_id)
    return URL.create(
        postgres_driver(),
        username=info.login,
        password=info.password,
        host=info.host,
        port=info.port,
        database=info.schema,
    ).render_as_string(hide_password=False)
