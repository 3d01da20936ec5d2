"""tests/noetl5 on a machine where the ``noetl`` package cannot be installed (offline, or an index
without it): its tests are skipped with the reason and counted as NOT RUN in the summary, and
the run fails none of them. pip is pointed at the discard port, so the install is refused."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.corpus import ROOT
from tests.harness.noetl5 import NOETL_VERSION


def test_without_the_noetl5_cli_its_tests_are_counted_as_not_run(tmp_path) -> None:
    tests = [
        "tests/noetl5/test_noetl5_differential.py::test_enough_playbooks_and_shell_cases",
        "tests/noetl5/test_noetl5_differential.py::test_the_cli_is_the_pinned_noetl_5",
    ]
    env = dict(
        os.environ,
        NOETL5_VENV=str(tmp_path / "noetl5-venv"),  # nothing installed there yet
        PIP_INDEX_URL="http://127.0.0.1:9/simple",  # the discard port: refused
        PIP_FIND_LINKS="",
        PIP_NO_INDEX="0",
        PIP_RETRIES="0",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed, 1 skipped" in done.stdout
    assert f"noetl=={NOETL_VERSION}`) cannot be installed: " in done.stdout  # -ra: the reason
    assert "1 tests NOT RUN: they compare with NoETL 5.3.2's CLI" in done.stdout
    assert not (tmp_path / "noetl5-venv").exists()  # a failed install leaves no venv behind
