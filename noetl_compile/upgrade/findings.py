"""The diagnostics of one upgrade (codes U801-U803 in rules.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Diagnostic, Position
from ..rules import severity_of


@dataclass
class Findings:
    path: str
    items: list[Diagnostic] = field(default_factory=list)

    def add(self, code: str, line: int, column: int, message: str) -> None:
        """``line`` and ``column`` 0-based, as ruamel.yaml counts them."""
        self.items.append(
            Diagnostic(code, severity_of(code), self.path, Position(line + 1, column + 1), message)
        )

    def inexact(self, line: int, column: int, message: str) -> None:
        self.add("U801", line, column, message + "; left as written")
