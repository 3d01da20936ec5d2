"""NoETL 5 itself for the live differential suite (tests/harness/noetl5.py installs it). Where it
cannot be installed the tests that need it are skipped with the reason, loudly: the run's summary
counts them as NOT RUN (tests/conftest.py), so an offline clone neither fails nor passes them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.harness.noetl5 import SKIP_REASON, ensure_noetl5


@pytest.fixture(scope="session")
def noetl5() -> Path:
    try:
        return ensure_noetl5()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        # pip's last words say why (no network, no such version in the index...).
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        pytest.skip(f"{SKIP_REASON}: {lines[-1] if lines else type(exc).__name__}")
