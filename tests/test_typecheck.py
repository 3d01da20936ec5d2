"""The type checker holds the typed step, the engine profiles and the runtime (pyproject.toml's
``[tool.mypy]``: strict, on those files only). A regression there (an untyped function, an
attribute a step run's part reads that nobody declared, a payload read as the wrong type) fails
here, in the README's test command, not in a later review."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_strict_passes_on_the_step_model_profiles_and_runtime() -> None:
    started = time.monotonic()
    ran = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "No module named mypy" not in ran.stderr, (
        "mypy is part of the dev extra: pip install -e '.[dev]'"
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    print(f"mypy strict: {time.monotonic() - started:.1f} s")


def test_mypy_is_configured_strict_on_the_runtime() -> None:
    # What the run above checks, so an edit of pyproject.toml cannot narrow it unnoticed.
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert {"airflow_plugin/runtime", "noetl_compile/step_model.py"} <= set(config["files"])
    assert "noetl_compile/engine_profiles.py" in config["files"]
