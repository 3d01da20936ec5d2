"""`noetlc upgrade DIR --report [--json]`: what an upgrade of every playbook would do.

Per file one verdict: ``exact`` (the upgrade means the same), ``unsafe`` (complete only with
``--unsafe-fixes``: each fix with the differences it declares, from the catalogue in unsafe.py),
``not rewritable`` (why: the findings left even with the unsafe fixes), ``current`` (already in
the target generation, nothing to do); and the totals. Text is a rich table; ``--json`` the same
as data.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..diagnostics import Severity
from . import Upgrade, upgrade_text
from .unsafe import KINDS

VERDICTS = ("exact", "unsafe", "not rewritable", "current")


@dataclass
class Verdict:
    path: str
    dialect: str | None
    verdict: str
    fixes: list[dict[str, Any]] = field(default_factory=list)
    why: list[dict[str, Any]] = field(default_factory=list)


def verdict_of(path: str, text: str, target: str = "canonical") -> Verdict:
    exact = upgrade_text(text, path, target=target)
    if exact.writable:
        return Verdict(path, exact.dialect, "exact")
    if not exact.changed and not exact.diagnostics:
        return Verdict(path, exact.dialect, "current")
    unsafe = upgrade_text(text, path, target=target, unsafe=True)
    if unsafe.writable:
        return Verdict(path, exact.dialect, "unsafe", fixes=fixes_of(unsafe))
    return Verdict(path, exact.dialect, "not rewritable", why=reasons_of(unsafe))


def fixes_of(upgrade: Upgrade) -> list[dict[str, Any]]:
    out = []
    for name, line, step in upgrade.unsafe_applied:
        declared = KINDS[name].declared(upgrade.dialect or "")
        out.append(
            {
                "kind": name,
                "line": line + 1,
                "step": step,
                "rewrite": KINDS[name].rewrite,
                "differences": [
                    {"aspect": d.aspect, "says": d.says, "always": d.always} for d in declared
                ],
            }
        )
    return out


def reasons_of(upgrade: Upgrade) -> list[dict[str, Any]]:
    return [
        {
            "code": d.code,
            "line": d.position.line if d.position else 1,
            "column": d.position.col if d.position else 1,
            "message": d.message,
        }
        for d in upgrade.diagnostics
        if d.severity is Severity.ERROR
    ]


def totals(verdicts: list[Verdict]) -> dict[str, int]:
    counts = Counter(v.verdict for v in verdicts)
    out = {name: counts[name] for name in VERDICTS}
    out["files"] = len(verdicts)
    out["unsafe fixes"] = sum(len(v.fixes) for v in verdicts)
    return out


def as_json(verdicts: list[Verdict]) -> str:
    files = [
        {"path": v.path, "dialect": v.dialect, "verdict": v.verdict, "fixes": v.fixes, "why": v.why}
        for v in verdicts
    ]
    return json.dumps({"files": files, "totals": totals(verdicts)}, indent=2) + "\n"


def as_text(verdicts: list[Verdict], width: int = 120) -> str:
    """A rich table (plain text when written to a file or pipe), then the totals."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="noetlc upgrade: migration report", show_lines=True)
    for column in ("file", "from", "verdict", "what changes / why not"):
        table.add_column(column, overflow="fold")
    for v in verdicts:
        if v.verdict == "unsafe":
            detail = "\n".join(
                f"{fix['kind']} (line {fix['line']}): "
                + "; ".join(f"{d['aspect']}: {d['says']}" for d in fix["differences"])
                for fix in v.fixes
            )
        elif v.verdict == "not rewritable":
            detail = "\n".join(f"{w['code']} line {w['line']}: {w['message']}" for w in v.why)
        else:
            detail = "means the same" if v.verdict == "exact" else "nothing to do"
        table.add_row(v.path, v.dialect or "-", v.verdict, detail)
    out = io.StringIO()
    console = Console(file=out, width=width, no_color=True, highlight=False)
    console.print(table)
    count = totals(verdicts)
    console.print(
        f"{count['files']} playbook(s): {count['exact']} exact, {count['unsafe']} unsafe "
        f"({count['unsafe fixes']} unsafe fixes, applied only with --unsafe-fixes), "
        f"{count['not rewritable']} not rewritable, {count['current']} current"
    )
    return out.getvalue()
