"""`noetlc upgrade`: rewrite a playbook of an older DSL generation into the canonical one.

A playbook is checked first (a playbook check rejects has no meaning to keep: U802), its
generation's rewriter edits only the constructs that change (``edits.py``: the rest of the text
is kept byte for byte), each construct without an exact equivalent is left as written under a
`# noetlc upgrade:` comment (U801), and the result is checked again: it must read as canonical
and have no finding the original did not have (U803). Only a complete, clean upgrade is
``writable``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from ..check import check_text
from ..codes.differences import RULES as _DIFFERENCES
from ..diagnostics import Diagnostic, Severity
from .edits import Edits, load
from .findings import Findings

ENGINE_DIFFERENCE_CODES = frozenset(r.code for r in _DIFFERENCES)

TARGETS = ("canonical",)


@dataclass
class Upgrade:
    path: str
    original: str
    text: str  # the upgraded text (the original when nothing changes)
    dialect: str | None  # the original's generation
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # unsafe fixes (kind name, 0-based line, step or None): applied (``unsafe=True``) or
    # available
    unsafe_applied: list[tuple[str, int, str | None]] = field(default_factory=list)
    unsafe_available: list[tuple[str, int, str | None]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.text != self.original

    @property
    def complete(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)

    @property
    def writable(self) -> bool:
        return self.changed and self.complete


def _findings_key(diagnostics: list[Diagnostic]) -> Counter:
    # Positions move with the edits; what must not change is which findings there are. The
    # D9xx infos say how NoETL's engine of the file's generation would differ: the upgraded
    # text is another generation, so they change by design and do not count.
    return Counter(
        (d.code, d.severity) for d in diagnostics if d.code not in ENGINE_DIFFERENCE_CODES
    )


def _vars_as_ctx(playbook, text: str, path: str, findings: Findings) -> str:
    """Reads of case-v2 `vars` as ctx reads, once the writes became ctx writes (case_vars)."""
    from .case_vars import plan, rename_reads

    written, problem = plan(playbook)
    if not written or problem is not None:
        return text
    renamed, line = rename_reads(text, path)
    if line is not None:
        findings.add("U801", line, 0, "a `vars` read here cannot be renamed to `ctx` exactly")
    return renamed


def upgrade_text(
    text: str, path: str, *, target: str = "canonical", unsafe: bool = False
) -> Upgrade:
    """``unsafe``: apply the unsafe fixes too (``unsafe.py``), each with a U805 note."""
    from .case_v2 import CaseV2Upgrade
    from .v1 import V1Upgrade

    assert target in TARGETS
    findings = Findings(path, unsafe=unsafe)
    checked = check_text(text, path)
    playbook = checked.playbook
    dialect = playbook.dialect if playbook is not None else None
    if dialect == target:
        return Upgrade(path, text, text, dialect, [])  # nothing to upgrade, whatever check says
    errors = [d for d in checked.diagnostics if d.severity is Severity.ERROR]
    if errors or playbook is None:
        first = errors[0] if errors else None
        position = first.position if first else None
        findings.add(
            "U802",
            (position.line - 1) if position else 0,
            (position.col - 1) if position else 0,
            f"check reports {len(errors)} error(s) here (first: {first.code} {first.message})"
            if first
            else "not a playbook",
        )
        return Upgrade(path, text, text, dialect, findings.items)
    edits = Edits(text)
    rewriter = {"case-v2": CaseV2Upgrade, "v1": V1Upgrade}[dialect]
    rewriter(playbook, load(text), edits, findings).run()
    findings.settle(edits)
    upgraded = edits.apply()
    for old, new in findings.renames:
        # Whole words only: `load.command_0` is not `load.command_01`. Linear: a literal and
        # one look-ahead character.
        upgraded = re.sub(re.escape(old) + r"(?![\w])", new, upgraded)
    if dialect == "case-v2" and not findings.items and upgraded != text:
        upgraded = _vars_as_ctx(playbook, upgraded, path, findings)
    result = Upgrade(
        path, text, upgraded, dialect, findings.items, findings.applied, findings.available
    )
    if result.complete and result.changed:
        again = check_text(upgraded, path)
        new_dialect = again.playbook.dialect if again.playbook else None
        before, after = _findings_key(checked.diagnostics), _findings_key(again.diagnostics)
        added = after - before
        if new_dialect != target or added:
            what = ", ".join(f"{code}" for code, _ in sorted(added)) or f"read as {new_dialect}"
            findings.add(
                "U803", 0, 0, f"the upgraded text checks differently ({what}); not written"
            )
    return result
