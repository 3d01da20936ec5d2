"""Diagnostics: what every stage reports instead of raising.

A diagnostic always has a file, a 1-based line and column, a stable code and a message.
The codes themselves, their severity and their explanation live in ``rules.py``, the catalogue
this module stands on (``Severity`` is defined there and re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .rules import Severity, severity_of

__all__ = ["Diagnostic", "DiagnosticSink", "Position", "Severity"]


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
    ) -> None:
        self.items.append(
            Diagnostic(code, severity or severity_of(code), self.path, position, message, hint)
        )
