"""Stage 6 — report: diagnostics as text (concise or full), JSON, GitHub annotations or SARIF."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from .diagnostics import Diagnostic, Severity
from .rules import RULES

_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def concise(diagnostic: Diagnostic) -> str:
    """``path:line:col: CODE [severity] message``: the severity where ruff puts its fix marker,
    so that errors and warnings can be told apart (and grepped) without the rule table."""
    d = diagnostic
    return f"{d.path}:{d.position.line}:{d.position.col}: {d.code} [{d.severity.label}] {d.message}"


def format_concise(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    return "".join(concise(d) + "\n" for d in diagnostics)


def format_full(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    """ruff-style: the line of YAML with a caret under the column, and the hint if any."""
    blocks = []
    lines_of: dict[str, list[str]] = {}
    for d in diagnostics:
        lines = lines_of.setdefault(d.path, sources.get(d.path, "").splitlines())
        text = [concise(d)]
        if 0 < d.position.line <= len(lines):
            source_line = lines[d.position.line - 1].replace("\t", " ")
            gutter = str(d.position.line)
            text.append(f"{' ' * len(gutter)} |")
            text.append(f"{gutter} | {source_line}")
            text.append(f"{' ' * len(gutter)} | {' ' * (d.position.col - 1)}^")
        if d.hint:
            text.append(f"  = help: {d.hint}")
        blocks.append("\n".join(text) + "\n")
    return "\n".join(blocks)


def format_json(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    items = [
        {
            "path": d.path,
            "line": d.position.line,
            "column": d.position.col,
            "code": d.code,
            "severity": d.severity.label,
            "message": d.message,
            "hint": d.hint,
        }
        for d in diagnostics
    ]
    return json.dumps(items, indent=2) + "\n"


def _github_escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def format_github(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    return "".join(
        f"::{_GITHUB_LEVEL[d.severity]} file={d.path},line={d.position.line},col={d.position.col},"
        f"title={d.code}::{_github_escape(d.code + ' ' + d.message)}\n"
        for d in diagnostics
    )


def format_sarif(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    used = sorted({d.code for d in diagnostics})
    rules = [
        {
            "id": code,
            "name": RULES[code].title,
            "shortDescription": {"text": RULES[code].title},
            "fullDescription": {"text": RULES[code].why},
            "defaultConfiguration": {"level": _SARIF_LEVEL[RULES[code].severity]},
        }
        for code in used
    ]
    results = [
        {
            "ruleId": d.code,
            "level": _SARIF_LEVEL[d.severity],
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": d.path},
                        "region": {"startLine": d.position.line, "startColumn": d.position.col},
                    }
                }
            ],
        }
        for d in diagnostics
    ]
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "noetlc", "rules": rules}}, "results": results}],
    }
    return json.dumps(log, indent=2) + "\n"


FORMATTERS: dict[str, Callable[[Sequence[Diagnostic], dict[str, str]], str]] = {
    "concise": format_concise,
    "full": format_full,
    "json": format_json,
    "github": format_github,
    "sarif": format_sarif,
}


def summary(diagnostics: Sequence[Diagnostic], files: int) -> str:
    counts = {s: sum(1 for d in diagnostics if d.severity is s) for s in Severity}
    if not diagnostics:
        return f"All checks passed: {files} playbook{'s' if files != 1 else ''}.\n"
    parts = [
        f"{counts[s]} {s.label}{'s' if counts[s] != 1 else ''}"
        for s in reversed(Severity)
        if counts[s]
    ]
    return f"Found {', '.join(parts)} in {files} playbook{'s' if files != 1 else ''}.\n"
