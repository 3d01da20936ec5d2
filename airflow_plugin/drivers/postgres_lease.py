"""The postgres driver's leases: one row per claimed item and loop start, in the cursor's database.

    noetl_cursor_lease(scope, item) -> token, deadline, state held|done|failed, claims, row

``scope`` is the loop start (``ClaimSpec.scope``), ``item`` the item key (``options.key``
columns of the claimed row as JSON), ``token`` the claim id. Every change of a lease row
happens under its row lock, so a takeover and a completion cannot both win:

* acquire (after the playbook's claim statement returned a row, same transaction): a new row,
  or a takeover of one whose lease expired (or whose item failed); a row another live claim
  holds, or one already done, is not taken (the claim statement's stale-claim clause handed out
  an item a live slot still works on);
* redeliver (before the claim statement): an expired held lease goes to the claimer with a new
  token, so an item whose slot died is done even without a stale-claim clause;
* renew (heartbeat): pushes the deadline while the token matches;
* complete (the item's own transaction, ``hooks/pg_item.py``): ``held -> done`` while the token
  matches, committed with the item's writes;
* forget (the loop's tail, once every slot ended well): the loop start's rows are deleted. Nothing
  claims under that scope again (a new loop start is a new scope), so the rows only fenced slots
  that are gone; a slot that wakes up later finds no row and its completion is refused.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["DEFAULT_TABLE", "LeaseSql"]

DEFAULT_TABLE = "noetl_cursor_lease"


class LeaseSql:
    """The statements for one lease table (``options.lease_table``, ``schema.table`` allowed)."""

    def __init__(self, table: str = DEFAULT_TABLE) -> None:
        self.name = table
        ident = sql.Identifier(*table.split(".", 1))
        self.table = ident
        self.create = sql.SQL(
            "CREATE TABLE IF NOT EXISTS {t} ("
            " scope text NOT NULL, item text NOT NULL, token uuid NOT NULL,"
            " state text NOT NULL DEFAULT 'held', deadline timestamptz NOT NULL,"
            " claims int NOT NULL DEFAULT 1, slot text, row jsonb NOT NULL,"
            " claimed_at timestamptz NOT NULL DEFAULT clock_timestamp(), done_at timestamptz,"
            " PRIMARY KEY (scope, item));"
            " CREATE INDEX IF NOT EXISTS {i} ON {t} (scope, deadline) WHERE state = 'held'"
        ).format(t=ident, i=sql.Identifier(f"{table.rsplit('.', 1)[-1]}_held"))
        self.redeliver = sql.SQL(
            "UPDATE {t} l SET token = %(token)s, slot = %(slot)s, claims = l.claims + 1,"
            " deadline = clock_timestamp() + make_interval(secs => %(secs)s),"
            " claimed_at = clock_timestamp()"
            " WHERE (l.scope, l.item) = (SELECT scope, item FROM {t}"
            "   WHERE scope = %(scope)s AND state = 'held' AND deadline < clock_timestamp()"
            "   ORDER BY deadline LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " RETURNING l.item, l.row, l.claims, extract(epoch FROM l.deadline)::float8 AS until"
        ).format(t=ident)
        self.acquire = sql.SQL(
            "INSERT INTO {t} AS l (scope, item, token, slot, row, deadline)"
            " VALUES (%(scope)s, %(item)s, %(token)s, %(slot)s, %(row)s,"
            "         clock_timestamp() + make_interval(secs => %(secs)s))"
            " ON CONFLICT (scope, item) DO UPDATE SET token = excluded.token,"
            "   slot = excluded.slot, row = excluded.row, deadline = excluded.deadline,"
            "   state = 'held', claims = l.claims + 1, claimed_at = clock_timestamp()"
            " WHERE l.state = 'failed' OR (l.state = 'held' AND l.deadline < clock_timestamp())"
            " RETURNING l.claims, extract(epoch FROM l.deadline)::float8 AS until"
        ).format(t=ident)
        self.state = sql.SQL(
            "SELECT state FROM {t} WHERE scope = %(scope)s AND item = %(item)s"
        ).format(t=ident)
        self.renew = sql.SQL(
            "UPDATE {t} SET deadline = clock_timestamp() + make_interval(secs => %(secs)s)"
            " WHERE scope = %(scope)s AND item = %(item)s AND token = %(token)s"
            " AND state = 'held' RETURNING extract(epoch FROM deadline)::float8 AS until"
        ).format(t=ident)
        self.complete = sql.SQL(
            "UPDATE {t} SET state = 'done', done_at = clock_timestamp()"
            " WHERE scope = %(scope)s AND item = %(item)s AND token = %(token)s"
            " AND state = 'held' RETURNING 1"
        ).format(t=ident)
        self.fail = sql.SQL(
            "UPDATE {t} SET state = 'failed'"
            " WHERE scope = %(scope)s AND item = %(item)s AND token = %(token)s AND state = 'held'"
        ).format(t=ident)
        self.forget = sql.SQL("DELETE FROM {t} WHERE scope = %(scope)s").format(t=ident)
        self.next_expiry = sql.SQL(
            "SELECT extract(epoch FROM min(deadline) - clock_timestamp())::float8 AS wait"
            " FROM {t} WHERE scope = %(scope)s AND state = 'held'"
        ).format(t=ident)

    def ensure(self, conn: psycopg.Connection[Any]) -> None:
        """Create the table once; slots of one loop start race here, so under an advisory lock
        (``CREATE TABLE IF NOT EXISTS`` alone is not safe against a concurrent create)."""
        lock = int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:8], "big", signed=True)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
            conn.execute(self.create)
