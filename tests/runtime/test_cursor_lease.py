"""The postgres cursor driver's leases against a real server, in process and fast: a completion
is fenced by the claim's token and commits the item's own SQL with it; a heartbeat keeps a slow
live item; a claim statement that keeps handing out a held item is named; drivers declare their
guarantee. (The 5,000-claim run under load, with killed and stopped slot processes, is
test_cursor_scale.py.)"""

from __future__ import annotations

import time

import psycopg
import pytest

from airflow_plugin.drivers import AT_LEAST_ONCE, ClaimSpec, CursorDriverError, guarantee_of, leases
from airflow_plugin.drivers.postgres import GUARANTEE, PostgresCursorDriver
from airflow_plugin.runtime.cursor_lease import Heartbeat
from airflow_plugin.tools.outcome import ToolCall
from airflow_plugin.tools.postgres import run_postgres

CLAIM = (
    "UPDATE lease_q SET taken = true WHERE id = (SELECT id FROM lease_q WHERE NOT taken"
    " ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id"
)


@pytest.fixture
def queue(pg_connections, pg_test_dsn):
    with psycopg.connect(pg_test_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS lease_q, lease_out")
        conn.execute("CREATE TABLE lease_q (id int PRIMARY KEY, taken bool DEFAULT false)")
        conn.execute("CREATE TABLE lease_out (id int, by text)")
        conn.execute("INSERT INTO lease_q (id) SELECT generate_series(1, 3)")
    return pg_test_dsn


def _driver(scope: str, claim: str = CLAIM, **options) -> PostgresCursorDriver:
    return PostgresCursorDriver(ClaimSpec("postgres", claim, "pg_local", options, "work", scope))


def _write(by: str, item: int) -> None:
    """The item's own SQL, through the postgres tool as a task chain runs it."""
    call = ToolCall(
        "work",
        "save",
        {
            "auth": "pg_local",
            "command": f"INSERT INTO lease_out VALUES ({item}, '{by}');"
            f" UPDATE lease_q SET taken = true WHERE id = {item};",
        },
    )
    outcome = run_postgres(call)
    assert outcome.ok, outcome.error
    assert outcome.data["transaction"] == "cursor item"


def _rows(dsn: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT id, by FROM lease_out ORDER BY id, by").fetchall()


def test_a_completion_after_the_lease_was_taken_over_is_refused_and_its_sql_rolled_back(queue):
    scope = f"t1:{time.time_ns()}"
    a, b = _driver(scope, lease_seconds=0.3), _driver(scope, lease_seconds=0.3)
    first = a.claim_lease("a")
    assert first.row == {"id": 1} and first.key == "[1]" and first.claims == 1
    with a.item(first) as work:
        _write("a", 1)
        assert _rows(queue) == []  # not committed: it commits with the completion
        time.sleep(0.5)  # a stalls past its lease: b's next claim takes the item over
        again = b.claim_lease("b")
        assert (again.row, again.claims) == ({"id": 1}, 2) and again.token != first.token
        assert not a.renew(first)
        assert work.complete() is False  # refused: a's insert is rolled back
    with b.item(again) as work:
        _write("b", 1)
        assert work.complete() is True
    assert _rows(queue) == [(1, "b")]  # exactly once, by the claim that held the item
    with b.item(again) as work:
        assert work.complete() is False  # completing an item twice: refused by its key


def test_a_heartbeat_keeps_a_slow_live_item_and_other_slots_wait_for_it(queue):
    scope = f"t2:{time.time_ns()}"
    a, b = _driver(scope, lease_seconds=0.3), _driver(scope, lease_seconds=0.3)
    claimed = [a.claim_lease("a") for _ in range(3)]
    assert [lease.row["id"] for lease in claimed] == [1, 2, 3]
    slow = claimed[0]
    for lease in claimed[1:]:
        with a.item(lease) as work:
            assert work.complete()
    with a.item(slow) as work, Heartbeat(a, slow) as beat:
        time.sleep(1.0)  # three leases long
        assert b.claim_lease("b") is None  # nothing pending and the slow item still held
        assert 0 < b.held_wait() <= 0.3
        _write("a", 1)
        assert beat.lost is None and beat.beats >= 2
        assert work.complete() is True
    assert b.held_wait() is None
    assert _rows(queue) == [(1, "a")]


def test_a_claim_that_keeps_returning_a_held_item_is_named(queue):
    scope = f"t3:{time.time_ns()}"
    always_one = "SELECT 1 AS id"  # ignores what is claimed: hands out item 1 again and again
    a, b = _driver(scope, always_one), _driver(scope, always_one)
    assert a.claim_lease("a").row == {"id": 1}
    with pytest.raises(CursorDriverError, match="claims in a row returned items"):
        b.claim_lease("b")
    assert b.skipped == 1000


def test_drivers_declare_their_guarantee(queue):
    scope = f"t4:{time.time_ns()}"
    assert guarantee_of(PostgresCursorDriver) == GUARANTEE and "exactly once" in GUARANTEE
    assert leases(_driver(scope))
    plain = _driver(scope, lease_seconds=0)
    assert not leases(plain) and guarantee_of(plain) == AT_LEAST_ONCE
    assert plain.claim() == {"id": 1}

    class NoLease:
        def claim(self):
            return None

    assert guarantee_of(NoLease) == AT_LEAST_ONCE and not leases(NoLease)
    with pytest.raises(CursorDriverError, match="lease_seconds"):
        _driver(scope, lease_seconds=-1)
    with pytest.raises(CursorDriverError, match=r"options.key column\(s\) \['nope'\]"):
        _driver(scope, key="nope").claim_lease("a")
