"""The diagnostics of one upgrade (codes U801-U805 in codes/upgrade.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..diagnostics import Diagnostic, Position, Severity
from ..rules import severity_of
from .edits import Edits, note


@dataclass
class Findings:
    path: str
    items: list[Diagnostic] = field(default_factory=list)
    # (line, column, condition) of rewrites exact within a bound only (U804), 0-based
    bounded: list[tuple[int, int, str]] = field(default_factory=list)
    unsafe: bool = False  # apply unsafe fixes (`--unsafe-fixes`)
    # the unsafe fixes applied (kind name, 0-based line, step or None), or available when not
    applied: list[tuple[str, int, str | None]] = field(default_factory=list)
    available: list[tuple[str, int, str | None]] = field(default_factory=list)
    # whole-word template reads renamed over the upgraded text (`load.command_0` -> `load`)
    renames: list[tuple[str, str]] = field(default_factory=list)

    def add(self, code: str, line: int, column: int, message: str) -> None:
        """``line`` and ``column`` 0-based, as ruamel.yaml counts them."""
        self.items.append(
            Diagnostic(code, severity_of(code), self.path, Position(line + 1, column + 1), message)
        )

    def inexact(self, line: int, column: int, message: str) -> None:
        self.add("U801", line, column, message + "; left as written")

    def settle(self, edits: Edits) -> None:
        """Report the bounded rewrites (U804, with a note in the text) when the upgrade is
        complete: only a complete upgrade is written, and only a written one needs them."""
        if any(d.severity is Severity.ERROR for d in self.items):
            return
        for line, column, message in self.bounded:
            self.add("U804", line, column, message)
            edits.replace(line, line, [note(column, message)])
