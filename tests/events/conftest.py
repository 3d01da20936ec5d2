"""Event-log fixtures: the same tests against the SQLite default and a real Postgres server.

``event_store`` is parametrised over both backends (a fresh SQLite file; a fresh database in
the session's throwaway Postgres cluster); ``event_log`` installs a StoreRecorder over it as the
process default for one test (what the runtime and the listener write to) and restores the
previous default after.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_plugin.events import set_default_recorder
from airflow_plugin.events.outbox import Outbox
from airflow_plugin.events.store import EventStore
from airflow_plugin.events.writer import StoreRecorder


def make_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> EventStore:
    if backend == "sqlite":
        return EventStore(str(tmp_path / f"events-{uuid.uuid4().hex[:6]}.db"))
    cluster = request.getfixturevalue("pg_cluster")
    return EventStore(cluster.create_database(f"events_{uuid.uuid4().hex[:10]}"))


@pytest.fixture(params=["sqlite", "postgres"])
def event_store(request, tmp_path) -> Iterator[EventStore]:
    store = make_store(request.param, tmp_path, request)
    yield store
    store.dispose()


@dataclass
class EventLog:
    store: EventStore
    outbox: Outbox
    recorder: StoreRecorder

    def rows(self, execution_id: int | None = None, **filters) -> list[dict]:
        assert self.recorder.flush(30), "events did not reach the store"
        return self.store.events(execution_id, **filters)


@pytest.fixture
def event_log(event_store, tmp_path) -> Iterator[EventLog]:
    outbox = Outbox(tmp_path / "outbox")
    recorder = StoreRecorder(event_store, outbox, flush_timeout=30)
    previous = set_default_recorder(recorder)
    try:
        yield EventLog(event_store, outbox, recorder)
    finally:
        recorder.flush(30)
        set_default_recorder(previous)
