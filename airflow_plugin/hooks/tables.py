"""``TableWriter``: rows into one table over one connection, inside one transaction.

The one writer per database that ``sink`` and ``transfer`` share (``hooks.postgres`` and
``hooks.duckdb`` implement it), so how a value is adapted to a column, how an upsert is spelled
and what ``replace`` empties are decided once per database. Names are quoted identifiers, values
are parameters; the caller commits or rolls back.

Also the one ``StatementError`` of the SQL tools: statement ``index`` failed with ``cause``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Literal

from ..errors import NoetlFailure
from .sqltext import quote_ident

__all__ = ["StatementError", "TableWriter", "folded", "upsert_clause"]

Row = Sequence[Any]


class StatementError(NoetlFailure):
    """Statement ``index`` (of ``count``, when known) failed with ``cause`` (the transaction was
    rolled back)."""

    def __init__(self, index: int, cause: BaseException, count: int | None = None):
        self.index = index
        self.cause = cause
        self.count = count
        super().__init__(str(cause))


def folded(name: str) -> str:
    """The column name the database looks up for a data key (``quote_ident``'s folding)."""
    return quote_ident(name)[1:-1].replace('""', '"')


def upsert_clause(columns: Sequence[str], keys: Sequence[str]) -> str:
    """`` ON CONFLICT (keys) DO UPDATE SET c = EXCLUDED.c, ...`` (``DO NOTHING`` when every
    column is a key): the same text on PostgreSQL and DuckDB."""
    key_set = {folded(key) for key in keys}
    conflict = ", ".join(quote_ident(key) for key in keys)
    updates = [
        f"{quote_ident(column)} = EXCLUDED.{quote_ident(column)}"
        for column in columns
        if folded(column) not in key_set
    ]
    action = f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING"
    return f" ON CONFLICT ({conflict}) {action}"


class TableWriter(ABC):
    """One connection's writes, in the caller's transaction (see the module docstring)."""

    kind: ClassVar[str]
    # How ``:name`` markers of a sink statement are rewritten for this driver (bind_named).
    param_style: ClassVar[Literal["pyformat", "dollar"]]

    @abstractmethod
    def columns(self, table: str) -> dict[str, str] | None:
        """Column name -> type of ``table``; None when the table does not exist and the
        database lets the writer create it."""

    def create(
        self, table: str, columns: Sequence[str], rows: Sequence[Row], keys: Sequence[str]
    ) -> dict[str, str]:
        """Create ``table`` with types inferred from ``rows``; its column types."""
        raise NotImplementedError(f"{self.kind} tables are not created by the writer")

    def prepare(
        self,
        table: str,
        columns: Sequence[str],
        sample: Callable[[], Sequence[Row]],
        *,
        mode: str,
        keys: Sequence[str] = (),
    ) -> dict[str, str]:
        """Before the first write: the table's column types (creating it where the database
        allows, from ``columns`` and the rows ``sample`` gives: asked only then), emptied first
        in ``replace`` mode."""
        types = self.columns(table)
        if types is None:
            types = self.create(table, columns, sample(), keys if mode == "upsert" else ())
        if mode == "replace":
            self.delete_all(table)
        return types

    @abstractmethod
    def write(
        self,
        table: str,
        columns: Sequence[str],
        rows: Sequence[Row],
        *,
        mode: str = "insert",
        keys: Sequence[str] = (),
        column_types: Mapping[str, str] | None = None,
    ) -> int:
        """Insert ``rows`` (value sequences in ``columns`` order); rows written. ``mode``:
        ``insert``/``append``/``replace`` insert, ``upsert`` resolves conflicts on ``keys``."""

    @abstractmethod
    def delete_all(self, table: str) -> int:
        """Empty ``table`` (``replace`` mode); DELETE, not TRUNCATE: no exclusive lock."""

    @abstractmethod
    def execute(self, sql: str, params: Any = None) -> int:
        """One statement of the caller's SQL; rows it changed (0 for a query)."""

    @abstractmethod
    def execute_many(self, query: str, rows: Sequence[Row]) -> int:
        """A custom target query with ``?``/``%s`` markers, once per row; rows written."""

    @abstractmethod
    def custom_param(self, value: Any) -> Any:
        """A value for a custom query, whose column types are unknown."""

    @contextmanager
    def transaction(self) -> Iterator[TableWriter]:
        """The writer, committed when the block ends and rolled back when it raises."""
        try:
            yield self
            self.commit()
        except BaseException:
            self.rollback()
            raise

    @abstractmethod
    def commit(self) -> None: ...

    @abstractmethod
    def rollback(self) -> None:
        """Roll back if the connection still works; a failure here is logged, not raised (the
        error that led here is the one worth reporting)."""
