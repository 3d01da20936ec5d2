"""The warm runner of `noetlc run` (airflow_plugin/local/warm.py), opted into with NOETLC_WARM=1.

One home, in order: a cold first run that starts the runner; a run the runner serves; a playbook
that kills its own process (``os._exit``) fails that run only, and the next run is served by the
same runner with the same report; ``noetlc run --stop`` stops it. Every other test of `noetlc
run` runs cold (tests/harness/run_cli.py drops NOETLC_WARM from their environment).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from airflow_plugin.local.home import Home
from airflow_plugin.local.warm import socket_path, stop
from tests.harness.run_cli import noetlc_run, report_of

ROOT = Path(__file__).resolve().parents[1]
HELLO = ROOT / "playbooks" / "hello_world.yaml"
WARM = {"NOETLC_WARM": "1"}

CRASH = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: crash
  path: tests/crash
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import os
        os._exit(7)
"""


def _served(home: Path) -> int:
    log = home / "logs" / "warm.log"
    return log.read_text().count(" exited ") if log.exists() else 0


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    yield home
    stop(Home(home))  # never leave a runner behind, also when the test failed


def _steps(report):
    return {name: (s["state"], s["result"]) for name, s in report["steps"].items()}


def test_warm_runs_match_cold_ones_and_a_crash_breaks_only_its_run(home, tmp_path):
    first = noetlc_run(home, HELLO, "--json", env=WARM)
    assert first.returncode == 0, first.stderr
    cold = report_of(first)
    # The cold run started the runner for the next one.
    deadline = time.monotonic() + 240
    while not socket_path(Home(home)).exists():
        assert time.monotonic() < deadline, (home / "logs" / "warm.log").read_text()
        time.sleep(0.5)

    second = noetlc_run(home, HELLO, "--json", env=WARM)
    assert second.returncode == 0, second.stderr
    warm = report_of(second)
    assert _served(home) == 1
    assert _steps(warm) == _steps(cold)
    assert warm["run_id"] != cold["run_id"]
    assert Path(warm["log"]).is_file() and "HELLO WORLD" not in second.stderr
    # The runner rehearsed before serving (rehearsal.py) and left no trace a user sees: no run
    # in the metadata DB, no event in the event log, no file in the dags folder.
    assert "rehearsal run success" in (home / "logs" / "warm.log").read_text()
    assert sorted(p.name for p in (home / "dags").glob("*.py")) == ["hello_world.py"]
    with sqlite3.connect(home / "airflow.db") as db:
        runs = db.execute("SELECT dag_id, count(*) FROM dag_run GROUP BY dag_id").fetchall()
    assert runs == [("examples.hello_world", 2)]
    with sqlite3.connect(home / "noetl" / "events.db") as db:
        dags = db.execute("SELECT DISTINCT dag_id FROM event_log").fetchall()
    assert dags == [("examples.hello_world",)]

    crash = tmp_path / "crash.yaml"
    crash.write_text(CRASH)
    broken = noetlc_run(home, crash, env=WARM)
    assert broken.returncode == 1
    assert "stopped unexpectedly (status 7)" in broken.stderr
    assert _served(home) == 2

    # The fork compiles: a playbook that does not compile prints check's findings and runs nothing.
    bad = tmp_path / "bad.yaml"
    # (a near miss of a step's name: an arc to a name close to no step is a warning, as NoETL
    # skips it; a typo is an error with its suggestion)
    bad.write_text(CRASH + "    next:\n      arcs:\n        - step: strat\n")
    refused = noetlc_run(home, bad, env=WARM)
    assert refused.returncode == 1, refused.stderr
    assert "strat" in refused.stdout and "not run: the playbook does not compile" in refused.stdout
    assert _served(home) == 3

    third = noetlc_run(home, HELLO, "--json", "--fuse", env=WARM)
    assert third.returncode == 0, third.stderr
    assert _served(home) == 4  # the same runner, still serving
    assert _steps(report_of(third)) == _steps(cold)
    assert {t for s in report_of(third)["steps"].values() for t in s["tasks"]} == {"fused_start"}

    stopped = noetlc_run(home, "--stop")
    assert stopped.returncode == 0 and "stopped the warm runner" in stopped.stdout
    assert not socket_path(Home(home)).exists()
    again = noetlc_run(home, "--stop")
    assert "no warm runner" in again.stdout


def test_warm_is_the_default_except_where_asked_or_on_ci():
    from airflow_plugin.local.warm import enabled

    assert enabled(None, {}) is True  # a user's `noetlc run`
    assert enabled(None, {"CI": "true"}) is False  # a CI job starts no background process
    assert enabled(None, {"CI": "false"}) is True
    assert enabled(None, {"NOETLC_WARM": "0"}) is False  # tests/conftest.py sets this
    assert enabled(None, {"NOETLC_WARM": "1", "CI": "true"}) is True  # a test that asks
    assert enabled(True, {"NOETLC_WARM": "0"}) is True  # --warm
    assert enabled(False, {}) is False  # --cold


def test_a_pinned_code_stamp_is_what_the_runner_and_its_forks_read(tmp_path, monkeypatch):
    """The warm runner pins its code stamp (home.pin_code_stamp) so its forks do not walk the
    code again; a fresh stamp still sees a change, and the client never pins."""
    from airflow_plugin.local import home as home_module

    code = tmp_path / "code"
    code.mkdir()
    (code / "a.py").write_text("A = 1\n", encoding="utf-8")
    monkeypatch.setattr(home_module, "_CODE", (code,))
    monkeypatch.setattr(home_module, "_PINNED", [])
    before = home_module.code_stamp()
    newer = code / "b.py"
    newer.write_text("B = 2\n", encoding="utf-8")
    later = time.time() + 5
    os.utime(newer, (later, later))
    changed = home_module.code_stamp()
    assert changed != before  # unpinned: a change on disk is seen
    assert home_module.pin_code_stamp() == changed
    os.utime(newer, (later + 5, later + 5))
    assert home_module.code_stamp() == changed  # pinned: no walk, the runner's stamp
    assert home_module.pin_code_stamp() != changed  # pinning again takes the code as it is now
