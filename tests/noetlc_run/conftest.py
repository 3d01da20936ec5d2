"""`noetlc run` through the CLI: each xdist worker gets one managed home (one DB initialisation
per worker); the session's first run creates it, every later run of any module here reuses it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.harness.run_cli import PLAYBOOKS, noetlc_run


@pytest.fixture(scope="session")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("noetlc-run-home")


@pytest.fixture(scope="session")
def first_run(home: Path) -> subprocess.CompletedProcess:
    """The session's first run: it creates the managed home."""
    return noetlc_run(home, PLAYBOOKS / "hello_world.yaml")
