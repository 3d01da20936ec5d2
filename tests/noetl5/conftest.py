"""NoETL 5 itself, for the live differential suite: the ``noetl`` package from PyPI (its Rust CLI,
``noetl run FILE -r local --json``) in a virtualenv of its own, outside the project's.

The virtualenv is made once per machine and kept in ``~/.cache/noetlc-tests/noetl5-venv``
(``NOETL5_VENV`` overrides), pinned to :data:`NOETL_VERSION`; a venv holding another version is
made again. xdist workers take a file lock, so one of them builds it and the others wait. A
failed install fails the tests that need it (with pip's output): it is never a skip.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NOETL_VERSION = "5.3.2"
VENV = Path(os.environ.get("NOETL5_VENV", Path.home() / ".cache" / "noetlc-tests" / "noetl5-venv"))


def _installed_version(venv: Path) -> str | None:
    noetl = venv / "bin" / "noetl"
    if not noetl.is_file():
        return None
    done = subprocess.run(
        [str(noetl), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout.split()[-1] if done.returncode == 0 and done.stdout.split() else None


def ensure_noetl5(venv: Path = VENV) -> Path:
    """The ``noetl`` executable of a virtualenv holding NoETL :data:`NOETL_VERSION`."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _installed_version(venv) != NOETL_VERSION:
            shutil.rmtree(venv, ignore_errors=True)
            # The system's interpreter, not the project's venv: NoETL must not see our packages.
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=300)
            pip = subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                 f"noetl=={NOETL_VERSION}"],
                capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
            if pip.returncode != 0 or _installed_version(venv) != NOETL_VERSION:
                shutil.rmtree(venv, ignore_errors=True)
                raise RuntimeError(
                    f"cannot install noetl=={NOETL_VERSION} into {venv}:\n{pip.stdout}{pip.stderr}"
                )
    return venv / "bin" / "noetl"


@pytest.fixture(scope="session")
def noetl5() -> Path:
    try:
        return ensure_noetl5()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"NoETL {NOETL_VERSION} is needed for this comparison: {exc}")
