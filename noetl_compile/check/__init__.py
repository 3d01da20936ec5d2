"""Stage 4 — check: semantic rules over the AST and the template references.

``check_paths`` is the whole front end for a run: discover files, load, read, then run every
rule family on every playbook. One bad file never hides the others, and no input makes it raise.
"""

from __future__ import annotations

import multiprocessing
import os
import stat
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from ..ast import Playbook
from ..diagnostics import Diagnostic, DiagnosticSink, Position, Severity
from ..load import Document, load_file, load_text
from ..read import read_document
from ..rules import severity_of
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
    """Playbook files under the given paths, sorted; missing paths, unreadable folders and
    special files (FIFOs, devices: never opened, they could block) become diagnostics."""
    found: list[str] = []
    problems: list[Diagnostic] = []

    def problem(code: str, path: str, message: str) -> None:
        problems.append(Diagnostic(code, severity_of(code), path, Position(1, 1), message))

    def unreadable(error: OSError) -> None:
        problem("E001", error.filename or "?", f"cannot read folder: {error.strerror}")

    for path in paths:
        kind = _kind(path)
        if kind == "folder":
            for folder, dirs, files in os.walk(path, onerror=unreadable):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if not name.endswith(PLAYBOOK_SUFFIXES):
                        continue
                    full = os.path.join(folder, name)
                    kind = _kind(full)
                    if kind == "file":
                        found.append(full)
                    elif kind == "missing":  # a dangling symlink
                        problem("E001", full, "no such file (a broken symlink?)")
                    else:
                        problem("E003", full, f"skipped: {kind}, not a regular file")
        elif kind == "file":
            found.append(path)
        elif kind == "missing":
            problem("E001", path, "no such file or directory")
        else:
            problem("E003", path, f"skipped: {kind}, not a regular file")
    return sorted(dict.fromkeys(found)), problems


def _kind(path: str) -> str:
    """ "folder", "file", "missing" or what else the path is (following symlinks)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device file"


def read_file(path: str, dialect: str | None = None) -> FileResult:
    try:
        document = load_file(path)
    except Exception as exc:  # noqa: BLE001 — a bug must not hide the other files' findings
        document = Document(path, "", None, [_internal_error(path, "loading", exc)])
    return _read(document, dialect)


def _read(document: Document, dialect: str | None) -> FileResult:
    sink = DiagnosticSink(document.path)
    sink.items.extend(document.diagnostics)
    try:
        playbook = read_document(document, sink, dialect)
    except Exception as exc:  # noqa: BLE001 — a bug must not hide the other files' findings
        sink.items.append(_internal_error(document.path, "reading", exc))
        playbook = None
    return FileResult(document.path, document, playbook, sink.items)


def _internal_error(path: str, stage: str, exc: BaseException) -> Diagnostic:
    message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return Diagnostic(
        "E002", Severity.ERROR, path, Position(1, 1), f"internal error while {stage}: {message}"
    )


def check_text(text: str, path: str = "<string>", *, dialect: str | None = None) -> FileResult:
    """Check one playbook given as text (tests, editors, fuzzing)."""
    try:
        document = load_text(text, path)
    except Exception as exc:  # noqa: BLE001
        document = Document(path, text, None, [_internal_error(path, "loading", exc)])
    result = _read(document, dialect)
    check_results([result])
    return result


def catalog_names(results: Iterable[FileResult]) -> set[str]:
    """The names other playbooks can call these by: `metadata.path` (or `path`) and the name."""
    return {
        p for r in results if r.playbook for p in (r.playbook.catalog_path, r.playbook.name) if p
    }


def check_results(
    results: list[FileResult], connections: set[str] | None = None, *, resolve_nested: bool = True
) -> Project:
    """Run every rule family on every read playbook (adds to each result's diagnostics).

    Nested playbook calls can only be resolved once every file of the run is read; with
    ``resolve_nested=False`` they are left in the returned project for the caller to resolve.
    """
    project = Project(connections=connections)
    for result in results:
        if result.playbook is None:
            continue
        sink = DiagnosticSink(result.path)
        context = CheckContext(result.playbook, result.document, sink, project)
        for family in RULE_FAMILIES:
            try:
                family(context)
            except Exception as exc:  # noqa: BLE001 — one failing rule must not hide the others
                sink.items.append(_internal_error(result.path, f"in {family.__module__}", exc))
        result.diagnostics.extend(sink.items)
    if resolve_nested:
        _attach(
            results,
            references.unresolved_nested_calls(project.nested_calls, catalog_names(results)),
        )
    for result in results:
        result.diagnostics.sort(key=lambda d: d.sort_key)
    return project


def _attach(results: Iterable[FileResult | FileReport], diagnostics: list[Diagnostic]) -> None:
    by_path = {r.path: r for r in results}
    for diagnostic in diagnostics:
        by_path[diagnostic.path].diagnostics.append(diagnostic)


def check_paths(
    paths: Iterable[str], *, dialect: str | None = None, connections: set[str] | None = None
) -> tuple[list[FileResult], list[Diagnostic]]:
    files, problems = discover(paths)
    results = [read_file(path, dialect) for path in files]
    check_results(results, connections)
    return results, problems


@dataclass
class FileReport:
    """What `noetlc check` reports for one file; no AST, so it crosses process boundaries."""

    path: str
    text: str
    diagnostics: list[Diagnostic]


def _check_chunk(files: list[str], dialect: str | None, connections: set[str] | None):
    results = [read_file(path, dialect) for path in files]
    project = check_results(results, connections, resolve_nested=False)
    reports = [FileReport(r.path, r.document.text, r.diagnostics) for r in results]
    return reports, catalog_names(results), project.nested_calls


def _check_in_workers(files: list[str], jobs: int, dialect, connections) -> list:
    """One chunk per worker. A worker that dies (a crash in a C extension, the OOM killer)
    breaks the pool instead of hanging it; its files are then checked one per process, so only
    the file that kills its process is lost, as an E002 finding."""
    context = multiprocessing.get_context("fork")
    chunks = [files[i::jobs] for i in range(jobs)]
    parts = []
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [pool.submit(_check_chunk, chunk, dialect, connections) for chunk in chunks]
        broken = []
        for chunk, future in zip(chunks, futures):
            try:
                parts.append(future.result())
            except BrokenProcessPool:
                broken += chunk
    for path in broken:
        with ProcessPoolExecutor(1, mp_context=context) as alone:
            try:
                parts.append(alone.submit(_check_chunk, [path], dialect, connections).result())
            except BrokenProcessPool:
                crash = Diagnostic(
                    "E002",
                    Severity.ERROR,
                    path,
                    Position(1, 1),
                    "internal error: checking this file stopped the worker process",
                )
                parts.append(([FileReport(path, "", [crash])], set(), []))
    return parts


def report_paths(
    paths: Iterable[str],
    *,
    dialect: str | None = None,
    connections: set[str] | None = None,
    jobs: int = 1,
) -> tuple[list[FileReport], list[Diagnostic]]:
    """`noetlc check`: ``check_paths`` spread over ``jobs`` forked processes for large runs.

    Forking after the imports shares them with the workers for free; a chunk reports its
    diagnostics, catalog names and nested calls, which are resolved here against all files.
    """
    files, problems = discover(paths)
    if jobs <= 1 or len(files) < 16 * jobs or "fork" not in multiprocessing.get_all_start_methods():
        parts = [_check_chunk(files, dialect, connections)]
    else:
        parts = _check_in_workers(files, jobs, dialect, connections)
    reports = sorted((report for part in parts for report in part[0]), key=lambda r: r.path)
    catalog = set().union(*(part[1] for part in parts))
    calls = [call for part in parts for call in part[2]]
    _attach(reports, references.unresolved_nested_calls(calls, catalog))
    for report in reports:
        report.diagnostics.sort(key=lambda d: d.sort_key)
    return reports, problems
