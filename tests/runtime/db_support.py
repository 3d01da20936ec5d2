"""PostgreSQL and DuckDB in one call each, for the runtime tests that write tables and read
them back (tests/runtime/test_tool_transfer.py, test_tool_sink.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import psycopg


def pg(dsn: str, text: Any, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(text, params)
        return cur.fetchall() if cur.description else []


def duck(path: str | Path, text: str, params: Any = None) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(path)) as con:
        cursor = con.execute(text, params)
        return cursor.fetchall() if cursor.description else []
