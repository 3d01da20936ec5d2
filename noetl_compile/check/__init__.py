"""Stage 4 — check: semantic rules over the AST and the template references.

``check_paths`` is the whole front end for a run: discover files, load, read, then run every
rule family on every playbook. One bad file never hides the others, and no input makes it raise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..airflow_versions import default_target
from ..ast import Playbook
from ..diagnostics import Diagnostic, DiagnosticSink, Position, Severity
from ..discover import Found, find_files, looks_like_playbook
from ..load import Document, load_file, load_text
from ..read import read_document
from ..rules import severity_of
from . import differences, flow, references, security, templates, tools
from .context import CatalogClaim, CheckContext, NestedCall, Project

# Order matters only for readability of the output; every family sees the same inputs.
RULE_FAMILIES = (
    references.check,
    tools.check,
    security.check,
    templates.check,
    flow.check,
    differences.check,
)


@dataclass
class FileResult:
    path: str
    document: Document
    playbook: Playbook | None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.diagnostics)


def discover(
    paths: Iterable[str], exclude: Iterable[str] = ()
) -> tuple[list[str], list[Diagnostic]]:
    """Playbook files under the given paths, sorted; missing paths, unreadable folders and
    special files (FIFOs, devices: never opened, they could block) become diagnostics."""
    found = find_files(list(paths), tuple(exclude))
    return found.files, _found_problems(found)


def _found_problems(found: Found) -> list[Diagnostic]:
    def problem(code: str, path: str, message: str) -> Diagnostic:
        return Diagnostic(code, severity_of(code), path, Position(1, 1), message)

    return (
        [problem("E001", path, "no such file or directory") for path in found.missing]
        + [problem("E001", path, "no such file (a broken symlink?)") for path in found.broken]
        + [problem("E001", path, f"cannot read folder: {why}") for path, why in found.unreadable]
        + [
            problem("E003", path, f"skipped: {kind}, not a regular file")
            for path, kind in found.special
        ]
    )


def read_file(path: str, dialect: str | None = None) -> FileResult:
    return _read(_load(path), dialect)


def _load(path: str) -> Document:
    try:
        return load_file(path)
    except Exception as exc:  # noqa: BLE001 — a bug must not hide the other files' findings
        return Document(path, "", None, [_internal_error(path, "loading", exc)])


def _internal_error(path: str, stage: str, exc: BaseException) -> Diagnostic:
    message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return Diagnostic(
        "E002", Severity.ERROR, path, Position(1, 1), f"internal error while {stage}: {message}"
    )


def _read(document: Document, dialect: str | None) -> FileResult:
    sink = DiagnosticSink(document.path)
    sink.items.extend(document.diagnostics)
    try:
        playbook = read_document(document, sink, dialect)
    except Exception as exc:  # noqa: BLE001 — a bug must not hide the other files' findings
        sink.items.append(_internal_error(document.path, "reading", exc))
        playbook = None
    skipped = any(d.code == "E003" for d in sink.items)  # a document of another kind
    if (
        playbook is None
        and not skipped
        and not any(d.severity is Severity.ERROR for d in sink.items)
    ):
        # Nothing to check or compile must never read as "all checks passed": a bug of ours
        # if no diagnostic says why.
        sink.items.append(
            Diagnostic(
                "E002",
                Severity.ERROR,
                document.path,
                Position(1, 1),
                "internal error while reading: no playbook was read and no reason was reported",
            )
        )
    return FileResult(document.path, document, playbook, sink.items)


def _read_found(
    files: list[str], named: set[str], dialect: str | None
) -> tuple[list[FileResult], list[Diagnostic]]:
    """Read the files found; a YAML file found under a folder that is plainly not a playbook
    (docker-compose.yml, a CI config) is skipped with an E003 note instead of reported on."""
    results, notes = [], []
    for path in files:
        document = _load(path)
        if (
            path not in named
            and not document.diagnostics
            and not looks_like_playbook(document.data)
        ):
            notes.append(
                Diagnostic(
                    "E003",
                    Severity.INFO,
                    path,
                    Position(1, 1),
                    "not a playbook (no `apiVersion: noetl.io/...`, `kind: Playbook` or "
                    "`workflow`): skipped",
                    "name the file on the command line to check it anyway, or --exclude it",
                )
            )
            continue
        results.append(_read(document, dialect))
    return results, notes


def check_text(text: str, path: str = "<string>", *, dialect: str | None = None) -> FileResult:
    """Check one playbook given as text (tests, editors, fuzzing)."""
    try:
        document = load_text(text, path)
    except Exception as exc:  # noqa: BLE001
        document = Document(path, text, None, [_internal_error(path, "loading", exc)])
    result = _read(document, dialect)
    check_results([result])
    return result


def check_results(
    results: list[FileResult],
    connections: set[str] | None = None,
    *,
    resolve_nested: bool = True,
    airflow: tuple[int, int] | None = None,
) -> Project:
    """Run every rule family on every read playbook (adds to each result's diagnostics).

    Nested playbook calls can only be resolved once every file of the run is read; with
    ``resolve_nested=False`` they are left in the returned project for the caller to resolve.
    ``airflow`` is the Airflow (major, minor) the DAGs are for (default: the installed one, else
    the newest supported; ``airflow_versions.default_target``).
    """
    project = Project(connections=connections, airflow=airflow or default_target())
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
        _attach(results, resolve_project(project.nested_calls, project.claims))
    for result in results:
        result.diagnostics.sort(key=lambda d: d.sort_key)
    return project


def resolve_project(calls: list[NestedCall], claims: list[CatalogClaim]) -> list[Diagnostic]:
    """What only the whole run decides: playbooks claiming one catalog path or DAG id (R208),
    and nested calls that name no playbook, or more than one (R204, R209)."""
    return references.duplicate_claims(claims) + references.unresolved_nested_calls(calls, claims)


def _attach(results: Iterable[FileResult | FileReport], diagnostics: list[Diagnostic]) -> None:
    by_path = {r.path: r for r in results}
    for diagnostic in diagnostics:
        by_path[diagnostic.path].diagnostics.append(diagnostic)


def check_paths(
    paths: Iterable[str],
    *,
    dialect: str | None = None,
    connections: set[str] | None = None,
    exclude: Iterable[str] = (),
    airflow: tuple[int, int] | None = None,
) -> tuple[list[FileResult], list[Diagnostic]]:
    """Read and check every playbook under ``paths``; also returns the run's problems: E001
    for a missing path, E003 notes for YAML files skipped as not playbooks."""
    found = find_files(list(paths), tuple(exclude))
    results, notes = _read_found(found.files, found.named, dialect)
    check_results(results, connections, airflow=airflow)
    return results, _found_problems(found) + notes


@dataclass
class FileReport:
    """What `noetlc check` reports for one file; no AST, so it crosses process boundaries."""

    path: str
    text: str
    diagnostics: list[Diagnostic]


def _check_chunk(
    files: list[str],
    named: set[str],
    dialect: str | None,
    connections: set[str] | None,
    airflow: tuple[int, int] | None = None,
):
    results, notes = _read_found(files, named, dialect)
    project = check_results(results, connections, resolve_nested=False, airflow=airflow)
    reports = [FileReport(r.path, r.document.text, r.diagnostics) for r in results]
    return reports, project.claims, project.nested_calls, notes


def _check_in_workers(
    files: list[str], named: set[str], jobs: int, dialect, connections, airflow
) -> list:
    """One chunk per worker. A worker that dies (a crash in a C extension, the OOM killer)
    breaks the pool instead of hanging it; its files are then checked one per process, so only
    the file that kills its process is lost, as an E002 finding."""
    # Imported here: a run small enough for one process (most runs) does not pay for them.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    context = multiprocessing.get_context("fork")
    chunks = [files[i::jobs] for i in range(jobs)]
    parts = []
    broken: list[str] = []
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [
            pool.submit(_check_chunk, chunk, named, dialect, connections, airflow)
            for chunk in chunks
        ]
        for chunk, future in zip(chunks, futures):
            try:
                parts.append(future.result())
            except BrokenProcessPool:
                broken += chunk
    for path in broken:
        with ProcessPoolExecutor(1, mp_context=context) as alone:
            try:
                parts.append(
                    alone.submit(
                        _check_chunk, [path], named, dialect, connections, airflow
                    ).result()
                )
            except BrokenProcessPool:
                crash = Diagnostic(
                    "E002",
                    Severity.ERROR,
                    path,
                    Position(1, 1),
                    "internal error: checking this file stopped the worker process",
                )
                parts.append(([FileReport(path, "", [crash])], [], [], []))
    return parts


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def report_paths(
    paths: Iterable[str],
    *,
    dialect: str | None = None,
    connections: set[str] | None = None,
    jobs: int = 1,
    exclude: Iterable[str] = (),
    airflow: tuple[int, int] | None = None,
) -> tuple[list[FileReport], list[Diagnostic]]:
    """`noetlc check`: ``check_paths`` spread over ``jobs`` forked processes for large runs.

    Forking after the imports shares them with the workers for free; a chunk reports its
    diagnostics, catalog claims and nested calls, which are resolved here against all files.
    """
    found = find_files(list(paths), tuple(exclude))
    files, named = found.files, found.named
    if jobs > 1 and len(files) >= 16 * jobs and _can_fork():
        parts = _check_in_workers(files, named, jobs, dialect, connections, airflow)
    else:
        parts = [_check_chunk(files, named, dialect, connections, airflow)]
    notes = sorted((note for part in parts for note in part[3]), key=lambda d: d.sort_key)
    problems = _found_problems(found) + notes
    reports = sorted((report for part in parts for report in part[0]), key=lambda r: r.path)
    claims = [claim for part in parts for claim in part[1]]
    calls = [call for part in parts for call in part[2]]
    _attach(reports, resolve_project(calls, claims))
    for report in reports:
        report.diagnostics.sort(key=lambda d: d.sort_key)
    return reports, problems
