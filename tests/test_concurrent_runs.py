"""Several `noetlc run`s on one managed home at once (airflow_plugin/local/home.py: run slots).

Two real runs, started together, each of a playbook whose step writes its own marker file and
then waits for the other's: they can only both succeed if they run at the same time (a run that
waited for the other would time out). Each step records when it started and ended; the test
asserts the two intervals overlap, and that each run wrote its own slot's metadata DB only.
Cold (one Airflow process per run) and warm (one runner serving both, each in a fork of its own).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_plugin.local.home import Home, locked
from airflow_plugin.local.warm import socket_path, stop
from tests.harness.run_cli import ROOT, TIMEOUT, noetlc_run, report_of

HELLO = ROOT / "playbooks" / "hello_world.yaml"

RENDEZVOUS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: rendezvous_{me}
  path: tests/rendezvous_{me}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import os, time
        started = time.time()
        open({mine!r}, "w").close()
        while not os.path.exists({theirs!r}):
            if time.time() - started > {patience}:
                raise TimeoutError("the other run never started: runs were serialised")
            time.sleep(0.05)
        result = {{"started": started, "ended": time.time()}}
"""


def _environ(home: Path, **extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("NOETL_STRICT", "NOETL_NESTED")}
    environ.update({"NOETLC_HOME": str(home), "NOETLC_WARM": "0", **extra})
    return environ


def _start(home: Path, playbook: Path, **extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "noetl_compile", "run", str(playbook), "--json"],
        cwd=ROOT,
        env=_environ(home, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _pair(tmp_path: Path) -> list[Path]:
    markers = [tmp_path / "a.started", tmp_path / "b.started"]
    paths = []
    for me, mine, theirs in (("a", *markers), ("b", *reversed(markers))):
        path = tmp_path / f"rendezvous_{me}.yaml"
        text = RENDEZVOUS.format(me=me, mine=str(mine), theirs=str(theirs), patience=TIMEOUT / 2)
        path.write_text(text)
        paths.append(path)
    return paths


def _run_together(home: Path, tmp_path: Path, **extra: str) -> list[dict]:
    processes = [_start(home, path, **extra) for path in _pair(tmp_path)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=TIMEOUT)
        assert process.returncode == 0, err
        results.append((report_of(subprocess.CompletedProcess([], 0, out, err)), err))
    (a, _), (b, _) = results
    ta, tb = a["steps"]["start"]["result"], b["steps"]["start"]["result"]
    # Recorded by the steps themselves: each ran while the other ran.
    assert ta["started"] < tb["ended"] and tb["started"] < ta["ended"], (ta, tb)
    return results


def _runs_in(db: Path) -> set[str]:
    with sqlite3.connect(db) as connection:
        return {row[0] for row in connection.execute("SELECT run_id FROM dag_run")}


def test_two_cold_runs_on_one_home_run_at_once_each_in_its_own_slot(tmp_path):
    home = tmp_path / "home"
    (a, err_a), (b, err_b) = _run_together(home, tmp_path)
    for err in (err_a, err_b):
        assert err.startswith("noetlc: running ") and "(starting Airflow)" in err.splitlines()[0]
        assert "waiting" not in err
    # Each run wrote one slot's DB, and the two slots are different DBs.
    slots = {Home(home, n).db: _runs_in(Home(home, n).db) for n in (0, 1)}
    assert sorted(map(len, slots.values())) == [1, 1], slots
    assert {a["run_id"], b["run_id"]} == set().union(*slots.values())
    assert "slot 1" in err_a + err_b  # the second slot was set up from the template
    assert (home / "airflow-template.db").is_file()


def test_a_run_takes_a_free_slot_and_waits_only_when_every_slot_is_busy(tmp_path):
    home = tmp_path / "home"
    assert noetlc_run(home, HELLO).returncode == 0  # slot 0 made (and the template)
    with locked(Home(home)):  # slot 0 busy: the run takes slot 1 at once
        result = noetlc_run(home, HELLO, "--json")
    assert result.returncode == 0, result.stderr
    assert report_of(result)["run_id"] in _runs_in(Home(home, 1).db)
    assert "waiting" not in result.stderr

    with locked(Home(home)):  # one slot allowed, and it is busy: the run waits, and says so
        process = _start(home, HELLO, NOETLC_RUN_SLOTS="1")
        assert process.stderr is not None
        started = process.stderr.readline()
        waiting = process.stderr.readline()  # written before the command blocks
        time.sleep(1.0)
        assert process.poll() is None
    out, err = process.communicate(timeout=TIMEOUT)
    assert started.startswith("noetlc: running ")
    assert f"all 1 run slots of {home} are busy; waiting for one" in waiting
    assert process.returncode == 0, err
    assert json.loads(out)["run_id"] in _runs_in(Home(home).db)


@pytest.fixture
def warm_home(tmp_path):
    home = tmp_path / "home"
    yield home
    stop(Home(home))  # never leave a runner behind, also when the test failed


def test_one_warm_runner_serves_two_runs_at_once(warm_home, tmp_path):
    warm = {"NOETLC_WARM": "1"}
    first = noetlc_run(warm_home, HELLO, env=warm)
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith(f"noetlc: running {HELLO} (starting Airflow)")
    deadline = time.monotonic() + 240
    while not socket_path(Home(warm_home)).exists():
        assert time.monotonic() < deadline, (warm_home / "logs" / "warm.log").read_text()
        time.sleep(0.5)
    (a, err_a), (b, err_b) = _run_together(warm_home, tmp_path, **warm)
    for err in (err_a, err_b):
        assert err.splitlines()[0].endswith("(served by the warm runner)"), err
        assert "starting Airflow" not in err
    log = (warm_home / "logs" / "warm.log").read_text()
    assert log.count(" exited 0") == 2  # both forks of the one runner
    assert {a["run_id"], b["run_id"]} <= _runs_in(Home(warm_home).db) | _runs_in(
        Home(warm_home, 1).db
    )

    # A stop while a run is in flight: the socket goes at once (a new runner may start), the
    # run goes on and still gets its exit status from the runner that forked it.
    started, release = tmp_path / "c.started", tmp_path / "release"
    waiter = tmp_path / "rendezvous_c.yaml"
    waiter.write_text(
        RENDEZVOUS.format(me="c", mine=str(started), theirs=str(release), patience=TIMEOUT / 2)
    )
    process = _start(warm_home, waiter, **warm)
    deadline = time.monotonic() + TIMEOUT / 2
    while not started.exists():
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.1)
    stopped = noetlc_run(warm_home, "--stop")
    assert "stopped the warm runner" in stopped.stdout
    assert not socket_path(Home(warm_home)).exists()
    assert process.poll() is None  # still running
    release.touch()
    out, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, err
    assert "went away" not in err
    assert json.loads(out)["steps"]["start"]["state"] == "success"


BROKEN = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: broken
  path: tests/broken
workflow:
  - step: start
    tool:
      kind: python
      code: |
        result = 1
    next:
      arcs:
        - step: strat
"""


def test_a_playbook_that_does_not_compile_needs_no_slot_and_no_airflow(tmp_path):
    """Compiled before any slot is taken or any Airflow process starts: with the one slot of
    the home busy, the command still answers at once with check's finding, and no run log (each
    Airflow process of a run writes one) appears."""
    home = tmp_path / "home"
    playbook = tmp_path / "broken.yaml"
    playbook.write_text(BROKEN)
    Home(home).prepare()
    with locked(Home(home)):
        done = subprocess.run(
            [sys.executable, "-m", "noetl_compile", "run", str(playbook)],
            cwd=ROOT,
            env=_environ(home, NOETLC_RUN_SLOTS="1"),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert "R201 [error] step 'start' routes to unknown step 'strat'" in done.stdout
    assert "not run: the playbook does not compile" in done.stdout
    assert "waiting" not in done.stderr
    assert list((home / "logs" / "runs").glob("*.log")) == []
    assert not (home / "airflow.db").exists()
    assert list(home.glob(".compile-*")) == []  # the staging folder is gone too
