"""v1 -> canonical: not rewritten yet.

A v1 playbook differs from a canonical one in ways the runtime keeps apart by generation (a
step result read as `{{ step.x }}` falls back to `.result` only in v1; a `next` entry's `with`
binds bare names in the target; `end_loop` bodies): every rewrite needs its own proof. Until
then each v1 playbook is reported (U801) and left unchanged.
"""

from __future__ import annotations

from typing import Any

from ..ast import Playbook
from .edits import Edits, note
from .findings import Findings


class V1Upgrade:
    def __init__(self, playbook: Playbook, doc: Any, edits: Edits, findings: Findings) -> None:
        self.doc = doc
        self.edits = edits
        self.findings = findings

    def run(self) -> None:
        line, column = self.doc.lc.key("workflow") if "workflow" in self.doc else (0, 0)
        message = "v1 -> canonical is not rewritten by this version of noetlc upgrade"
        self.findings.inexact(line, column, message)
        self.edits.replace(line, line, [note(column, message)])
