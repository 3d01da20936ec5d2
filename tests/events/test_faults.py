"""Faults against a real Postgres store, and on the SQLite default where they apply.

* Postgres stopped (``pg_ctl stop``) in the middle of a 200-item loop: the run still succeeds,
  the events wait in the outbox; Postgres started again and ``noetlc events flush`` run: the
  store holds exactly the event ids and count of an undisturbed run of the same DAG run, with
  no duplicates.
* The outbox alone (the store directory unwritable, SQLite): the same.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import threading
import time
from pathlib import Path

import pytest

from airflow_plugin.events import set_default_recorder
from airflow_plugin.events.outbox import Outbox
from airflow_plugin.events.store import EventStore
from airflow_plugin.events.writer import StoreRecorder
from airflow_plugin.templating.ids import execution_id_for
from noetl_compile.cli import main

ROOT = Path(__file__).resolve().parents[2]
LOGICAL_DATE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)  # one run id for both runs


def load_loop_dag(airflow_db: Path, tmp_path: Path):
    out = tmp_path / "dags"
    assert main(["compile", str(ROOT / "playbooks" / "large_loop.yaml"), "-o", str(out)]) == 0
    source = (out / "large_loop.py").read_text()
    path = airflow_db / "examples.large_loop.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("noetlc_fault_large_loop", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def run_into(dag, recorder: StoreRecorder) -> str:
    previous = set_default_recorder(recorder)
    try:
        run = dag.test(logical_date=LOGICAL_DATE, run_after=LOGICAL_DATE, run_conf={"count": 200})
        recorder.flush(30)
    finally:
        set_default_recorder(previous)
    state = str(getattr(run.state, "value", run.state))
    return state, run.run_id


def test_postgres_stopped_mid_loop_loses_and_duplicates_nothing(
    pg_cluster, airflow_db, tmp_path, monkeypatch
):
    dag = load_loop_dag(airflow_db, tmp_path)
    reference = EventStore(pg_cluster.create_database("events_reference"))
    state, run_id = run_into(dag, StoreRecorder(reference, Outbox(tmp_path / "ref-outbox")))
    assert state == "success"
    execution_id = execution_id_for(dag.dag_id, run_id)
    expected = reference.events(execution_id)
    assert len(expected) > 1000  # 200 iterations, 64 mapped chunks: a real volume

    disturbed = EventStore(pg_cluster.create_database("events_disturbed"))
    outbox = Outbox(tmp_path / "noetl" / "outbox")
    recorder = StoreRecorder(disturbed, outbox)
    stopped = threading.Event()
    record, recorded = recorder.record, [0]

    def stop_midway(event) -> None:
        # In the run itself, once a third of its events were recorded and some of them stored:
        # Postgres goes down mid-run whatever the machine's speed (a thread watching the count
        # could stop it after the run, or after this test, under another one's feet).
        record(event)
        recorded[0] += 1
        if recorded[0] == len(expected) // 3:
            deadline = time.monotonic() + 60
            while recorder.stored < len(expected) // 6 and time.monotonic() < deadline:
                time.sleep(0.01)
            pg_cluster.stop()
            stopped.set()

    recorder.record = stop_midway
    try:
        state, same_run = run_into(dag, recorder)
        assert same_run == run_id
        assert stopped.is_set() and not pg_cluster.running
        assert state == "success"  # the event log being down never fails a task
        waiting = outbox.count()
        assert waiting > 0 and recorder.spilled >= waiting
    finally:
        if not pg_cluster.running:
            pg_cluster.start()
            pg_cluster.wait_ready()
    # What a user does once the store is back.
    monkeypatch.setenv("NOETL_EVENTS_DIR", str(tmp_path / "noetl"))
    assert main(["events", "flush", "--url", disturbed.url]) == 0
    assert outbox.pending() == []
    disturbed.dispose()
    stored = EventStore(disturbed.url).events(execution_id)
    assert len(stored) == len(expected)
    assert sorted(r["event_id"] for r in stored) == sorted(r["event_id"] for r in expected)


def test_sqlite_store_unwritable_mid_run_then_flushed(airflow_db, tmp_path, monkeypatch):
    dag = load_loop_dag(airflow_db, tmp_path)
    reference = EventStore(str(tmp_path / "reference.db"))
    state, run_id = run_into(dag, StoreRecorder(reference, Outbox(tmp_path / "ref-outbox")))
    assert state == "success"
    execution_id = execution_id_for(dag.dag_id, run_id)
    expected = {r["event_id"] for r in reference.events(execution_id)}

    # The default store is a file in a folder that does not exist yet and cannot be made (a
    # file stands where the folder should be): every batch fails and goes to the outbox.
    blocker = tmp_path / "store-dir"
    blocker.write_text("not a folder")
    target = EventStore(str(blocker / "events.db"))
    outbox = Outbox(tmp_path / "noetl" / "outbox")
    recorder = StoreRecorder(target, outbox)
    state, _ = run_into(dag, recorder)
    assert state == "success"
    assert outbox.count() == len(expected)
    blocker.unlink()
    monkeypatch.setenv("NOETL_EVENTS_DIR", str(tmp_path / "noetl"))
    assert main(["events", "flush", "--url", str(blocker / "events.db")]) == 0
    stored = EventStore(str(blocker / "events.db")).events(execution_id)
    assert {r["event_id"] for r in stored} == expected and len(stored) == len(expected)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_flush_twice_adds_nothing(backend, request, tmp_path, monkeypatch):
    from tests.events.conftest import make_store
    from tests.events.test_writer import events, record_all

    store = make_store(backend, tmp_path, request)
    outbox = Outbox(tmp_path / "noetl" / "outbox")
    down = StoreRecorder(EventStore("postgresql://nobody@127.0.0.1:1/none"), outbox)
    record_all(down, events(50))
    down.flush(30)
    files = [p.read_text() for p in outbox.pending()]
    monkeypatch.setenv("NOETL_EVENTS_DIR", str(tmp_path / "noetl"))
    assert main(["events", "flush", "--url", store.url]) == 0
    # The same files delivered again (a crash between insert and unlink, a second flusher).
    for n, text in enumerate(files):
        (outbox.directory / f"zz-{n}.jsonl").write_text(text)
    assert main(["events", "flush", "--url", store.url]) == 0
    assert len(store.events(42)) == 50
