"""Diagnostics: what every stage reports instead of raising.

A diagnostic always has a file, a 1-based line and column, a stable code and a message.
The codes themselves, their severity and their explanation live in ``rules.py``, the catalogue
this module stands on (``Severity`` is defined there and re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .rules import Severity, severity_of

__all__ = ["Diagnostic", "DiagnosticSink", "Position", "Severity", "select_codes"]


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
        self.items.append(
            Diagnostic(
                code, severity or severity_of(code), self.path, position, message, hint, secret
            )
        )


def select_codes(
    diagnostics: Sequence[Diagnostic], select: Sequence[str], ignore: Sequence[str]
) -> list[Diagnostic]:
    """``--select``/``--ignore``: codes or prefixes (``T3``); an empty selection keeps all."""

    def matches(code: str, patterns: Sequence[str]) -> bool:
        return any(code.startswith(p) for p in patterns)

    return [
        d
        for d in diagnostics
        if (not select or matches(d.code, select)) and not matches(d.code, ignore)
    ]
