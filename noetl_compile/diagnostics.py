"""Diagnostics: what every stage reports instead of raising.

A diagnostic always has a file, a 1-based line and column, a stable code and a message.
The codes themselves, their severity and their explanation live in ``rules.py``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(enum.IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True, order=True)
class Position:
    line: int
    col: int


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: str
    severity: Severity
    path: str
    position: Position
    message: str
    hint: str | None = field(default=None, compare=False)
    # X601 only: the secret itself, never printed; every output format masks it wherever it
    # would appear (the quoted source line, other findings' messages).
    secret: str | None = field(default=None, compare=False, repr=False)

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.position.line, self.position.col, self.code, self.message)


class DiagnosticSink:
    """Collects diagnostics for one file; checks call ``report`` with a span-bearing value."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[Diagnostic] = []

    def add(
        self,
        code: str,
        position: Position,
        message: str,
        *,
        hint: str | None = None,
        severity: Severity | None = None,
        secret: str | None = None,
    ) -> None:
        from .rules import severity_of  # local: rules imports nothing from here at import time

        self.items.append(
            Diagnostic(
                code, severity or severity_of(code), self.path, position, message, hint, secret
            )
        )
