"""Hostile inputs: `noetlc check` and `compile` never crash, hang, leak or lie.

One case per kind of attack, grouped by the items of issue 10 (1 YAML loader limits, 2 linear
time, 3 template truth, 4 secrets in output, 6 file system, 7 output escaping). Each case builds
its files in a fresh folder, runs the real CLI in a child process (a segfault or a hang must not
take the test run with it) and asserts the exit status, the diagnostics (code, line and column)
and a generous time bound; and for every case: no traceback, no death by signal, and every line
of concise output is one `path:line:col: CODE message` finding or the summary.

The cases live in tests/hostile_cases_{input,scale,output}.py, their builders and the CLI runner
in tests/hostile_support.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile_cases_input import INPUT_CASES
from tests.hostile_cases_output import OUTPUT_CASES
from tests.hostile_cases_scale import SCALE_CASES
from tests.hostile_support import (
    FINDING_LINE,
    MIN_CASES,
    ROOT,
    SUMMARY_LINE,
    Case,
    build,
    children_cpu,
    playbook,
    run_cli,
)

CASES: list[Case] = [*INPUT_CASES, *SCALE_CASES, *OUTPUT_CASES]


def test_suite_size():
    assert len(CASES) >= MIN_CASES
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.fixture
def case_folder(tmp_path: Path):
    """The case's folder, removed afterwards in a loop: pytest removes old temporary folders
    with shutil.rmtree, which recurses once per level and fails on a deep_tree."""
    yield tmp_path
    try:
        _remove_tree(tmp_path)
    except OSError:
        pass  # something the case made unremovable: pytest's own clean-up gets the rest


def _remove_tree(top: Path) -> None:
    stack, folders = [str(top)], []
    while stack:
        folder = stack.pop()
        folders.append(folder)
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    os.unlink(entry.path)
    for folder in reversed(folders[1:]):
        os.rmdir(folder)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_input(case: Case, case_folder: Path) -> None:
    tmp_path = case_folder
    build(tmp_path, case.files())
    # The bound is on the CPU the command used, not its wall time: a quadratic walk or a
    # backtracking pattern burns CPU, while a loaded CI machine only stretches the wall clock.
    # A hang that burns nothing is the 300 s wall timeout.
    before = children_cpu()
    try:
        done = run_cli(case.argv, tmp_path, case.env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.name}: no answer within 300 s (a hang)")
    elapsed = children_cpu() - before
    output = done.stdout + done.stderr
    assert done.returncode >= 0, f"killed by signal {-done.returncode}"
    assert "Traceback" not in output, output[-3000:]
    assert done.returncode == case.status, output[-3000:]
    assert elapsed < case.seconds, f"used {elapsed:.1f} s of CPU (bound {case.seconds} s)"
    lines = done.stdout.splitlines()
    for pattern in case.expect:
        assert any(re.search(pattern, line) for line in lines), (pattern, lines[:20])
    for secret in case.absent:
        assert secret not in output
    if case.one_line:
        strays = [
            line for line in lines if not (FINDING_LINE.match(line) or SUMMARY_LINE.match(line))
        ]
        assert not strays, strays[:5]
    if case.after is not None:
        case.after(tmp_path)


# Root reads and writes whatever the permission bits say: the two tests below run the CLI with
# the capabilities that let it do so dropped (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so that
# it meets permissions as any user does. A non-root run needs nothing.
_PR_CAPBSET_DROP, _CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 24, 1, 2


def _drop_permission_override() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) refused")


def _run_honouring_permissions(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    if os.geteuid() != 0:
        return run_cli(argv, cwd, {})
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        return subprocess.run(
            [sys.executable, "-m", "noetl_compile", *argv],
            cwd=cwd,
            env={k: v for k, v in environment.items() if v != ""},
            capture_output=True,
            timeout=300,
            check=False,
            text=True,
            preexec_fn=_drop_permission_override,
        )
    except subprocess.SubprocessError as error:  # the drop itself was refused (a container)
        pytest.skip(f"root here cannot give up its permission override: {error}")


def test_unreadable_folder_and_file(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "p.yaml").write_text(playbook())
    (tmp_path / "q.yaml").write_text(playbook())
    (tmp_path / "q.yaml").chmod(0)
    locked.chmod(0)
    try:
        done = _run_honouring_permissions(["check", "."], tmp_path)
    finally:
        locked.chmod(0o755)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(
        r"^\./locked:1:1: E001 \[error\] cannot read folder", done.stdout, re.MULTILINE
    )
    assert re.search(r"^\./q\.yaml:1:1: E001 \[error\] cannot read file", done.stdout, re.MULTILINE)


def test_read_only_output_folder(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(playbook())
    (tmp_path / "out").mkdir()
    (tmp_path / "out").chmod(0o555)
    try:
        done = _run_honouring_permissions(["compile", "p.yaml", "-o", "out"], tmp_path)
    finally:
        (tmp_path / "out").chmod(0o755)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(
        r"^p\.yaml:1:1: E004 \[error\] cannot write out/p\.py", done.stdout, re.MULTILINE
    )
    assert not (tmp_path / "out" / "p.py").exists()
