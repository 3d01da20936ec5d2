"""`noetlc run` as a user types it: a subprocess of ``python -m noetl_compile run`` in a managed
home, and its one-line ``--json`` report."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
TIMEOUT = 300  # seconds for one run; a loaded 2-core CI machine needs a few


def noetlc_run(
    home: Path, *args: Any, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``noetlc run ARGS`` with ``NOETLC_HOME=home``; the caller's strict/nested settings are
    left out so every run starts from the defaults, then ``env`` is applied."""
    dropped = ("NOETL_STRICT", "NOETL_NESTED")
    environ = {k: v for k, v in os.environ.items() if k not in dropped}
    environ["NOETLC_HOME"] = str(home)
    # Warm runs are the CLI's default: a test uses the warm runner only when it asks (``env``).
    environ["NOETLC_WARM"] = "0"
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "noetl_compile", "run", *map(str, args)],
        check=False,
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def report_of(result: subprocess.CompletedProcess) -> dict[str, Any]:
    """The ``--json`` report: exactly one JSON object, on one line."""
    assert result.stdout.count("\n") == 1, (result.stdout, result.stderr)
    report = json.loads(result.stdout)
    assert isinstance(report, dict)
    return report


def loop_timeline(home: Path, execution_id: Any) -> list[dict[str, Any]]:
    """A run's events as ``in_flight_peak`` reads them (name, step, loop_id, timestamp), from
    the managed home's event log."""
    with sqlite3.connect(home / "noetl" / "events.db") as db:
        db.row_factory = sqlite3.Row
        return [
            dict(row)
            for row in db.execute(
                "SELECT name, step, loop_id, timestamp FROM event_log WHERE execution_id = ?",
                (execution_id,),
            )
        ]


def write_playbook(folder: Path, name: str, text: str) -> Path:
    """``text`` (dedented) as ``folder/name.yaml``."""
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path
