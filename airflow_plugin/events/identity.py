"""Deterministic event ids.

The same transition can reach the log more than once: the worker and the scheduler both report a
task failure, every task of a run announces the run's start, the outbox re-delivers a batch that
may already have landed. The store keeps one row per ``event_id`` (inserts ignore duplicates), so
an id must be a pure function of what the event *is*: the execution, the Airflow attempt
(task, map index, try), the entity, the event name, the NoETL attempt and iteration. Two
different transitions with all of those equal (a cyclic region visiting a step twice inside one
task attempt) are told apart by ``occurrence``: how many identical keys this attempt emitted
before, which a deterministic re-run reproduces.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

__all__ = ["EVENT_NAMESPACE", "event_id"]

# Fixed namespace of uuid5 ids; changing it changes every id ever derived.
EVENT_NAMESPACE = uuid.UUID("6f1c3a52-5d2b-4a57-9a0c-2e7d0c9b4e11")


# ``uuid.uuid5`` hashes the namespace's bytes again for every id and builds a UUID object only
# to print it; every event of every loop item pays for an id, so the namespace's SHA-1 state is
# made once and copied, and the text formed from the digest (tests/events/test_json_ids.py
# checks it against ``uuid.uuid5``).
_NAMESPACE_SHA1 = hashlib.sha1(EVENT_NAMESPACE.bytes, usedforsecurity=False)


def event_id(*parts: Any) -> str:
    """uuid5 over ``parts``; None and "" differ, and no part can run into the next."""
    # A list, not a generator: join builds one from a generator anyway.
    key = "\x1f".join(["\x00" if part is None else str(part) for part in parts])
    digest = _NAMESPACE_SHA1.copy()
    digest.update(key.encode())
    raw = bytearray(digest.digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50  # version 5
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
