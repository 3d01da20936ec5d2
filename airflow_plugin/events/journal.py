"""The per-process journal: what a recorder has accepted and not yet settled, on disk.

The writer (``writer.StoreRecorder``) keeps recorded events in memory until its thread stores
them; a task process killed with SIGKILL (or by the OOM killer) would take those with it, and
no hook of the dying process runs. So before an event is queued, its row (already redacted:
secrets never reach the disk in clear) is appended to this process's journal file with one
``write(2)`` on an ``O_APPEND`` descriptor, made holding the GIL (:func:`_gil_holding_write`).
The kernel keeps data written to a file when the writing process dies, so no fsync is needed
for that: fsync would only matter for the machine dying, which costs a disk flush per event and
is what the outbox's fsync covers once events are spilled. When everything recorded is settled (stored, or spilled to the fsynced outbox) the
writer empties the journal (``clear``) at the next flush (a task's end), or as soon as it holds
more than a megabyte; a process that ends normally removes it (``close``). Rows already stored
may so stay in the journal for a while: adopted after a kill, they are stored once (their ids).

Whose journal is alive is told by an ``fcntl.flock`` the owner takes when it creates the file
and holds until it dies (the kernel drops it then, however the process ended), never by pid
guessing (pids are reused). :func:`adopt` takes the lock of every journal it can lock (its
owner is gone), turns the rows into one outbox batch (``put``: written whole, fsynced) and
removes the journal; the outbox's ordinary delivery then stores them. A row may so reach the
store twice (stored by its owner before it died, and again from the journal): event ids are
deterministic and the store ignores duplicates, so it is stored once.

A forked child inherits its parent's descriptor, and with it the parent's lock; it closes that
copy (:meth:`Journal.forget`, run after every fork) and opens a journal of its own when it first
records. Descriptors are opened close-on-exec, so programs a task starts do not hold the lock.

Layout: ``<outbox>/journal/<pid>-<random>.jsonl``, one JSON row per line. A line cut short (the
process was killed inside that ``write``, possible only for very large rows) is the last one and
its event never reached the queue either: it is dropped with a warning. A journal that cannot be
parsed otherwise is kept as ``.bad`` and reported, like an unreadable outbox batch.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Journal", "adopt", "encode_row", "waiting"]

log = logging.getLogger(__name__)


def encode_row(row: Mapping[str, Any]) -> bytes:
    """One row as one journal (and outbox) line: the line a fresh row carries
    (``writer.Row``), else encoded now (a row read back from an outbox file)."""
    line = getattr(row, "line", None)
    if line is not None:
        return line
    return (json.dumps(row, separators=(",", ":"), default=_json_default) + "\n").encode()


class Journal:
    """This process's journal in ``directory``; the file is created on the first append."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._path: Path | None = None
        self._written = 0  # bytes appended since the last clear
        self._broken = False  # the disk refused once: said once, not per event

    def __repr__(self) -> str:
        return f"Journal({self.directory})"

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def size(self) -> int:
        """Bytes appended since the journal was last emptied."""
        return self._written

    def append(self, line: bytes) -> bool:
        """Write one encoded row; False when the disk refuses (the event is still queued)."""
        try:
            fd = self._fd if self._fd is not None else self._open()
            # One write of the whole line (O_APPEND puts it after everything before it); a
            # regular file takes it whole unless the disk fills up, hence the loop.
            rest = line
            while rest:
                rest = rest[_write(fd, rest) :]
            self._written += len(line)
            return True
        except OSError as exc:
            if not self._broken:
                self._broken = True
                log.warning(
                    "NoETL event journal %s not writable (%s); events of this process survive "
                    "its being killed only once they are stored",
                    self.directory,
                    exc,
                )
            return False

    def _open(self) -> int:
        with self._lock:
            if self._fd is not None:
                return self._fd
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
            fd = os.open(path, flags, 0o666)  # the umask decides, as for outbox files
            try:
                # Held as long as the descriptor is open: until this process ends.
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise
            self._fd, self._path = fd, path
            return fd

    def clear(self) -> None:
        """Everything appended is settled: empty the file (the caller holds its writer's lock,
        so no append runs between the check that all is settled and this)."""
        if self._fd is None or not self._written:
            return
        try:
            os.ftruncate(self._fd, 0)
            self._written = 0
        except OSError as exc:  # the rows stay; adopting them later stores nothing twice
            log.warning("NoETL event journal %s could not be emptied: %s", self._path, exc)

    def close(self) -> None:
        """The process ends with everything settled: remove the journal."""
        with self._lock:
            fd, path = self._fd, self._path
            self._fd = self._path = None
        if fd is None:
            return
        try:
            if path is not None and not self._written:
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def forget(self) -> None:
        """After a fork, in the child: close the parent's descriptor (the parent's file and
        lock stay the parent's) and start afresh."""
        self._lock = threading.Lock()
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd = self._path = None
        self._written = 0
        self._broken = False


def _gil_holding_write() -> Callable[[int, bytes], int]:
    """write(2) that keeps the GIL: ``os.write`` releases it, and a thread that takes it
    meanwhile (the writer thread storing a batch) keeps it for up to the switch interval, so
    each event recorded while the writer worked waited up to 5 ms (measured: 1.1 ms per 588-byte
    write next to a busy thread, against 2 us when the GIL is kept). A write of a few hundred
    bytes to a local file is too short to be worth the handoff. ``ctypes.PyDLL`` calls the C
    function without releasing the GIL; ``os.write`` where libc cannot be loaded this way."""
    try:
        import ctypes

        libc_write = ctypes.PyDLL(None, use_errno=True).write
        libc_write.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
        libc_write.restype = ctypes.c_ssize_t
    except (ImportError, OSError, AttributeError):  # pragma: no cover - no libc symbols here
        return os.write

    def write(fd: int, data: bytes) -> int:
        while True:
            written = libc_write(fd, data, len(data))
            if written >= 0:
                return written
            code = ctypes.get_errno()
            # Interrupted by a signal: write again, as os.write does (PEP 475).
            if code != errno.EINTR:
                raise OSError(code, os.strerror(code))

    return write


_write = _gil_holding_write()


def adopt(directory: Path | str, put: Callable[[Sequence[Mapping[str, Any]]], Any]) -> int:
    """Move the rows of every journal in ``directory`` whose owner has died to ``put`` (the
    outbox), then remove the journal. Returns the number of rows moved. Never raises: a journal
    that cannot be read or moved now is reported and left for the next delivery."""
    moved = 0
    for path in _journals(directory):
        try:
            moved += _adopt_one(path, put)
        except OSError as exc:
            log.warning("NoETL event journal %s not adopted now (%s); kept", path, exc)
    if moved:
        log.info("NoETL event log: %d event(s) of killed processes moved to the outbox", moved)
    return moved


def _adopt_one(path: Path, put: Callable[[Sequence[Mapping[str, Any]]], Any]) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # flock needs no write access
    except FileNotFoundError:
        return 0  # adopted, or closed by its owner, since the listing
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # its owner is alive
        if not _same_file(path, fd):
            return 0  # another process adopted it between our open and our lock
        rows = _read(path, fd)
        if rows is None:
            return 0
        if rows:
            put(rows)  # raises when the outbox is not writable: the journal stays
        path.unlink(missing_ok=True)
        return len(rows)
    finally:
        os.close(fd)  # releases the lock


def waiting(directory: Path | str) -> int:
    """Rows in journals whose owner has died (what :func:`adopt` would move)."""
    total = 0
    for path in _journals(directory):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # gone since the listing, or not ours to read: not counted
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            total += sum(1 for line in os.read(fd, os.fstat(fd).st_size).split(b"\n") if line)
        finally:
            os.close(fd)
    return total


def _journals(directory: Path | str) -> list[Path]:
    try:
        return sorted(Path(directory).glob("*.jsonl"))
    except OSError:
        return []


def _same_file(path: Path, fd: int) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _read(path: Path, fd: int) -> list[dict[str, Any]] | None:
    data = b""
    while chunk := os.read(fd, 1 << 20):
        data += chunk
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the last write completed
    rows = []
    try:
        for line in lines:
            if line.strip():
                rows.append(json.loads(line))
    except ValueError as exc:
        bad = path.with_suffix(".bad")
        os.replace(path, bad)
        log.error("NoETL event journal: %s is not readable (%s); kept as %s", path, exc, bad)
        return None
    if tail.strip():
        log.warning(
            "NoETL event journal %s: its last event (%d bytes) was cut short by the process's "
            "death before it was queued; dropped",
            path,
            len(tail),
        )
    return rows


def _json_default(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    return str(value)
