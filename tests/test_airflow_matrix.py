"""The smoke suite (scripts/smoke-airflow.sh) on every Airflow version the project keeps
constraints for (constraints/airflow-X.Y.Z.txt): compile every bundled playbook, import every DAG,
`noetlc run` every README example, each in that version's own virtualenv.

Runs a version only where its virtualenv exists already ($NOETLC_AIRFLOW_VENVS/af-X.Y.Z,
default ~/.cache/noetlc/venvs) or with NOETLC_AIRFLOW_MATRIX=1 (which creates it: minutes each).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = sorted(p.stem.removeprefix("airflow-") for p in (ROOT / "constraints").glob("*.txt"))
VENVS = Path(os.environ.get("NOETLC_AIRFLOW_VENVS", Path.home() / ".cache/noetlc/venvs"))


def test_constraints_are_kept_for_the_supported_versions() -> None:
    minors = {".".join(v.split(".")[:2]) for v in VERSIONS}
    assert {"3.1", "3.2", "3.3"} <= minors, VERSIONS


@pytest.mark.parametrize("version", VERSIONS)
def test_smoke_suite(version: str) -> None:
    venv = VENVS / f"af-{version}"
    if not (venv / "bin" / "python").exists() and os.environ.get("NOETLC_AIRFLOW_MATRIX") != "1":
        pytest.skip(f"no {venv} (NOETLC_AIRFLOW_MATRIX=1 creates it)")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "smoke-airflow.sh"), version, str(venv)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert f"airflow {version}: dags" in done.stdout
