"""Fixtures of the runtime tests: fresh table names, dropped after the test (the tests share one
database)."""

from __future__ import annotations

import uuid

import pytest
from psycopg import sql as pgsql

from tests.runtime.db_support import pg


@pytest.fixture
def name(pg_test_dsn: str):
    """A factory of fresh table names, dropped after the test (tests share one database)."""
    made: list[str] = []

    def make(prefix: str = "t") -> str:
        made.append(f"{prefix}_{uuid.uuid4().hex[:10]}")
        return made[-1]

    yield make
    for table in made:
        pg(pg_test_dsn, pgsql.SQL("DROP TABLE IF EXISTS {}").format(pgsql.Identifier(table)))
