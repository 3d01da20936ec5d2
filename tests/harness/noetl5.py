"""NoETL 5 itself, for the live differential suite (tests/noetl5): the ``noetl`` package from
PyPI (its Rust CLI, ``noetl run FILE -r local --json``) in a virtualenv of its own, outside the
project's.

The virtualenv is made once per machine and kept in ``~/.cache/noetlc-tests/noetl5-venv``
(``NOETL5_VENV`` overrides), pinned to :data:`NOETL_VERSION`; a venv holding another version is
made again. xdist workers take a file lock, so one of them builds it and the others wait. Where
it cannot be installed (no network, no such package in the index) the tests that need it are
skipped with :data:`SKIP_REASON` and pip's last words, and the run's summary counts them as NOT
RUN (tests/conftest.py): never a pass, never a failure of noetlc.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

NOETL_VERSION = "5.3.2"
SKIP_REASON = (
    f"NoETL {NOETL_VERSION}'s CLI (`pip install noetl=={NOETL_VERSION}`) cannot be installed"
)
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
