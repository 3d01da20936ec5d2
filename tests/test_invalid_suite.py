"""Golden suite of small invalid playbooks: one mistake each, every rule, all three dialects.

Layout: ``tests/invalid/<dialect>/<NNN>_<CODE>_<name>.yaml`` (dialect folder v1, case_v2 or
canonical), each with a comment at the top saying what its mistake is, and next to it
``<same name>.expected``: the exact ``noetlc check --format concise --quiet`` output for that
file, with paths relative to the repository root. A first line ``# args: ...`` adds command-line
flags for that case (e.g. ``--connections tests/invalid/connections.yaml``), or the other
playbooks of a mistake that takes two (``tests/invalid/twins/``, for R208 and R209).

Regenerate the golden files from the current checker with::

    NOETLC_REGEN=1 pytest tests/test_invalid_suite.py

then read the diff: a golden file states where the mistake *is*, not what the tool happens to say.
Cases in ``HAND_WRITTEN`` hold a corrected output for a known checker bug and are not rewritten.
"""

from __future__ import annotations

import gc
import os
import re
import shlex
from pathlib import Path

import pytest

from noetl_compile.cli import main
from noetl_compile.diagnostics import Severity
from noetl_compile.rules import RULES

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "invalid"
DIALECTS = ("v1", "case_v2", "canonical")
REGEN = os.environ.get("NOETLC_REGEN") == "1"
MIN_CASES, MIN_PER_DIALECT = 60, 12

# Golden files written by hand because the checker is wrong there (position or message); the test
# fails until the rule is fixed. Regeneration leaves them alone: remove the entry once fixed.
HAND_WRITTEN: dict[str, str] = {}

_LINE = re.compile(
    r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]\d{3}) (?P<message>\S.*)$"
)
_NAME = re.compile(r"^(?P<number>\d{3})_(?P<code>[A-Z]\d{3})_(?P<name>[a-z0-9_]+)$")


def _cases() -> list[Path]:
    return sorted(p for dialect in DIALECTS for p in (SUITE / dialect).glob("*.yaml"))


CASES = _cases()


def _case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _case_args(path: Path) -> list[str]:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    return shlex.split(first.removeprefix("# args:")) if first.startswith("# args:") else []


def _expected_path(path: Path) -> Path:
    return path.with_suffix(".expected")


def _parse(output: str) -> list[re.Match]:
    lines = output.splitlines()
    matches = [_LINE.match(line) for line in lines]
    bad = [line for line, match in zip(lines, matches) if match is None]
    assert not bad, f"not concise diagnostic lines: {bad}"
    return matches


def _expected_status(output: str) -> int:
    return 1 if any(RULES[m["code"]].severity is Severity.ERROR for m in _parse(output)) else 0


def _check(argv: list[str], capsys, monkeypatch) -> tuple[int, str]:
    """Run `noetlc check` in-process from the repository root; returns (exit status, stdout)."""
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    gc_was_enabled = gc.isenabled()
    try:
        status = main(["check", *argv])
    finally:
        if gc_was_enabled:  # the CLI turns the cyclic collector off for its own process
            gc.enable()
    return status, capsys.readouterr().out


@pytest.mark.parametrize("path", CASES, ids=_case_id)
def test_case(path: Path, capsys, monkeypatch) -> None:
    status, output = _check(
        [_relative(path), *_case_args(path), "--format", "concise", "--quiet"], capsys, monkeypatch
    )
    expected_file = _expected_path(path)
    if REGEN and _case_id(path) not in HAND_WRITTEN:
        expected_file.write_text(output, encoding="utf-8")
    assert expected_file.exists(), (
        f"{_relative(expected_file)} is missing (run with NOETLC_REGEN=1)"
    )
    expected = expected_file.read_text(encoding="utf-8")
    assert expected.strip(), (
        f"{_relative(expected_file)} is empty: every case has a mistake to report"
    )
    matches = _parse(expected)
    # Diagnostics are about the case file; a case of a rule that needs two playbooks (R208, R209)
    # names its fixtures in `# args:` (tests/invalid/twins/), and those may be reported too.
    others = {a for a in _case_args(path) if a.endswith(".yaml")}
    assert _relative(path) in {m["path"] for m in matches}
    assert {m["path"] for m in matches} <= {_relative(path)} | others
    assert _NAME.match(path.stem)["code"] in {m["code"] for m in matches}, (
        "the code in the file name must be among the expected diagnostics"
    )
    assert output == expected
    assert status == _expected_status(expected)


def test_cases_are_named_and_commented() -> None:
    for path in CASES:
        assert _NAME.match(path.stem), (
            f"{_relative(path)}: name must be <NNN>_<CODE>_<short_name>.yaml"
        )
        lines = path.read_text(encoding="utf-8").splitlines()
        comment = (
            lines[1] if lines and lines[0].startswith("# args:") else (lines[0] if lines else "")
        )
        assert comment.startswith("# Mistake"), (
            f"{_relative(path)}: the top comment must say what the mistake is"
        )
    strays = sorted(
        p.name
        for d in DIALECTS
        for p in (SUITE / d).iterdir()
        if p.suffix not in (".yaml", ".expected")
    )
    assert not strays
    orphans = sorted(
        _relative(p)
        for d in DIALECTS
        for p in (SUITE / d).glob("*.expected")
        if not p.with_suffix(".yaml").exists()
    )
    assert not orphans


def test_suite_size() -> None:
    assert len(CASES) >= MIN_CASES


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_dialect_has_cases(dialect: str) -> None:
    assert len(list((SUITE / dialect).glob("*.yaml"))) >= MIN_PER_DIALECT


def test_every_rule_is_covered() -> None:
    covered = set()
    for path in CASES:
        expected = _expected_path(path)
        if expected.exists():
            covered |= {m["code"] for m in _parse(expected.read_text(encoding="utf-8"))}
    # E001 is about paths (tested below) and E003 about files skipped under a folder (a case here
    # is named on the command line, so never skipped: tests/test_cli_snapshots.py and, for
    # special files, tests/test_hostile.py); E004 (output folder) is tested in
    # tests/test_hostile.py; E002 (internal error) and L701 (lowering failure) are bugs of ours
    # that no playbook may trigger; F405 (the parallel-write search stopped) takes hundreds of
    # writers after a join: tests/test_hostile.py. U8xx are `noetlc upgrade`'s, not check's:
    # tests/test_upgrade.py (U803, an upgrade that checks differently, is a bug of ours).
    # X602 is compile's (a credential value left out of the DAG file):
    # tests/test_credential_params.py.
    upgrade = {code for code in RULES if code.startswith("U")}
    missing = sorted(
        set(RULES) - {"E001", "E002", "E003", "E004", "F405", "L701", "X602"} - upgrade - covered
    )
    assert not missing, f"codes without a case: {missing}"


def test_missing_path_is_E001(capsys, monkeypatch) -> None:
    # E001 is about paths, not playbooks: it cannot live in a file of the suite.
    missing = "tests/invalid/no_such_playbook.yaml"
    assert not (ROOT / missing).exists()
    status, output = _check([missing, "--format", "concise", "--quiet"], capsys, monkeypatch)
    assert output == f"{missing}:1:1: E001 [error] no such file or directory\n"
    assert status == 2  # a path that does not exist is a usage error
