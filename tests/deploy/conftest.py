"""A real Airflow deployment for the tests of this folder: ``scripts/airflow-stack.sh``.

``local_stack`` / ``celery_stack`` start the stack (LocalExecutor / Celery) into a state folder
with the example playbooks and ``tests/deploy/playbooks`` compiled into its DAG folder, and stop
it when the last test using it is done, also when a test failed or the session was interrupted
(``down`` kills every process group and the Postgres cluster). A stack that cannot start fails
the tests that need it, with the script's output and the tail of the failing process's log:
these tests are never skipped.

One stack per configuration per test run, whatever the xdist distribution: under
``pytest -n 2`` the tests of one module may land on both workers (and ``--dist loadgroup`` does
not group with pytest 9 + xdist 3.8: xdist renames ``item._nodeid``, which pytest 9 no longer
reads). So the stack lives in the run's shared temporary folder: the first worker that needs it
starts it under a file lock, every worker using it registers in ``<stack>.users``, and the last
one to leave stops it. ``local_stack`` is session-scoped: several modules use it (module scope
restarted it for each, ~25 s every time); ``celery_stack`` serves one module and is stopped
with it, so the two deployments seldom idle side by side on a 2-core machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_plugin.deploy.rest import AirflowClient
from airflow_plugin.events.store import EventStore

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "airflow-stack.sh"
PLAYBOOKS = (
    REPO / "playbooks",
    Path(__file__).resolve().parent / "playbooks",
    # The NoETL 5 application (test_noetl5_shop_deployed.py).
    REPO / "examples" / "noetl5_shop",
)


@dataclass
class Stack:
    """A started stack: its manifest (stack.json), a REST client and the event store."""

    state: Path
    manifest: dict[str, Any]
    client: AirflowClient
    events: EventStore
    up_seconds: float
    notes: list[str] = field(default_factory=list)

    def run_events(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return self.events.events(dag_id=dag_id, run_id=run_id)

    def log(self, name: str) -> str:
        return (Path(self.manifest["logs"]) / f"{name}.log").read_text(errors="replace")


def stack_script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NOETLC_PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _up(state: Path, executor: str) -> float:
    args = ["--state", str(state), "--executor", executor]
    for folder in PLAYBOOKS:
        args += ["--playbooks", str(folder)]
    started = time.monotonic()
    try:
        done = stack_script("up", *args, timeout=400)
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"airflow-stack.sh up ({executor}) did not finish: {error}")
    if done.returncode != 0:
        pytest.fail(
            f"airflow-stack.sh up ({executor}) failed (exit {done.returncode}):\n"
            f"{done.stdout}\n{done.stderr}"
        )
    print(done.stdout)  # the summary (URL, password file, timings) in the test report
    return time.monotonic() - started


def _down(state: Path) -> None:
    done = stack_script("down", "--state", str(state), timeout=120)
    # `down` must leave nothing behind: no process of the stack (they all carry its id).
    marker = f"NOETL_STACK_ID={state}".encode()
    left = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                left.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    if done.returncode != 0 or left:
        pytest.fail(
            f"airflow-stack.sh down failed (exit {done.returncode}); still running: {left}\n"
            f"{done.stdout}\n{done.stderr}"
        )


def shared_stack(factory: pytest.TempPathFactory, executor: str) -> Iterator[Stack]:
    """The run's stack of ``executor`` (started if nobody uses it), stopped by its last user."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    state = root / f"stack-{executor}"
    users = root / f"stack-{executor}.users"
    me = users / (os.environ.get("PYTEST_XDIST_WORKER") or "main")
    lock = root / f"stack-{executor}.lock"
    up_seconds = 0.0
    with _locked(lock):
        users.mkdir(exist_ok=True)
        if not any(users.iterdir()):
            if (state / "stack.json").exists():
                _down(state)  # the previous users left it stopped; start afresh
            up_seconds = _up(state, executor)
            # One line per start in the run's folder: how often a configuration was started.
            with (root / f"stack-{executor}.starts").open("a") as starts:
                starts.write(f"{me.name} {up_seconds:.1f}\n")
        me.touch()
    try:
        manifest = json.loads((state / "stack.json").read_text())
        client = AirflowClient.from_stack(state)
        events = EventStore(manifest["events_url"])
        try:
            yield Stack(state, manifest, client, events, up_seconds)
        finally:
            client.close()
            events.dispose()
    finally:
        with _locked(lock):
            me.unlink(missing_ok=True)
            if not any(users.iterdir()):
                _down(state)


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from shared_stack(tmp_path_factory, "local")


@pytest.fixture(scope="module")
def celery_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from shared_stack(tmp_path_factory, "celery")
