"""What a diagnostic code is: its severity and its catalogue entry (the families' shared shape)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()


E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    severity: Severity
    title: str
    why: str
    fix: str  # a short before/after example


def rule(code: str, severity: Severity, title: str, why: str, fix: str) -> Rule:
    return Rule(code, severity, title, why, fix.strip("\n"))
