"""The durable recorder: events to the store in batches, never blocking, never lost.

``StoreRecorder.record`` redacts and bounds the event, turns it into a row and puts it on a
bounded in-memory queue; it never waits on the database. A background thread (one per process,
started on first use and again after a fork) drains the queue in batches into the store. It is
woken per batch, not per row: by the first row put on an empty queue, after which it lets a
batch gather for up to ``LINGER`` s (or until ``WAKE_ROWS`` wait), so a loop's items do not pay
a thread wake-up and a one-row insert each. When the
store fails, the batch goes to the outbox (``outbox``) and for a short back-off the following
batches go there directly; the first batch stored after that also delivers the outbox. So a store
that is down costs a task nothing but a local file write, and what was written while it was down
arrives later, exactly once (ids are deterministic, inserts ignore duplicates).

Before a row is queued it is appended to this process's journal (``journal``: one unbuffered
``write``, no fsync), and the journal is emptied when everything recorded is settled, at a flush
or once it holds a megabyte. So a process killed with SIGKILL, whose queue dies with it, leaves
its unsettled events on disk; the next outbox delivery anywhere (a writer's first stored batch,
the scheduler's run end, ``noetlc events flush``) adopts them.

:meth:`flush` is called where a task ends (the listener's terminal hooks, process exit): it waits
up to its timeout for the queue to drain, then writes whatever is still queued or in flight to
the outbox. A batch that was in flight may then be stored twice; the store keeps one copy.
"""

from __future__ import annotations

import atexit
import json
import logging
import operator
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ..hooks.redact import bound, redact
from .envelope import Event
from .journal import Journal, encode_row
from .outbox import Outbox
from .schema import COLUMNS
from .store import EventStore, StoreUnavailable

__all__ = ["Row", "StoreRecorder", "event_row"]

log = logging.getLogger(__name__)

BATCH_SIZE = 1000
QUEUE_LIMIT = 50_000  # events; beyond it record() writes straight to the outbox
WAKE_ROWS = 500  # rows that wake the writer before LINGER is up
LINGER = 0.1  # seconds the writer lets a batch gather after its first row (the live view's lag)
# Bytes a journal may hold, all settled, before the writer thread empties it; below that it is
# emptied by flush (a task's end): an ftruncate per settled batch costs more than re-delivering a
# killed process's already stored rows (ids dedupe them).
JOURNAL_CLEAR_BYTES = 1 << 20
BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0)  # seconds the store is left alone after failures


class Row(dict):
    """A stored row (one key per column) that also carries its encoded journal line: the row
    is encoded once, where it is made, and the journal, the outbox and the Postgres ``COPY``
    all write that line (``journal.encode_row``, ``store``). Rows read back from an outbox
    file are plain dicts and are encoded again where they are written."""

    __slots__ = ("line",)


# The columns an event gives as they are, read in one C call.
_PLAIN = tuple(
    name
    for name in COLUMNS
    if name not in {"duration_sec", "timestamp", "execution_id", "parent_execution_id", "data"}
)
_read_plain = operator.attrgetter(*_PLAIN)


def event_row(event: Event, max_data_bytes: int) -> Row:
    """The stored form of ``event``: redacted, bounded, one key per column, with its line.

    The data is redacted once and encoded once: that text measures it against
    ``max_data_bytes`` and is spliced into the line (every event of every loop item comes
    here, and encoding was two thirds of its cost)."""
    row = Row(zip(_PLAIN, _read_plain(event)))
    row["duration_sec"] = event.duration
    row["timestamp"] = event.timestamp.isoformat()
    row["execution_id"] = _int_or_none(event.execution_id) or 0
    row["parent_execution_id"] = _int_or_none(event.parent_execution_id)
    if event.data:
        data = redact(dict(event.data))
        text = _encode(data)  # ASCII: its length is its size in bytes
        if len(text) > max_data_bytes:
            data = bound(data, max_data_bytes)
            text = _encode(data)
    else:  # three of a loop item's seven events carry no data
        data, text = {}, "{}"
    head = _encode(row)
    row["data"] = data
    row.line = f'{head[:-1]},"data":{text}}}\n'.encode()
    return row


def _encoder() -> Callable[[Any], str]:
    """``json.dumps(value, separators=(",", ":"), default=str)`` for a dict or list, through
    one C encoder made once: ``JSONEncoder.encode`` makes a new one per call and tracks every
    container against cycles, which was half of encoding an event's row (two per event). The
    values encoded here are fresh trees (``redact`` copies them): a cycle cannot occur. The
    pure-Python encoder where the C one is missing."""
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is None:  # pragma: no cover - CPython always builds _json
        return json.JSONEncoder(separators=(",", ":"), default=str).encode
    encode = c_make_encoder(
        None, str, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    join = "".join
    return lambda value: join(encode(value, 0))


_encode = _encoder()


def _int_or_none(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class StoreRecorder:
    def __init__(
        self,
        store: EventStore,
        outbox: Outbox,
        *,
        max_data_bytes: int = 65536,
        flush_timeout: float = 2.0,
        journaled: bool = True,
    ) -> None:
        self.store = store
        self.outbox = outbox
        # Off only where a test or benchmark measures the writer without it.
        self.journal = Journal(outbox.journals) if journaled else None
        self.max_data_bytes = max_data_bytes
        self.flush_timeout = flush_timeout
        self.stored = 0  # rows handed to the store by this process
        self.spilled = 0  # rows written to the outbox by this process
        self._fresh_state()
        # A forked task process starts with no queue, no thread and an unlocked lock of its own
        # (the parent's lock may have been held by its writer thread at the fork).
        os.register_at_fork(after_in_child=self._fresh_state)
        atexit.register(self._at_exit)

    def _fresh_state(self) -> None:
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # one batch written at a time (thread or flush)
        self._settled = threading.Condition(self._lock)
        self._pid = 0
        # A deque: ``append`` and ``popleft`` need no lock of their own (the GIL orders them),
        # where ``queue.Queue`` took a lock and notified a condition per row.
        self._queue: deque[dict[str, Any]] = deque()
        self._first = threading.Event()  # a row was put on an empty queue
        self._full = threading.Event()  # WAKE_ROWS rows wait
        self._inflight: list[dict[str, Any]] = []
        self._pending = 0  # rows recorded and not yet stored or spilled
        self._thread: threading.Thread | None = None
        self._failures = 0
        self._down_until = 0.0
        self._outbox_checked = False
        self._keep_journal = False  # the outbox refused rows: the journal is all that has them
        if self.journal is not None:
            self.journal.forget()  # after a fork: the parent's journal is not the child's

    def __repr__(self) -> str:
        return f"StoreRecorder({self.store.describe()}, outbox {self.outbox.directory})"

    # -- the Recorder interface ---------------------------------------------------------------

    def record(self, event: Event) -> None:
        row = event_row(event, self.max_data_bytes)
        self._ensure_thread()
        with self._lock:
            # Counted before the journal write: the journal is emptied only when nothing is
            # pending, so it cannot be emptied between this row's write and its queueing.
            self._pending += 1
        if self.journal is not None:
            self.journal.append(encode_row(row))
        waiting = len(self._queue)
        if waiting >= QUEUE_LIMIT:
            self._spill([row])
            self._settle(1)
            return
        self._queue.append(row)
        # Wakes the writer: the first row after it found the queue empty (it clears the event
        # before draining, so a row put meanwhile is drained or wakes it again), a full batch.
        if not waiting:
            self._first.set()
        elif waiting == WAKE_ROWS:
            self._full.set()

    @property
    def pending(self) -> int:
        """Rows recorded and not yet stored or spilled (a task's end waits for them)."""
        with self._lock:
            return self._pending

    # -- ending -------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` s until every recorded event is settled (stored, or spilled to
        the outbox because the store failed); then what is still queued or in flight is spilled.
        Returns False only when the timeout forced that spill.

        The caller writes queued batches itself when the writer thread is idle: a task's end
        then costs one insert, not also a thread wake-up (which a busy machine delays)."""
        if self._pid != os.getpid():
            return True  # nothing was recorded in this process
        try:
            return self._flush(timeout)
        finally:
            with self._lock:
                self._clear_journal()

    def _flush(self, timeout: float | None) -> bool:
        deadline = time.monotonic() + (self.flush_timeout if timeout is None else timeout)
        while self._pending and time.monotonic() < deadline:
            if self._writing.acquire(blocking=False):
                try:
                    with self._lock:
                        batch = self._drain(BATCH_SIZE)
                        self._inflight = batch
                    if batch:
                        self._write_settled(batch)
                finally:
                    self._writing.release()
            with self._lock:
                if self._pending:
                    self._settled.wait(min(0.01, max(0.0, deadline - time.monotonic())))
        with self._lock:
            if not self._pending:
                return True
            left = self._drain() + self._inflight
            # Spilled here, so settled; an in-flight batch may still land in the store too (its
            # writer sees it was taken over and does not count it again).
            self._inflight = []
            self._pending = max(0, self._pending - len(left))
        self._spill(left)
        return False

    def deliver_outbox(self) -> int:
        """Store what waits in the outbox now (``noetlc events flush``); raises StoreUnavailable."""
        return self.outbox.deliver(self._store)

    def deliver_soon(self) -> None:
        """Have the next batch stored also deliver the outbox (and adopt the journals of
        processes that died): the scheduler asks at a run's end, where a killed task's events
        may be waiting."""
        self._outbox_checked = False

    def _at_exit(self) -> None:
        try:
            self.flush()
            with self._lock:
                done = not self._pending and not self._keep_journal
            if done and self.journal is not None:
                self.journal.close()
        except Exception:  # interpreter shutdown: never raise from here
            log.exception("NoETL event log: flush at exit failed")

    # -- the background thread ----------------------------------------------------------------

    def _ensure_thread(self) -> None:
        pid = os.getpid()
        if self._pid == pid and self._thread is not None:
            return
        with self._lock:
            if self._pid == pid and self._thread is not None:
                return
            self._pid = pid
            self._thread = threading.Thread(
                target=self._run, name="noetl-event-writer", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            self._first.wait()
            self._full.wait(LINGER)  # let a batch gather (a flush may write it meanwhile)
            self._first.clear()
            self._full.clear()
            # What gathered, and no more: rows a busy producer puts meanwhile gather for the
            # next batch (draining until empty wrote a steady producer's rows a few at a time).
            left = len(self._queue)
            while left > 0:
                with self._writing:
                    with self._lock:
                        batch = self._drain(min(left, BATCH_SIZE))
                        self._inflight = batch
                    if not batch:
                        break  # a flush took them
                    self._write_settled(batch)
                left -= len(batch)
            if self._queue:
                # Put while this batch was written, behind rows then still queued: no row
                # found the queue empty to wake the thread, so it wakes itself.
                self._first.set()

    def _write_settled(self, batch: list[dict[str, Any]]) -> None:
        """Write one batch (holding ``_writing``), then count it settled whatever happened."""
        try:
            self._write(batch)
        except Exception:  # the writer must outlive any bug in one batch
            log.exception("NoETL event log: writing a batch failed; kept in the outbox")
            self._spill(batch)
        finally:
            with self._lock:
                # A flush that timed out may have taken the batch over (spilled and counted it).
                mine = self._inflight is batch
                if mine:
                    self._inflight = []
            if mine:
                self._settle(len(batch))

    def _settle(self, count: int) -> None:
        with self._lock:
            self._pending = max(0, self._pending - count)
            if not self._pending:
                if self.journal is not None and self.journal.size >= JOURNAL_CLEAR_BYTES:
                    self._clear_journal()
                self._settled.notify_all()

    def _clear_journal(self) -> None:
        # Holding ``_lock``: every row in the journal is now stored or in the outbox.
        if self.journal is not None and not self._pending and not self._keep_journal:
            self.journal.clear()

    def _drain(self, limit: int | None = None) -> list[dict[str, Any]]:
        # Holding ``_lock`` (the only other taker, flush or the thread, holds it too); record()
        # only appends, so at least ``len`` rows are there to take.
        take = self._queue.popleft
        count = len(self._queue) if limit is None else min(limit, len(self._queue))
        return [take() for _ in range(count)]

    def _write(self, batch: list[dict[str, Any]]) -> None:
        if time.monotonic() < self._down_until:
            self._spill(batch)
            return
        try:
            self._store(batch)
        except StoreUnavailable as exc:
            delay = BACKOFF[min(self._failures, len(BACKOFF) - 1)]
            self._failures += 1
            self._down_until = time.monotonic() + delay
            log.warning(
                "NoETL event log unavailable (%s); %d event(s) kept in the outbox %s, "
                "delivered when it is back",
                exc,
                len(batch),
                self.outbox.directory,
            )
            self._spill(batch)
            return
        recovered = self._failures > 0
        self._failures = 0
        if recovered or not self._outbox_checked:
            self._outbox_checked = True
            try:
                delivered = self.outbox.deliver(self._store)
            except StoreUnavailable:
                return
            if delivered:
                log.info("NoETL event log: delivered %d event(s) from the outbox", delivered)

    def _store(self, rows: list[dict[str, Any]]) -> None:
        self.store.append(rows)
        self.stored += len(rows)

    def _spill(self, rows: list[Mapping[str, Any]]) -> None:
        if not rows:
            return
        try:
            self.outbox.put(rows)
            self.spilled += len(rows)
        except OSError:
            with self._lock:
                self._keep_journal = True
            where = self.journal.path if self.journal is not None else None
            if where is not None:
                # Adopted into the outbox by whoever delivers it once this process is gone.
                log.exception(
                    "NoETL event log: outbox %s not writable; %d event(s) stay in the journal %s",
                    self.outbox.directory,
                    len(rows),
                    where,
                )
            else:
                log.exception("NoETL event log: outbox %s not writable; events lost", self.outbox)
