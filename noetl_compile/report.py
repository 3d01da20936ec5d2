"""Stage 6 — report: diagnostics as text (concise or full), JSON, GitHub annotations or SARIF."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from .diagnostics import Diagnostic, Severity
from .rules import RULES

_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _one_line(text: str) -> str:
    """Escape what could start a new line or rewrite the terminal, so one finding is one line
    (a file name or quoted value with a newline must not forge a second finding)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else _escape(c) for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


class _Redactor:
    """Masks the literal secrets found in a file wherever a format would print text of that file."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self._secrets: dict[str, list[str]] = {}
        for d in diagnostics:
            if d.secret and d.secret.strip():
                self._secrets.setdefault(d.path, []).append(d.secret)
        for secrets in self._secrets.values():
            secrets.sort(key=len, reverse=True)  # a longer secret first: it may hold a shorter one

    def __call__(self, path: str, text: str | None) -> str | None:
        if text is None:
            return None
        for secret in self._secrets.get(path, ()):
            if secret in text:
                text = text.replace(secret, "*" * len(secret))
        return text


def concise(diagnostic: Diagnostic, redact: _Redactor | None = None) -> str:
    """``path:line:col: CODE [severity] message``: the severity where ruff puts its fix marker,
    so that errors and warnings can be told apart (and grepped) without the rule table."""
    d = diagnostic
    message = redact(d.path, d.message) if redact else d.message
    return (
        f"{_one_line(d.path)}:{d.position.line}:{d.position.col}: {d.code} "
        f"[{d.severity.label}] {_one_line(message)}"
    )


def format_concise(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    redact = _Redactor(diagnostics)
    return "".join(concise(d, redact) + "\n" for d in diagnostics)


# The full form quotes at most this much of a source line, around the column: a playbook may hold
# a line of megabytes, and quoting all of it under each of its findings made the output grow
# with the square of the line.
_QUOTE_WIDTH, _QUOTE_BEFORE = 120, 40


def format_full(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    """ruff-style: the line of YAML with a caret under the column, and the hint if any."""
    redact = _Redactor(diagnostics)
    blocks = []
    lines_of: dict[str, list[str]] = {}
    redacted: dict[tuple[str, int], str] = {}  # each line masked once, however many findings
    for d in diagnostics:
        lines = lines_of.setdefault(d.path, sources.get(d.path, "").splitlines())
        text = [concise(d, redact)]
        if 0 < d.position.line <= len(lines):
            key = (d.path, d.position.line)
            line = redacted.get(key)
            if line is None:
                line = redacted[key] = redact(d.path, lines[d.position.line - 1]).replace("\t", " ")
            column = min(d.position.col - 1, len(line))
            if d.secret:  # mask from the secret to the end of its line, whatever was matched
                line = line[:column] + "*" * (len(line) - column)
            before, quoted = _quote(line, column)
            gutter = str(d.position.line)
            text.append(f"{' ' * len(gutter)} |")
            text.append(f"{gutter} | {quoted}")
            text.append(f"{' ' * len(gutter)} | {' ' * before}^")
        if d.hint:
            text.append(f"  = help: {_one_line(redact(d.path, d.hint))}")
        blocks.append("\n".join(text) + "\n")
    return "\n".join(blocks)


def _quote(line: str, column: int) -> tuple[int, str]:
    """(width before the caret, the quoted line): a window of the line around ``column``,
    marked with `...` where it was cut, its control characters escaped."""
    start = 0 if len(line) <= _QUOTE_WIDTH else max(0, column - _QUOTE_BEFORE)
    end = min(len(line), start + _QUOTE_WIDTH)
    head = ("..." if start else "") + _one_line(line[start:column])
    tail = _one_line(line[column:end]) + ("..." if end < len(line) else "")
    return len(head), head + tail


def format_json(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    redact = _Redactor(diagnostics)
    items = [
        {
            "path": d.path,
            "line": d.position.line,
            "column": d.position.col,
            "code": d.code,
            "severity": d.severity.label,
            "message": redact(d.path, d.message),
            "hint": redact(d.path, d.hint),
        }
        for d in diagnostics
    ]
    return json.dumps(items, indent=2) + "\n"


def _github_data(text: str) -> str:
    """Workflow-command data: `%`, CR and LF are escaped (GitHub's toCommandValue)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    """Workflow-command property values also escape `:` and `,` (GitHub's toCommandProperties)."""
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    redact = _Redactor(diagnostics)
    return "".join(
        f"::{_GITHUB_LEVEL[d.severity]} file={_github_property(d.path)},line={d.position.line},"
        f"col={d.position.col},title={_github_property(d.code)}::"
        f"{_github_data(d.code + ' ' + redact(d.path, d.message))}\n"
        for d in diagnostics
    )


def format_sarif(diagnostics: Sequence[Diagnostic], sources: dict[str, str]) -> str:
    redact = _Redactor(diagnostics)
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
            "message": {"text": redact(d.path, d.message)},
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
