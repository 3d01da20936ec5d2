"""`noetlc compile`: playbooks -> one Airflow DAG file each (stages lower + emit).

A file with check errors (with ``--strict``, warnings too) is not compiled and the run exits 1,
while every other playbook still compiles; every diagnostic ``--select``/``--ignore`` keeps is
printed in check's format, warnings included. A path that does not exist exits 2. Output is deterministic: the same
playbooks give the same bytes from any working directory. Unchanged files are not rewritten;
files this compiler generated earlier whose playbook is gone are removed (``output.py`` writes
safely and records which source owns which file). ``--check`` writes nothing and exits 1 when
the output folder is stale (a file missing, different, or orphaned); an output that cannot be
written safely exits 1.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .check import FileResult, check_paths
from .diagnostics import Diagnostic, Position, Severity, select_codes
from .output import sync
from .rules import severity_of

if TYPE_CHECKING:
    from .lower.ir import IR

__all__ = [
    "CompileReport",
    "CompiledFile",
    "compile_paths",
    "compile_result",
    "file_sha256",
    "lower_result",
    "run",
]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
LOWERING_FAILED = "L701"
OUTPUT_FAILED = "E004"


@dataclass
class CompiledFile:
    source: str  # the playbook path as given
    display: str  # the path written into the header (relative to the compile root)
    output: str  # the DAG file path
    dag_id: str
    text: str


@dataclass
class CompileReport:
    files: list[CompiledFile] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # playbooks not compiled
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # --check: files that would change
    removed: list[str] = field(default_factory=list)  # orphans (removed, or stale in --check)
    playbooks: int = 0
    dag_ids: dict[str, str] = field(default_factory=dict)  # playbook path -> its DAG id (all read)


def file_sha256(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _display_and_output(path: str, roots: Sequence[str]) -> tuple[str, str]:
    """(header path, output path relative to the output folder) for a playbook file."""
    absolute = os.path.abspath(path)
    for root in roots:
        root_abs = os.path.abspath(root)
        if os.path.isdir(root_abs) and (absolute + os.sep).startswith(
            root_abs.rstrip(os.sep) + os.sep
        ):
            inner = os.path.relpath(absolute, root_abs)
            display = os.path.relpath(absolute, os.path.dirname(root_abs.rstrip(os.sep)) or os.sep)
            return display.replace(os.sep, "/"), inner
        if absolute == root_abs:
            return os.path.basename(absolute), os.path.basename(absolute)
    return os.path.basename(absolute), os.path.basename(absolute)


def _output_name(relative: str) -> str:
    parts = relative.replace(os.sep, "/").split("/")
    stem = re.sub(r"\.(ya?ml)$", "", parts[-1])
    clean = [re.sub(r"[^A-Za-z0-9_.-]+", "_", p).strip(".") or "_" for p in [*parts[:-1], stem]]
    return "/".join(clean) + ".py"


def lower_result(
    result: FileResult, display: str, dag_id: str | None = None, *, fuse: bool = False
) -> IR:
    """The IR of one checked playbook, as `compile` and `graph` both need it. ``fuse`` is
    `--fuse`; the playbook's own `metadata.noetlc.fuse`, when it has one, decides instead."""
    from .lower import lower

    playbook = result.playbook
    assert playbook is not None
    digest = file_sha256(result.path)
    fuse = playbook.fuse if playbook.fuse is not None else fuse
    return lower(playbook, source=display, source_sha256=digest, dag_id=dag_id, fuse=fuse)


def compile_result(
    result: FileResult, display: str, dag_id: str | None = None, *, fuse: bool = False
) -> tuple[str, IR]:
    """Lower and emit one checked playbook -> (DAG file text, IR)."""
    from .emit.python import emit_python

    ir = lower_result(result, display, dag_id, fuse=fuse)
    return emit_python(ir), ir


def _unique(candidate: str, taken: set[str]) -> str:
    value, counter = candidate, 1
    while value.lower() in taken:
        counter += 1
        value = f"{candidate}_{counter}"
    taken.add(value.lower())
    return value


def compile_paths(
    paths: Iterable[str],
    output: str,
    *,
    dialect: str | None = None,
    connections: set[str] | None = None,
    check_only: bool = False,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    strict: bool = False,
    exclude: Sequence[str] = (),
    fuse: bool = False,
    schedule_on_assets: bool = False,
    airflow: tuple[int, int] | None = None,
) -> CompileReport:
    # lower and emit are imported only when a playbook gets that far (below): a run of files
    # that all fail check answers as fast as `check` (`noetlc run` of a broken playbook).
    from .dag_ids import dag_id_for_path

    paths = list(paths)
    results, problems = check_paths(
        paths, dialect=dialect, connections=connections, exclude=exclude, airflow=airflow
    )
    # A document of another kind (a NoETL Subscription...) was skipped with a note (E003).
    skipped = {r.path for r in results if r.playbook is None and not r.has_errors}
    report = CompileReport(playbooks=len(results) - len(skipped))
    report.diagnostics.extend(select_codes(problems, select, ignore))
    failing = Severity.WARNING if strict else Severity.ERROR
    report.sources = {r.path: r.document.text for r in results}
    outputs: set[str] = set()
    lowered: list[tuple[FileResult, str, str, str, IR]] = []
    for result in results:
        if result.playbook is not None:
            stem = os.path.basename(result.path).rsplit(".", 1)[0]
            # lower.dag_id_for, without importing the lowering
            report.dag_ids[result.path] = dag_id_for_path(result.playbook.catalog_key or stem)
        findings = select_codes(result.diagnostics, select, ignore)
        report.diagnostics.extend(findings)
        if result.path in skipped:
            continue
        if result.playbook is None or any(d.severity >= failing for d in findings):
            report.failed.append(result.path)
            continue
        display, relative = _display_and_output(result.path, paths)
        name = _output_name(relative)
        base = name[:-3]
        name = _unique(base, outputs) + ".py"
        # The playbook's own id, never made unique against the other files of the run: two
        # playbooks with one id are R208 errors and were not compiled (see dag_ids.py).
        dag_id = report.dag_ids[result.path]
        try:
            lowered.append(
                (result, display, name, dag_id, lower_result(result, display, dag_id, fuse=fuse))
            )
        except Exception as exc:  # noqa: BLE001 - one playbook the lowering cannot handle never hides the others
            report.failed.append(result.path)
            report.diagnostics.append(_lowering_failed(result.path, exc))
    if schedule_on_assets:
        schedule_on_tables([ir for *_, ir in lowered])
    if lowered:
        from .emit.python import emit_python
    for result, display, name, dag_id, ir in lowered:
        try:
            text = emit_python(ir)
        except Exception as exc:  # noqa: BLE001 - as above
            report.failed.append(result.path)
            report.diagnostics.append(_lowering_failed(result.path, exc))
            continue
        withheld = select_codes(_withheld(result, ir), select, ignore)
        report.diagnostics.extend(withheld)
        if any(d.severity >= failing for d in withheld):
            report.failed.append(result.path)
            continue
        leak = _written_secret(result, text)
        if leak is not None:
            # Even with X601 ignored: Param defaults are shown in the Airflow UI, and a DAG file
            # is read by every scheduler and worker.
            report.failed.append(result.path)
            report.diagnostics.append(leak)
            continue
        report.files.append(
            CompiledFile(result.path, display, os.path.join(output, name), dag_id, text)
        )
    _sync(report, output, check_only, paths)
    return report


def _lowering_failed(path: str, exc: Exception) -> Diagnostic:
    return Diagnostic(
        LOWERING_FAILED,
        Severity.ERROR,
        path,
        Position(1, 1),
        f"cannot compile this playbook: {type(exc).__name__}: {exc}",
        "this is a compiler bug; please report it with the playbook",
    )


def schedule_on_tables(irs: Sequence[IR]) -> None:
    """``--schedule-on-assets``: each DAG is scheduled on the tables it reads that another DAG
    of the same compile writes (its own writes never schedule it: a run would trigger itself).
    Airflow runs it once every one of those tables got an update since its last run."""
    writers: dict[str, set[str]] = {}
    for ir in irs:
        for uri in ir.asset_writes:
            writers.setdefault(uri, set()).add(ir.dag_id)
    for ir in irs:
        ir.schedule_assets = [
            uri for uri in ir.asset_reads if writers.get(uri, set()) - {ir.dag_id}
        ]


def _withheld(result: FileResult, ir: IR) -> list[Diagnostic]:
    """X602 for each literal under a credential-named workload key that the DAG file leaves out
    (lower/credentials.py): the run request has to supply it."""
    from .check.context import CheckContext

    out = []
    for item in ir.withheld:
        node = result.playbook.workload if result.playbook is not None else None
        position = Position(1, 1)
        for step in item.path:
            try:
                position = CheckContext.pos(node, step)
                node = node[step]
            except (KeyError, IndexError, TypeError):
                break
        where = ".".join(str(part) for part in item.path)
        out.append(
            Diagnostic(
                "X602",
                severity_of("X602"),
                result.path,
                position,
                f"`{where}` names a credential: its value is left out of the DAG file"
                + (" and the Param is masked in the trigger form" if len(item.path) == 1 else ""),
                "pass it in the run request (`noetlc run --conf`, the trigger form), or write "
                "`{{ env.NAME }}`; keep secrets out of playbooks",
            )
        )
    return out


def _written_forms(secret: str) -> set[str]:
    """``secret`` as the DAG text may spell it: as is, or inside a Python string literal of
    either quote (`ab'cd` in a single-quoted literal is `ab\\'cd`; repr picks one quote only)."""
    backslashed = secret.replace("\\", "\\\\")
    single, double = backslashed.replace("'", "\\'"), backslashed.replace('"', '\\"')
    forms = {secret, repr(secret)[1:-1], single, double, single.replace('"', '\\"')}
    return forms


def _written_secret(result: FileResult, text: str) -> Diagnostic | None:
    """An X601 finding whose secret the DAG text would hold (as written or as a literal)."""
    for d in result.diagnostics:
        secret = d.secret if d.code == "X601" and d.secret and d.secret.strip() else None
        if secret and any(form in text for form in _written_forms(secret)):
            return Diagnostic(
                "X601",
                Severity.ERROR,
                result.path,
                d.position,
                "not compiled: the DAG file would hold this literal secret",
                d.hint,
                secret,
            )
    return None


def _sync(report: CompileReport, output: str, check_only: bool, roots: Sequence[str]) -> None:
    files = [(f.source, f.output, f.text.encode("utf-8")) for f in report.files]
    done = sync(files, output, roots, check_only)
    report.written, report.unchanged = done.written, done.unchanged
    report.stale, report.removed = done.stale, done.removed
    for path, message in done.errors:
        if path not in report.failed:
            report.failed.append(path)
        report.diagnostics.append(
            Diagnostic(OUTPUT_FAILED, Severity.ERROR, path, Position(1, 1), message)
        )
    failed = {path for path, _ in done.errors}
    report.files = [f for f in report.files if f.source not in failed]


def run(args: argparse.Namespace, connections: set[str] | None = None) -> int:
    """`noetlc compile` after the CLI parsed its arguments (and read ``--connections``)."""
    from .report import FORMATTERS

    report = compile_paths(
        args.paths,
        args.output,
        dialect=args.dialect,
        connections=connections,
        check_only=args.check,
        select=args.select,
        ignore=args.ignore,
        strict=args.strict,
        exclude=args.exclude,
        fuse=getattr(args, "fuse", False),
        schedule_on_assets=getattr(args, "schedule_on_assets", False),
        airflow=getattr(args, "airflow_version", None),
    )
    diagnostics = sorted(report.diagnostics, key=lambda d: d.sort_key)
    if diagnostics:
        sys.stdout.write(FORMATTERS[args.format](diagnostics, report.sources))
    human = args.format in ("concise", "full")
    out = sys.stdout if human else sys.stderr
    if args.check:
        for path in report.stale:
            print(f"stale: {path}", file=out)
        for path in report.removed:
            print(f"orphaned: {path} (its playbook is gone)", file=out)
    stale = bool(report.stale or report.removed) if args.check else False
    summary = f"{len(report.files)} of {report.playbooks} playbook(s) compiled" + (
        f", {len(report.failed)} with errors" if report.failed else ""
    )
    if args.check:
        summary += "; output is stale" if stale else "; output is up to date"
    else:
        summary += f"; {len(report.written)} written, {len(report.unchanged)} unchanged" + (
            f", {len(report.removed)} removed" if report.removed else ""
        )
    print(summary + ".", file=out)
    if any(not os.path.exists(path) for path in args.paths):
        return EXIT_USAGE  # a path that does not exist is a mistake in the command
    errors = any(d.severity is Severity.ERROR for d in report.diagnostics)
    return EXIT_FINDINGS if report.failed or stale or errors else EXIT_OK
