"""`noetlc upgrade PATH... [--diff | --write | --check]`: what the command prints and returns.

* ``--diff`` (the default): a unified diff per file that would change, nothing written;
* ``--check``: one line per file that would change; exit 1 if any would (for CI);
* ``--write``: rewrite the files whose upgrade is complete (no U801-U803) in place;
* ``--report`` (``--json``): per file exact / unsafe (with what changes) / not rewritable and
  why, and the totals (migration_report.py); nothing written, exit 0.

``--unsafe-fixes`` applies the unsafe fixes too (unsafe.py: the closest canonical form of a
construct with no exact one, each with a U805 note saying what behaves differently); without
it nothing unsafe is applied and the last line says how many files the unsafe fixes would
complete. Findings print in check's concise form after the diffs. Exit status: 0 nothing left to do, 1 a
file would change (``--check``) or a construct could not be upgraded, 2 usage error.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Sequence

from ..check import discover
from ..diagnostics import Diagnostic, Severity
from ..discover import looks_like_playbook
from ..load import load_file
from ..report import format_concise
from . import Upgrade, upgrade_text


def diff_name(path: str) -> str:
    """The file's name in a diff header after ``a/``/``b/``, as git writes it: relative to the
    working directory when the file is under it, else the absolute path without its leading
    ``/`` (never ``a//tmp/x.yaml``), so ``git apply`` and ``patch -p1`` read it."""
    absolute = os.path.abspath(path)
    here = os.getcwd()
    if os.path.commonpath([absolute, here]) == here:
        return os.path.relpath(absolute, here).replace(os.sep, "/")
    return absolute.replace(os.sep, "/").lstrip("/")


def unified_diff(upgrade: Upgrade) -> str:
    name = diff_name(upgrade.path)
    return "".join(
        difflib.unified_diff(
            upgrade.original.splitlines(keepends=True),
            upgrade.text.splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
        )
    )


def _write(path: str, text: str) -> None:
    """Replace the file atomically, keeping its permission bits."""
    mode = os.stat(path).st_mode & 0o7777
    temporary = f"{path}.noetlc-upgrade.tmp"
    with open(temporary, "x", encoding="utf-8", newline="") as handle:
        handle.write(text)
    os.chmod(temporary, mode)
    os.replace(temporary, path)


def _playbooks(paths: Sequence[str]) -> tuple[list[tuple[str, str]], list[Diagnostic]]:
    """(path, text) of each playbook under ``paths``, and the paths that could not be read."""
    files, problems = discover(paths)
    named = {os.path.normpath(p) for p in paths}
    out = []
    for path in files:
        document = load_file(path)
        if os.path.normpath(path) not in named and not looks_like_playbook(document.data):
            continue  # a docker-compose.yml under the folder: not ours to rewrite
        out.append((path, document.text))
    return out, list(problems)


def report(paths: Sequence[str], *, target: str = "canonical", as_json: bool = False) -> int:
    from .migration_report import as_json as json_text
    from .migration_report import as_text, verdict_of

    playbooks, problems = _playbooks(paths)
    verdicts = [verdict_of(path, text, target) for path, text in playbooks]
    sys.stdout.write(json_text(verdicts) if as_json else as_text(verdicts))
    if problems:
        sys.stderr.write(format_concise(problems, {}))
        return 1
    return 0


def run(
    paths: Sequence[str], *, mode: str = "diff", target: str = "canonical", unsafe: bool = False
) -> int:
    playbooks, problems = _playbooks(paths)
    diagnostics: list[Diagnostic] = list(problems)
    sources: dict[str, str] = {}
    changed, written, current = [], [], 0
    available_files, available_fixes = 0, 0
    out = sys.stdout
    for path, text in playbooks:
        sources[path] = text
        upgrade = upgrade_text(text, path, target=target, unsafe=unsafe)
        diagnostics += upgrade.diagnostics
        if not unsafe and upgrade.unsafe_available:
            probe = upgrade_text(text, path, target=target, unsafe=True)
            if probe.writable:
                available_files += 1
                available_fixes += len(probe.unsafe_applied)
        if not upgrade.changed:
            current += not upgrade.diagnostics
            continue
        changed.append(upgrade)
        if mode == "diff":
            out.write(unified_diff(upgrade))
        elif mode == "check":
            state = "would be upgraded" if upgrade.complete else "needs a hand (see below)"
            out.write(f"{path}: {state}\n")
        elif mode == "write" and upgrade.writable:
            _write(path, upgrade.text)
            written.append(path)
            out.write(f"{path}: upgraded to {target}\n")
    out.write(format_concise(diagnostics, sources))
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    complete = sum(u.complete for u in changed)
    verb = "upgraded" if mode == "write" else "would be upgraded"
    done = len(written) if mode == "write" else complete
    out.write(
        f"{len(sources)} playbook(s): {done} {verb}, {len(changed) - complete} need a hand, "
        f"{current} already {target} or unchanged\n"
    )
    if available_files:
        out.write(
            f"{available_fixes} unsafe fix(es) would complete {available_files} more "
            "playbook(s): --unsafe-fixes applies them (--report says what each changes)\n"
        )
    if errors:
        return 1
    return 1 if mode == "check" and changed else 0
