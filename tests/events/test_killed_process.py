"""A process killed with SIGKILL loses no event: what its writer had not stored yet is in its
journal, and the next delivery (here ``noetlc events flush``) stores exactly those events once.

The emitting process (``killed_emitter``) runs the real StoreRecorder against the real store
(SQLite file, or Postgres from the test harness) while this test holds the store's write lock,
so its writer thread is stuck in its first insert when the process kills itself: nothing of it
can have reached the store, and without the journal every event is gone (the control case).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from airflow_plugin.events.outbox import Outbox
from airflow_plugin.events.store import EventStore
from noetl_compile.cli import main

ROOT = Path(__file__).resolve().parents[2]
EMITTER = Path(__file__).with_name("killed_emitter.py")
EXECUTION = 4242
SECRET = "kill-me-not-s3cr3t"
COUNT = 120


@contextlib.contextmanager
def writes_blocked(store: EventStore) -> Iterator[None]:
    """Hold the store's write lock: inserts of other processes wait until the block ends."""
    url = sa.engine.make_url(store.url)
    if store.dialect == "sqlite":
        conn = sqlite3.connect(url.database, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    import psycopg

    libpq = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(libpq) as conn:
        conn.execute("LOCK TABLE noetl.event_log IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


def kill_emitter(store: EventStore, outbox: Path, *, journaled: bool) -> list[str]:
    """Run the emitter while the store refuses writes; it SIGKILLs itself. Returns its ids."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with writes_blocked(store):
        done = subprocess.run(
            [sys.executable, str(EMITTER), store.url, str(outbox), str(COUNT)]
            + ["1" if journaled else "0", SECRET],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert done.returncode == -signal.SIGKILL, done.stderr
    ids = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(ids) == len(set(ids)) == COUNT
    return ids


def flush_cli(store: EventStore, events_dir: Path, monkeypatch, capsys) -> str:
    monkeypatch.setenv("NOETL_EVENTS_DIR", str(events_dir))
    capsys.readouterr()
    assert main(["events", "flush", "--url", store.url]) == 0
    return capsys.readouterr().out


def stored_ids(store: EventStore) -> list[str]:
    return [row["event_id"] for row in store.events(EXECUTION)]


def test_events_of_a_sigkilled_process_are_delivered_once(
    event_store, tmp_path, monkeypatch, capsys
):
    event_store.migrate()
    outbox = tmp_path / "outbox"  # what settings() gives for NOETL_EVENTS_DIR=tmp_path
    ids = kill_emitter(event_store, outbox, journaled=True)

    # Nothing reached the store; the dead process's journal holds every event, redacted.
    assert stored_ids(event_store) == []
    journals = list((outbox / "journal").glob("*.jsonl"))
    assert len(journals) == 1, journals
    text = journals[0].read_text()
    assert SECRET not in text and text.count("\n") == COUNT
    assert Outbox(outbox).count() == COUNT

    out = flush_cli(event_store, tmp_path, monkeypatch, capsys)
    assert f"delivered {COUNT} of {COUNT} waiting event(s)" in out, out
    stored = stored_ids(event_store)
    assert sorted(stored) == sorted(ids) and len(stored) == COUNT
    # In the order they were emitted, and no secret in any stored row.
    assert stored == ids
    assert SECRET not in json.dumps(event_store.events(EXECUTION), default=str)
    assert list((outbox / "journal").glob("*.jsonl")) == []
    assert Outbox(outbox).count() == 0

    # A second flush finds nothing; the store still has one row per event.
    out = flush_cli(event_store, tmp_path, monkeypatch, capsys)
    assert "delivered 0 of 0 waiting event(s)" in out, out
    assert len(stored_ids(event_store)) == COUNT


@pytest.mark.parametrize("event_store", ["sqlite"], indirect=True)
def test_without_the_journal_a_sigkilled_process_loses_its_events(
    event_store, tmp_path, monkeypatch, capsys
):
    # The control: the same kill with the journal off loses every event, so the test above
    # proves the journal, not a lucky timing.
    event_store.migrate()
    kill_emitter(event_store, tmp_path / "outbox", journaled=False)
    out = flush_cli(event_store, tmp_path, monkeypatch, capsys)
    assert "delivered 0 of 0 waiting event(s)" in out, out
    assert stored_ids(event_store) == []


def test_a_living_writers_journal_is_left_alone(event_store, tmp_path):
    # Delivery adopts only journals whose owner is dead: this process's own (locked) journal
    # is not touched, however many processes deliver meanwhile.
    from airflow_plugin.events import Event, emit, recording
    from airflow_plugin.events.writer import StoreRecorder

    outbox = Outbox(tmp_path / "outbox")
    recorder = StoreRecorder(event_store, outbox, flush_timeout=30)
    event_store.migrate()
    with writes_blocked(event_store), recording(recorder, dag_id="d", run_id="r", task_id="t"):
        for i in range(5):
            emit(Event("StepStarted", "step", f"s{i}", "in_progress", execution_id=str(EXECUTION)))
        journal = recorder.journal.path
        assert journal is not None and journal.read_text().count("\n") == 5
        assert outbox.count() == 0  # its owner is alive: not waiting on anyone
        assert outbox.deliver(lambda rows: None) == 0
        assert journal.exists()
    assert recorder.flush(30)
    assert len(stored_ids(event_store)) == 5
    # Everything stored: the journal is empty again.
    assert journal.read_text() == ""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork-only platform feature")
def test_a_forked_child_killed_keeps_its_events_in_a_journal_of_its_own(event_store, tmp_path):
    # A task runner is forked from its supervisor: the child must not write into the parent's
    # journal (whose lock the parent holds until it dies, so the child's events could not be
    # adopted while the parent lives).
    from airflow_plugin.events import Event, emit, recording
    from airflow_plugin.events.writer import StoreRecorder

    outbox = Outbox(tmp_path / "outbox")
    recorder = StoreRecorder(event_store, outbox, flush_timeout=30)
    event_store.migrate()
    with recording(recorder, dag_id="d", run_id="r", task_id="parent"):
        emit(Event("StepStarted", "step", "p", "in_progress", execution_id=str(EXECUTION)))
    assert recorder.flush(30)
    parent_journal = recorder.journal.path
    with writes_blocked(event_store):
        pid = os.fork()
        if pid == 0:  # the child: record, then die without a word
            try:
                with recording(recorder, dag_id="d", run_id="r", task_id="child"):
                    for i in range(7):
                        emit(
                            Event("StepStarted", "step", f"c{i}", "in_progress", execution_id="77")
                        )
            finally:
                os.kill(os.getpid(), signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL
    journals = sorted((outbox.journals).glob("*.jsonl"))
    assert parent_journal in journals and len(journals) == 2, journals
    assert outbox.count() == 7  # the child's journal; the parent's is alive
    assert outbox.deliver(event_store.append) == 7
    assert len(event_store.events(77)) == 7
    assert sorted(outbox.journals.glob("*.jsonl")) == [parent_journal]
    with recording(recorder, dag_id="d", run_id="r", task_id="parent"):
        emit(Event("StepFinished", "step", "p", "success", execution_id=str(EXECUTION)))
    assert recorder.flush(30) and len(stored_ids(event_store)) == 2


def test_a_line_cut_short_by_the_kill_is_dropped_and_the_rest_delivered(event_store, tmp_path):
    # A process killed inside its journal write leaves a last line without its newline: that
    # event never reached its queue (emit had not returned); every whole line is delivered.
    from airflow_plugin.events.journal import encode_row

    outbox = Outbox(tmp_path / "outbox")
    rows = [
        {"event_id": f"00000000-0000-0000-0000-00000000000{i}", "execution_id": EXECUTION}
        | {"timestamp": "2026-01-01T00:00:00+00:00", "source": "worker", "name": "StepStarted"}
        | {"entity": "step", "entity_id": f"s{i}", "status": "in_progress", "data": {}}
        for i in range(3)
    ]
    outbox.journals.mkdir(parents=True)
    whole = b"".join(encode_row(row) for row in rows[:2])
    (outbox.journals / "999999-deadbeef.jsonl").write_bytes(whole + encode_row(rows[2])[:25])
    assert outbox.count() == 3  # lines on disk, the cut one included
    assert outbox.deliver(event_store.append) == 2
    assert stored_ids(event_store) == [rows[0]["event_id"], rows[1]["event_id"]]
    assert list(outbox.journals.iterdir()) == []


def test_the_journal_write_reports_what_the_kernel_refuses(tmp_path):
    """The journal's write(2) holds the GIL (ctypes.PyDLL) instead of going through os.write;
    it must still write whole lines and raise errors as os.write would."""
    import errno

    from airflow_plugin.events import journal

    fd = os.open(tmp_path / "lines", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        assert journal._write(fd, b'{"n":1}\n') == 8
        assert journal._write(fd, b'{"n":2}\n') == 8
    finally:
        os.close(fd)
    assert (tmp_path / "lines").read_bytes() == b'{"n":1}\n{"n":2}\n'
    with pytest.raises(OSError) as closed:
        journal._write(fd, b"x\n")
    assert closed.value.errno == errno.EBADF
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        with pytest.raises(OSError) as no_space:
            journal._write(full, b"x\n")
        assert no_space.value.errno == errno.ENOSPC
    finally:
        os.close(full)
