"""The local outbox: where events wait while the store cannot take them.

A batch that could not be stored becomes one file, written whole or not at all (a ``.tmp``
file, fsync, rename to ``.jsonl``), so a reader never sees half a batch and a crash never
leaves a torn one. Delivery reads a file, stores its rows (duplicates are ignored by the store,
so a file delivered twice, by two processes or after a crash between insert and unlink, adds
nothing) and only then removes it. A file that cannot be parsed is never deleted: it is renamed
``.bad`` and reported, so no event is lost silently.

Events of a process that was killed before it could store or spill them are in its journal
(``journal``, in ``<dir>/journal``): delivery first adopts every journal whose owner has died
into a batch file here, so they are delivered like any other batch.

Layout: ``<dir>/<utc time>-<pid>-<random>.jsonl``, one JSON row per line; the names sort in
the order the batches' first events happened.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import journal

__all__ = ["Outbox"]

log = logging.getLogger(__name__)


class Outbox:
    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    @property
    def journals(self) -> Path:
        """Where the writers of this outbox keep their per-process journals."""
        return self.directory / "journal"

    def put(self, rows: Sequence[Mapping[str, Any]]) -> Path | None:
        """Write ``rows`` as one durable batch file; returns its path."""
        if not rows:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        # Named by the batch's first event, not the time of the spill: the writer thread and a
        # task-end flush can spill two batches at once, and delivery (in name order) must keep
        # the order the events happened in.
        stamp = _first_moment(rows).strftime("%Y%m%dT%H%M%S%f")
        name = f"{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = self.directory / f".{name}.tmp"
        final = self.directory / f"{name}.jsonl"
        with open(tmp, "wb") as handle:
            handle.writelines(journal.encode_row(row) for row in rows)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, final)
        _fsync_dir(self.directory)
        return final

    def pending(self) -> list[Path]:
        try:
            return sorted(self.directory.glob("*.jsonl"))
        except OSError:
            return []

    def count(self) -> int:
        """Events waiting (lines in pending files, and in journals of processes that died)."""
        total = journal.waiting(self.journals)
        for path in self.pending():
            try:
                with open(path, "rb") as handle:
                    total += sum(1 for _ in handle)
            except FileNotFoundError:
                continue
        return total

    def deliver(self, store: Callable[[list[dict[str, Any]]], None]) -> int:
        """Hand every pending batch to ``store`` (which raises when it cannot take it), oldest
        first; stop at the first failure. Returns the number of rows delivered. Journals of
        processes that died are adopted first, so their events are among them."""
        journal.adopt(self.journals, self.put)
        delivered = 0
        for path in self.pending():
            rows = self._read(path)
            if rows is None:
                continue
            store(rows)  # raises: the file stays for the next attempt
            try:
                path.unlink()
            except FileNotFoundError:
                pass  # another process delivered it too: the store kept one copy
            delivered += len(rows)
        return delivered

    def _read(self, path: Path) -> list[dict[str, Any]] | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return [json.loads(line) for line in _lines(text)]
        except ValueError as exc:
            bad = path.with_suffix(".bad")
            os.replace(path, bad)
            log.error("NoETL event outbox: %s is not readable (%s); kept as %s", path, exc, bad)
            return None


def _lines(text: str) -> Iterable[str]:
    return (line for line in text.splitlines() if line.strip())


def _fsync_dir(directory: Path) -> None:
    # The rename is durable only once the directory entry is.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _first_moment(rows: Sequence[Mapping[str, Any]]) -> _dt.datetime:
    moments = []
    for row in rows:
        value = row.get("timestamp")
        if isinstance(value, str):
            try:
                value = _dt.datetime.fromisoformat(value)
            except ValueError:
                continue
        if isinstance(value, _dt.datetime):
            moments.append(value if value.tzinfo else value.replace(tzinfo=_dt.UTC))
    return min(moments).astimezone(_dt.UTC) if moments else _dt.datetime.now(_dt.UTC)
