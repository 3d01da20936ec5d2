"""Stage 4 — check: semantic rules over the AST and the template references.

``check_paths`` is the whole front end for a run: discover files, load, read, then run every
rule family on every playbook. One bad file never hides the others, and no input makes it raise.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..ast import Playbook
from ..diagnostics import Diagnostic, DiagnosticSink, Position, Severity
from ..load import Document, load_file, load_text
from ..read import read_document
from . import flow, references, security, templates, tools
from .context import CheckContext, Project

# Order matters only for readability of the output; every family sees the same inputs.
RULE_FAMILIES = (references.check, tools.check, security.check, templates.check, flow.check)
PLAYBOOK_SUFFIXES = (".yaml", ".yml")


@dataclass
class FileResult:
    path: str
    document: Document
    playbook: Playbook | None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.diagnostics)


def discover(paths: Iterable[str]) -> tuple[list[str], list[Diagnostic]]:
    """Playbook files under the given paths, sorted; missing paths become diagnostics."""
    found: list[str] = []
    problems: list[Diagnostic] = []
    for path in paths:
        if os.path.isdir(path):
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [
                    os.path.join(folder, f) for f in sorted(files) if f.endswith(PLAYBOOK_SUFFIXES)
                ]
        elif os.path.isfile(path):
            found.append(path)
        else:
            problems.append(
                Diagnostic(
                    "E001", Severity.ERROR, path, Position(1, 1), "no such file or directory"
                )
            )
    return sorted(dict.fromkeys(found)), problems


def read_file(path: str, dialect: str | None = None) -> FileResult:
    document = load_file(path)
    sink = DiagnosticSink(path)
    sink.items.extend(document.diagnostics)
    try:
        playbook = read_document(document, sink, dialect)
    except Exception as exc:  # noqa: BLE001 — a bug must not hide the other files' findings
        sink.add(
            "E002", Position(1, 1), f"internal error while reading: {type(exc).__name__}: {exc}"
        )
        playbook = None
    return FileResult(path, document, playbook, sink.items)


def check_text(text: str, path: str = "<string>", *, dialect: str | None = None) -> FileResult:
    """Check one playbook given as text (tests, editors, fuzzing)."""
    document = load_text(text, path)
    sink = DiagnosticSink(path)
    sink.items.extend(document.diagnostics)
    result = FileResult(path, document, read_document(document, sink, dialect), sink.items)
    check_results([result])
    return result


def check_results(results: list[FileResult], connections: set[str] | None = None) -> None:
    """Run every rule family on every read playbook (adds to each result's diagnostics)."""
    project = Project(
        catalog_paths={
            p
            for r in results
            if r.playbook
            for p in (r.playbook.catalog_path, r.playbook.name)
            if p
        },
        connections=connections,
    )
    for result in results:
        if result.playbook is None:
            continue
        sink = DiagnosticSink(result.path)
        context = CheckContext(result.playbook, result.document, sink, project)
        for family in RULE_FAMILIES:
            try:
                family(context)
            except Exception as exc:  # noqa: BLE001 — one failing rule must not hide the others
                sink.add(
                    "E002",
                    Position(1, 1),
                    f"internal error in {family.__module__}: {type(exc).__name__}: {exc}",
                )
        result.diagnostics.extend(sink.items)
        result.diagnostics.sort(key=lambda d: d.sort_key)


def check_paths(
    paths: Iterable[str], *, dialect: str | None = None, connections: set[str] | None = None
) -> tuple[list[FileResult], list[Diagnostic]]:
    files, problems = discover(paths)
    results = [read_file(path, dialect) for path in files]
    check_results(results, connections)
    return results, problems
