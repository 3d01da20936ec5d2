"""The catalogue of diagnostic codes: severity, meaning, why it matters, and a fix.

Codes are stable (tests and users' `--select`/`--ignore` lists depend on them) and grouped by
family: Y yaml, S structure, R references, T templates, F flow, C tool config, X security,
D differences from NoETL's engine (docs/semantics.md section 1).
`noetlc explain CODE` prints an entry. Each family's entries live in ``codes/`` (one module per
family, ``codes/entry.py`` for ``Severity`` and ``Rule``); this module is the one table of them.
"""

from __future__ import annotations

from .codes import (
    differences,
    files,
    flow,
    lowering,
    references,
    security,
    structure,
    templates,
    tool_config,
    upgrade,
)
from .codes.entry import Rule, Severity

__all__ = ["RULES", "Rule", "Severity", "docs_page", "explain", "severity_of"]

# In this order: `noetlc explain` lists the codes as the table holds them.
FAMILIES = (
    files,
    structure,
    references,
    templates,
    flow,
    tool_config,
    lowering,
    upgrade,
    security,
    differences,
)
RULES: dict[str, Rule] = {r.code: r for family in FAMILIES for r in family.RULES}


def severity_of(code: str) -> Severity:
    return RULES[code].severity


# The docs page that teaches what a rule checks (the site under docs/; README links it).
_DOCS = {
    **dict.fromkeys(("C505", "C506", "C507", "C508", "C509", "C510", "C518"), "docs/gates.md"),
    "C511": "docs/quantum.md",
    "C512": "docs/cursor-loops.md",
    **dict.fromkeys(("C502", "C503", "C504", "C513", "C515", "C516"), "docs/tools/index.md"),
    **dict.fromkeys(("T302", "T304", "T307", "R203"), "docs/writing-playbooks.md"),
}


def docs_page(code: str) -> str | None:
    return _DOCS.get(code.upper())


def explain(code: str) -> str | None:
    rule = RULES.get(code.upper())
    if rule is None:
        return None
    fix = "\n".join("    " + line for line in rule.fix.splitlines())
    page = docs_page(rule.code)
    docs = f"\nDocs: {page}\n" if page else ""
    return (
        f"{rule.code} ({rule.severity.label}): {rule.title}\n\nWhy: {rule.why}\n\nFix:\n{fix}\n"
        + docs
    )
