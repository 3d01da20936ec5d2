"""The durable recorder: batches reach the store; a store that is down costs an outbox file;
delivery later gives exactly the rows an undisturbed run gives; secrets and size are bounded."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from airflow_plugin.events import Event, emit, recording
from airflow_plugin.events.outbox import Outbox
from airflow_plugin.events.store import EventStore
from airflow_plugin.events.writer import StoreRecorder


def events(n: int, execution_id: str = "42") -> list[Event]:
    return [
        Event(
            name="LoopIterationCompleted",
            entity="loop",
            entity_id=f"loop#{i}",
            status="success",
            execution_id=execution_id,
            step="loop",
            iteration=i,
            data={"result": {"i": i}},
        )
        for i in range(n)
    ]


def record_all(recorder: StoreRecorder, batch: list[Event]) -> None:
    with recording(recorder, dag_id="d", run_id="r", task_id="t", map_index=-1, try_number=1):
        for event in batch:
            emit(event)


def test_flush_stores_every_event_once_in_order(event_store, tmp_path):
    recorder = StoreRecorder(event_store, Outbox(tmp_path / "outbox"))
    record_all(recorder, events(500))
    assert recorder.flush(30) is True
    rows = event_store.events(42)
    assert [r["iteration"] for r in rows] == list(range(500))
    assert len({r["event_id"] for r in rows}) == 500
    assert Outbox(tmp_path / "outbox").pending() == []


def test_ids_are_deterministic_across_processes_and_runs(event_store, tmp_path):
    first = StoreRecorder(event_store, Outbox(tmp_path / "a"))
    record_all(first, events(20))
    first.flush(30)
    # The same transitions told again (a re-delivery, a second reporter): nothing new stored.
    second = StoreRecorder(event_store, Outbox(tmp_path / "b"))
    record_all(second, events(20))
    second.flush(30)
    assert len(event_store.events(42)) == 20


def test_store_down_spills_to_the_outbox_and_delivery_matches_an_undisturbed_run(
    event_store, tmp_path
):
    # The undisturbed run, into its own store.
    reference = EventStore(str(tmp_path / "reference.db"))
    ok = StoreRecorder(reference, Outbox(tmp_path / "ref-outbox"))
    record_all(ok, events(300))
    assert ok.flush(30)
    expected = [r["event_id"] for r in reference.events(42)]

    # The same events while the store is unreachable: nothing blocks, all of it is spilled.
    outbox = Outbox(tmp_path / "outbox")
    down = StoreRecorder(EventStore("postgresql://nobody@127.0.0.1:1/none"), outbox)
    started = time.monotonic()
    record_all(down, events(300))
    assert down.flush(30) is True  # every event is settled: in the outbox
    assert time.monotonic() - started < 15
    assert outbox.count() == 300 and down.spilled == 300

    # The store is back: delivery gives exactly the reference ids, and twice changes nothing.
    assert outbox.deliver(event_store.append) == 300
    assert outbox.pending() == []
    assert [r["event_id"] for r in event_store.events(42)] == expected
    again = Outbox(tmp_path / "again")
    again.put(reference.events(42))
    again.deliver(event_store.append)
    assert len(event_store.events(42)) == 300


def test_a_recovered_store_also_receives_what_waited_in_the_outbox(event_store, tmp_path):
    outbox = Outbox(tmp_path / "outbox")
    waiting = StoreRecorder(EventStore("postgresql://nobody@127.0.0.1:1/none"), outbox)
    record_all(waiting, events(10))
    waiting.flush(30)
    assert outbox.count() == 10
    # A later process whose store works delivers the outbox with its first batch.
    later = StoreRecorder(event_store, outbox)
    record_all(later, events(15, execution_id="43"))
    assert later.flush(30)
    deadline = time.monotonic() + 10
    while outbox.pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(event_store.events(42)) == 10 and len(event_store.events(43)) == 15


def test_an_unreadable_outbox_file_is_kept_aside_never_deleted(event_store, tmp_path):
    outbox = Outbox(tmp_path / "outbox")
    outbox.directory.mkdir()
    broken = outbox.directory / "20260101T000000000000-1-deadbeef.jsonl"
    broken.write_text('{"event_id": "x"\n')
    assert outbox.deliver(event_store.append) == 0
    assert not broken.exists() and broken.with_suffix(".bad").read_text() == '{"event_id": "x"\n'


def test_secrets_are_redacted_before_queueing(event_store, tmp_path):
    from airflow.sdk.log import mask_secret

    mask_secret("registered-masked-value-123")
    outbox = Outbox(tmp_path / "outbox")
    recorder = StoreRecorder(EventStore("postgresql://nobody@127.0.0.1:1/none"), outbox)
    data = {
        "password": "hunter2-password",
        "headers": {"Authorization": "Bearer abc.def.ghi", "X-Api-Key": "key-123456"},
        "url": "postgresql://app:pg-secret-pw@db:5432/app",
        "dsn": "host=db user=app",
        "jdbc": "jdbc:postgresql://db/app?user=app&password=jdbc-secret",
        "note": "value registered-masked-value-123 inside text",
        "client_secret": {"nested": "deep-secret"},
        "rows": [{"token": "tok-987654"}],
    }
    record_all(recorder, [Event("ToolCompleted", "tool", "t", "success", "42", data=data)])
    recorder.flush(30)
    text = "".join(p.read_text() for p in outbox.pending())
    for secret in (
        "hunter2-password",
        "abc.def.ghi",
        "key-123456",
        "pg-secret-pw",
        "jdbc-secret",
        "registered-masked-value-123",
        "deep-secret",
        "tok-987654",
    ):
        assert secret not in text
    stored = json.loads(text.splitlines()[0])["data"]
    assert stored["url"] == "postgresql://app:***@db:5432/app"
    assert stored["dsn"] == "***"  # a secret-looking key hides its whole value
    assert stored["note"] == "value *** inside text"


def test_large_payloads_are_truncated_with_size_and_digest(event_store, tmp_path):
    recorder = StoreRecorder(event_store, Outbox(tmp_path / "outbox"), max_data_bytes=1000)
    big = {"blob": "x" * 5000}
    record_all(recorder, [Event("ToolCompleted", "tool", "t", "success", "42", data=big)])
    recorder.flush(30)
    (row,) = event_store.events(42)
    encoded = json.dumps(big, separators=(",", ":"), sort_keys=True).encode()
    assert row["data"]["truncated"] is True
    assert row["data"]["size"] == len(encoded)
    assert row["data"]["sha256"] == hashlib.sha256(encoded).hexdigest()
    assert len(row["data"]["preview"]) == 512
    assert "provenance" not in row["data"]


def test_a_truncated_payload_keeps_its_provenance(event_store, tmp_path):
    # A quantum call's counts can be wide; its provenance is what reproduces the call.
    recorder = StoreRecorder(event_store, Outbox(tmp_path / "outbox"), max_data_bytes=1000)
    provenance = {"provider": "aer", "seed_simulator": 7, "job_id": "j1"}
    counts = {format(i, "012b"): 1 for i in range(200)}
    data = {"kind": "quantum", "result": {"counts": counts}, "provenance": provenance}
    huge = {"kind": "quantum", "result": {}, "provenance": {"blob": "x" * 1200}}
    record_all(
        recorder,
        [
            Event("ToolCompleted", "tool", "t", "success", "43", data=data),
            Event("ToolCompleted", "tool", "u", "success", "43", data=huge),
        ],
    )
    recorder.flush(30)
    wide, too_big = event_store.events(43)
    assert wide["data"]["truncated"] is True and wide["data"]["provenance"] == provenance
    assert too_big["data"]["truncated"] is True and "provenance" not in too_big["data"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork-only platform feature")
def test_a_forked_child_records_with_its_own_thread_and_connection(event_store, tmp_path):
    recorder = StoreRecorder(event_store, Outbox(tmp_path / "outbox"))
    record_all(recorder, events(5))
    assert recorder.flush(30)
    pid = os.fork()
    if pid == 0:  # the child: what an Airflow task runner is to its supervisor
        try:
            record_all(recorder, events(5, execution_id="77"))
            os._exit(0 if recorder.flush(30) else 3)
        except BaseException:  # noqa: BLE001 - a forked child must never return into pytest
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(event_store.events(77)) == 5
    record_all(recorder, events(3, execution_id="78"))  # the parent still works too
    assert recorder.flush(30) and len(event_store.events(78)) == 3


def test_event_ids_are_uuid5_of_their_parts():
    """``event_id`` forms the uuid5 from a copied SHA-1 state (every event of every loop item
    takes one): the ids stay exactly ``uuid.uuid5`` of the parts, so ids stored before match."""
    import uuid

    from airflow_plugin.events.identity import EVENT_NAMESPACE, event_id

    cases = [(), (None,), ("",), ("1", "d", None, 3, "ünï", "a\x1fb"), tuple(range(40))]
    for parts in cases:
        key = "\x1f".join("\x00" if part is None else str(part) for part in parts)
        assert event_id(*parts) == str(uuid.uuid5(EVENT_NAMESPACE, key))
    assert event_id(None) != event_id("")


def test_a_row_is_encoded_once_and_its_line_is_the_row():
    """The journal, the outbox and COPY write the line ``event_row`` made: it reads back as
    the row itself (the redacted data included), and a read-back dict encodes the same."""
    from airflow_plugin.events.journal import encode_row
    from airflow_plugin.events.writer import event_row

    event = Event(
        name="ToolCompleted",
        entity="tool",
        entity_id="s#1",
        status="success",
        execution_id="12",
        data={"result": {"password": "hunter2", "n": 1.5, "text": 'a"b\\c\n'}},
        dag_id="d",
    )
    row = event_row(event, 65536)
    assert row["data"] == {"result": {"password": "***", "n": 1.5, "text": 'a"b\\c\n'}}
    line = encode_row(row)
    assert line.endswith(b"\n") and b"hunter2" not in line
    assert json.loads(line) == dict(row)
    assert json.loads(encode_row(dict(row))) == dict(row)


def test_a_row_line_is_byte_for_byte_what_json_dumps_gives():
    """The writer encodes through one C encoder made once (not ``json.dumps`` per call): the
    bytes stay exactly ``json.dumps``' compact form, for the values that differ between JSON
    encoders too (non-ASCII text, control characters, non-string keys, floats, objects that
    go through ``str``), and an event without data gets ``{}``."""
    import datetime as dt

    from airflow_plugin.events.writer import event_row

    data = {
        "text": 'ünï \u2028 \t "q" \\',
        3: [1, 2.5, 1e300, -0.0, None, True],
        "when": dt.date(2026, 1, 2),
    }
    for payload in (data, {}):
        event = Event(
            name="ToolCompleted", entity="tool", entity_id="s#1", status="success",
            execution_id="12", data=payload, duration=0.1 + 0.2,
        )  # fmt: skip
        row = event_row(event, 65536)
        expected = json.dumps(dict(row), separators=(",", ":"), default=str) + "\n"
        assert row.line == expected.encode()
    assert row["data"] == {} and row.line.endswith(b',"data":{}}\n')


def test_the_writer_thread_stores_a_batch_per_wake_not_a_row(event_store, tmp_path):
    """Rows recorded 2 ms apart (a loop's items) wake the writer thread once per batch:
    the first row wakes it, it lets the batch gather (``LINGER``), and stores it in a few
    statements, not one per row; and it stores them without waiting for a flush."""
    from airflow_plugin.events.writer import LINGER

    batches: list[int] = []
    store_append = event_store.append

    def counted(rows):
        # Counted once stored: the reads below must find every counted row committed.
        store_append(rows)
        batches.append(len(rows))

    event_store.append = counted
    recorder = StoreRecorder(event_store, Outbox(tmp_path / "outbox"))
    record_all(recorder, events(1, execution_id="41"))  # connected, the outbox looked at
    assert recorder.flush(30)
    batches.clear()
    with recording(recorder, dag_id="d", run_id="r", task_id="t", map_index=-1, try_number=1):
        for event in events(40):
            emit(event)
            time.sleep(0.002)
    deadline = time.monotonic() + 10 * LINGER + 5
    while sum(batches) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sum(batches) == 40, f"stored without a flush: {batches}"
    assert len(batches) <= 4, batches
    assert [r["iteration"] for r in event_store.events(42)] == list(range(40))
    assert recorder.flush(30)
