"""One claimed cursor item's writes to the cursor's own database, in one transaction.

A cursor loop over postgres (``drivers.postgres``) opens an :class:`ItemTransaction` for each
claimed item and enlists it for the item's task chain (a context variable): every ``postgres``
tool call of the chain against the **same database** (the same connection string) then runs on
that one connection, each call inside a savepoint, and nothing commits until the item completes.
The completion runs the driver's fencing statement (the claim's token must still hold) on the
same connection and commits the item's writes with it, or rolls everything back when another
claim holds the item by then. That is what makes an item exactly once for work done in the
cursor's database.

What is not enlisted commits on its own (at least once; the completion is still refused once by
item key): other databases, ``sink`` / ``transfer`` writes, statements PostgreSQL refuses inside
a transaction block (``VACUUM``, ``CREATE DATABASE``...), and work a tool does on other threads.

The connection is taken from the tools' pool when the first enlisted statement runs (an item
with no SQL holds no transaction while its other tools run). When the slot loses its lease, the
heartbeat thread calls :meth:`ItemTransaction.abandon`: the running statement is cancelled and
every later one fails with :class:`ItemAbandoned`, so the item stops at its next SQL call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg

from .postgres import PgTarget, connect, rollback_quietly

__all__ = ["ItemAbandoned", "ItemTransaction", "enlisted", "enlisting"]

_CURRENT: ContextVar[ItemTransaction | None] = ContextVar("noetl_cursor_item", default=None)


class ItemAbandoned(psycopg.OperationalError):
    """The item's lease was lost: its transaction was rolled back and takes no more statements."""


class ItemTransaction:
    def __init__(self, target: PgTarget, *, idle_timeout: float | None = None) -> None:
        self.target = target
        self._idle_ms = int(idle_timeout * 1000) if idle_timeout else 0
        self._stack = ExitStack()
        self._conn: psycopg.Connection[Any] | None = None
        self._abandoned: str | None = None
        self._lock = threading.Lock()

    @property
    def opened(self) -> bool:
        return self._conn is not None

    def connection(self) -> psycopg.Connection[Any]:
        """The item's connection, in its open transaction (opened on first use)."""
        if self._abandoned is not None:
            raise ItemAbandoned(self._abandoned)
        if self._conn is None:
            conn = self._stack.enter_context(connect(self.target))
            conn.autocommit = False
            # The first statement opens the item's transaction (psycopg begins it implicitly), so
            # that each tool call's ``conn.transaction()`` is a savepoint inside it, not an outer
            # block that would commit at its end.
            if self._idle_ms:
                # A slot stopped mid-item (SIGSTOP, a debugger) after writing must not hold its
                # row locks past this: the server ends the transaction, the item fails and is
                # claimed again once its lease expires.
                conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = {self._idle_ms}")
            else:
                conn.execute("SELECT")
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.INTRANS:
                raise ItemAbandoned("the item's transaction did not open")
            with self._lock:
                self._conn = conn
        return self._conn

    def abandon(self, reason: str) -> None:
        """From another thread: stop the item's SQL (the lease is gone)."""
        with self._lock:
            self._abandoned = reason
            conn = self._conn
        if conn is not None and not conn.closed:
            try:
                conn.cancel_safe(timeout=2.0)
            except (psycopg.Error, AttributeError):  # cancel is best effort; the fence is not
                pass

    def finish(self, fence: str, params: Mapping[str, Any]) -> bool:
        """Run ``fence`` (returns a row when the item's claim still holds) and commit with the
        item's writes -> True; roll everything back -> False."""
        try:
            conn = self.connection()
            row = conn.execute(fence, params).fetchone()
        except ItemAbandoned:
            return False
        except psycopg.Error:
            if self._conn is not None:
                rollback_quietly(self._conn)
            raise
        if row is None:
            rollback_quietly(conn)
            return False
        conn.commit()
        return True

    def close(self) -> None:
        """Roll back whatever was not committed and give the connection back."""
        if self._conn is not None and not self._conn.closed:
            rollback_quietly(self._conn)
        self._stack.close()
        self._conn = None


def enlisted(target: PgTarget) -> ItemTransaction | None:
    """The item transaction the current task chain writes ``target`` in, if any."""
    item = _CURRENT.get()
    if item is not None and item.target.conninfo == target.conninfo:
        return item
    return None


@contextmanager
def enlisting(item: ItemTransaction) -> Iterator[ItemTransaction]:
    token = _CURRENT.set(item)
    try:
        yield item
    finally:
        _CURRENT.reset(token)
