"""The event store: one table (``schema``) on Postgres or SQLite, through SQLAlchemy Core.

``EventStore(url)`` works in any process: the engine is made on first use and again after a
fork (a pooled connection must never cross a fork), and the schema is migrated to the newest
revision on first use (alembic, under a lock so concurrent task processes migrate once).

* :meth:`append` inserts rows ignoring duplicate ``event_id`` s, so re-delivering a batch (the
  outbox, a retried flush, the same transition told by worker and scheduler) never adds a row.
  Postgres gets large batches through ``COPY`` into a temporary table and one
  ``INSERT .. SELECT .. ON CONFLICT DO NOTHING`` (the COPY path is what makes tens of thousands
  of events per second possible); small batches and SQLite use a multi-row ``INSERT``.
* :meth:`events` reads an execution (or a DAG run) in ``seq`` order, the order of insertion.

URLs: a SQLAlchemy URL, a libpq URL (``postgresql://``, ``postgres://``: psycopg 3 is used, or
psycopg2 where the installed SQLAlchemy has no psycopg 3 dialect: 1.4, under Airflow 3.0), a libpq
``key=value`` DSN, or a file path (SQLite). ``COPY`` needs psycopg 3; through psycopg2 every
batch is a multi-row ``INSERT``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..compat import postgres_driver
from ..errors import NoetlFailure
from .journal import encode_row
from .schema import COLUMNS, SCHEMA, TABLE, event_log

__all__ = ["HEAD_REVISION", "EventStore", "StoreUnavailable", "normalise_url"]

log = logging.getLogger(__name__)

HEAD_REVISION = "0001"  # the newest file in migrations/versions (a test keeps them equal)
VERSION_TABLE = "event_log_version"
COPY_THRESHOLD = 64  # rows; below it a multi-row INSERT is cheaper than COPY + INSERT..SELECT
CONNECT_TIMEOUT = 3  # seconds: an unreachable store must not hold a flush for long


class StoreUnavailable(NoetlFailure):
    """The store could not be reached or written (the caller keeps the events elsewhere)."""


def normalise_url(url: str) -> str:
    """A SQLAlchemy URL for what a user may write as the event-log location."""
    text = url.strip()
    if text.startswith(("postgresql://", "postgres://")):
        return f"{postgres_driver()}://" + text.split("://", 1)[1]
    if "://" in text:
        return text
    if "=" in text and " " in text or text.startswith(("host=", "dbname=", "user=")):
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(text)
        query = {k: str(v) for k, v in parts.items() if k not in _URL_PARTS}
        return sa.engine.URL.create(
            postgres_driver(),
            username=parts.get("user"),
            password=parts.get("password"),
            host=parts.get("host"),
            port=int(parts["port"]) if parts.get("port") else None,
            database=parts.get("dbname"),
            query=query,
        ).render_as_string(hide_password=False)
    return f"sqlite:///{Path(text).expanduser().resolve()}"


_URL_PARTS = ("user", "password", "host", "port", "dbname")


class EventStore:
    def __init__(self, url: str) -> None:
        self.url = normalise_url(url)
        self.dialect = sa.engine.make_url(self.url).get_backend_name()
        # COPY through the driver's connection is psycopg 3's API (``cursor.copy``).
        self._copies = sa.engine.make_url(self.url).get_driver_name() == "psycopg"
        self._engine: sa.Engine | None = None
        self._pid = 0
        self._migrated = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"EventStore({self.describe()})"

    def describe(self) -> str:
        """Where the events are, password hidden (for messages and `noetlc run`)."""
        url = sa.engine.make_url(self.url)
        if self.dialect == "sqlite":
            return f"sqlite {url.database}"
        return url.render_as_string(hide_password=True)

    # -- connection ---------------------------------------------------------------------------

    @property
    def engine(self) -> sa.Engine:
        with self._lock:
            if self._engine is not None and self._pid != os.getpid():
                # A forked child: the parent's pooled connections are not ours to use or close.
                self._engine.dispose(close=False)
                self._engine = None
            if self._engine is None:
                self._engine = self._create_engine()
                self._pid = os.getpid()
            return self._engine

    def _create_engine(self) -> sa.Engine:
        if self.dialect == "sqlite":
            path = sa.engine.make_url(self.url).database
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            engine = sa.create_engine(
                self.url,
                connect_args={"timeout": 10},
                execution_options={"schema_translate_map": {SCHEMA: None}},
            )
            sa.event.listen(engine, "connect", _sqlite_pragmas)
            return engine
        return sa.create_engine(
            self.url,
            pool_size=2,
            max_overflow=2,
            pool_pre_ping=True,
            connect_args={"connect_timeout": CONNECT_TIMEOUT, "application_name": "noetl-events"},
        )

    def dispose(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.dispose(close=self._pid == os.getpid())
                self._engine = None

    @contextlib.contextmanager
    def _begin(self) -> Iterator[sa.Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            # Connection errors and a database gone mid-write look alike to the caller: the rows
            # are not stored; the message (never a password: SQLAlchemy hides it) says why.
            raise StoreUnavailable(f"{self.describe()}: {_reason(exc)}") from exc

    # -- schema -------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the schema to :data:`HEAD_REVISION` (once per process; cheap when current)."""
        if self._migrated:
            return
        if self.current_revision() != HEAD_REVISION:
            with self._migration_lock():
                if self.current_revision() != HEAD_REVISION:
                    self._upgrade()
        self._migrated = True

    def current_revision(self) -> str | None:
        # One query, as every task process asks once: a missing table is a database error,
        # told apart from an unreachable server by trying the connection first.
        table = VERSION_TABLE if self.dialect == "sqlite" else f"{SCHEMA}.{VERSION_TABLE}"
        try:
            with self.engine.connect() as conn:
                try:
                    return conn.execute(sa.text(f"SELECT version_num FROM {table}")).scalar()
                except (sa.exc.ProgrammingError, sa.exc.OperationalError) as exc:
                    if _is_missing_table(exc):
                        return None
                    raise
        except sa.exc.SQLAlchemyError as exc:
            raise StoreUnavailable(f"{self.describe()}: {_reason(exc)}") from exc

    @contextlib.contextmanager
    def _migration_lock(self) -> Iterator[None]:
        if self.dialect == "postgresql":
            with self._begin() as conn:
                # Held for the transaction; every other migrating process waits here.
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(726354819)"))
                yield
            return
        path = sa.engine.make_url(self.url).database or ""
        if not path or path == ":memory:":
            yield
            return
        with open(f"{path}.migrate.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def _upgrade(self) -> None:
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
        with self._begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
        log.info("event log at %s migrated to revision %s", self.describe(), HEAD_REVISION)

    # -- writing ------------------------------------------------------------------------------

    def append(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Store ``rows`` (dicts of :data:`schema.COLUMNS`), ignoring ids already stored; all
        or nothing. Raises :class:`StoreUnavailable` when they could not be stored."""
        if not rows:
            return
        self.migrate()
        with self._begin() as conn:
            if self._copies and len(rows) >= COPY_THRESHOLD:
                _copy_insert(conn, rows)
            else:
                conn.execute(_insert_ignoring(self.dialect), [_db_row(row) for row in rows])

    # -- reading ------------------------------------------------------------------------------

    def events(
        self,
        execution_id: int | None = None,
        *,
        dag_id: str | None = None,
        run_id: str | None = None,
        names: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Events of an execution (or of a DAG run) in the order they were stored."""
        self.migrate()
        query = sa.select(event_log).order_by(event_log.c.seq)
        if execution_id is not None:
            query = query.where(event_log.c.execution_id == int(execution_id))
        if dag_id is not None:
            query = query.where(event_log.c.dag_id == dag_id)
        if run_id is not None:
            query = query.where(event_log.c.run_id == run_id)
        if names is not None:
            query = query.where(event_log.c.name.in_(list(names)))
        with self._begin() as conn:
            return [_read_row(row._mapping) for row in conn.execute(query)]

    def executions(self, limit: int = 20) -> list[dict[str, Any]]:
        """The latest executions: id, dag and run, first and last event time, event count."""
        self.migrate()
        c = event_log.c
        query = (
            sa.select(
                c.execution_id,
                sa.func.min(c.dag_id).label("dag_id"),
                sa.func.min(c.run_id).label("run_id"),
                sa.func.min(c.timestamp).label("started"),
                sa.func.max(c.timestamp).label("last"),
                sa.func.count().label("events"),
                sa.func.max(c.seq).label("last_seq"),
            )
            .group_by(c.execution_id)
            .order_by(sa.desc("last_seq"))
            .limit(limit)
        )
        with self._begin() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def count(self) -> int:
        self.migrate()
        with self._begin() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(event_log)).scalar())


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL: readers never block the task processes that append; busy_timeout: concurrent
    # writers (one per task process) wait for each other instead of failing.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def _insert_ignoring(dialect: str) -> Any:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        raise StoreUnavailable(f"event log on {dialect!r} is not supported (postgresql, sqlite)")
    return insert(event_log).on_conflict_do_nothing(index_elements=["event_id"])


def _copy_insert(conn: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """COPY the rows' encoded lines into a temporary table, then move the new ones over in one
    statement that reads each line's fields as the table's columns (``jsonb_populate_record``).

    A row written by this process carries its line already (``writer.Row``: encoded once,
    where it was made, and the same bytes went to the journal); the batch is then one
    ``write`` of those lines and Postgres, not Python, splits them into columns. Per row that
    took the writer ~40 us of Python (a list per row, the data encoded again, COPY's escaping)."""
    raw = conn.connection.dbapi_connection
    columns = ", ".join(COLUMNS)
    fields = ", ".join(
        "COALESCE(r.data, '{}'::jsonb)" if name == "data" else f"r.{name}" for name in COLUMNS
    )
    with raw.cursor() as cursor:
        # The row's place in the batch goes with it, so the insert below assigns ``seq`` in
        # the order of emission.
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS _noetl_event_lines (ord integer, line jsonb) "
            "ON COMMIT DELETE ROWS"
        )
        with cursor.copy("COPY _noetl_event_lines (ord, line) FROM STDIN") as copy:
            # COPY's text format: a tab between the columns, a line per row (the encoded line
            # ends with one), backslash its escape. Compact JSON has no tab or newline of its
            # own (json escapes them), so doubling the backslashes is all the quoting it needs.
            copy.write(
                b"".join(
                    b"%d\t%s" % (ord_, encode_row(row).replace(b"\\", b"\\\\"))
                    for ord_, row in enumerate(rows)
                )
            )
        ids = {row.get("event_id") for row in rows}
        if len(ids) == len(rows):
            source = "_noetl_event_lines"
        else:
            # A batch may itself hold one id twice (a re-delivered file); keep the first.
            source = (
                "(SELECT DISTINCT ON (line->>'event_id') * FROM _noetl_event_lines "
                "ORDER BY line->>'event_id', ord)"
            )
        cursor.execute(
            f"INSERT INTO {SCHEMA}.{TABLE} ({columns}) SELECT {fields} FROM {source} AS s, "
            f"jsonb_populate_record(NULL::{SCHEMA}.{TABLE}, s.line) AS r "
            f"ORDER BY s.ord ON CONFLICT (event_id) DO NOTHING"
        )


def _db_row(row: Mapping[str, Any]) -> dict[str, Any]:
    out = {name: row.get(name) for name in COLUMNS}
    stamp = out["timestamp"]
    if isinstance(stamp, str):
        out["timestamp"] = _dt.datetime.fromisoformat(stamp)
    if out["data"] is None:
        out["data"] = {}
    return out


def _read_row(row: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(row)
    stamp = out.get("timestamp")
    if isinstance(stamp, _dt.datetime):
        if stamp.tzinfo is None:  # SQLite keeps no zone; everything is written in UTC
            stamp = stamp.replace(tzinfo=_dt.UTC)
        out["timestamp"] = stamp.isoformat()
    return out


def _is_missing_table(exc: BaseException) -> bool:
    original = getattr(exc, "orig", None)
    # Postgres: undefined_table (42P01) or invalid_schema_name (3F000) (psycopg 3 calls the code
    # sqlstate, psycopg2 pgcode); SQLite: "no such table".
    code = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    if code in ("42P01", "3F000"):
        return True
    return "no such table" in str(original or exc)


def _reason(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip().splitlines()
    return f"{type(original).__name__}: {text[0] if text else ''}".rstrip(": ")
