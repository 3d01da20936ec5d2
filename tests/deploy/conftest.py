"""A real Airflow deployment for the tests of this folder: ``scripts/airflow-stack.sh``.

``deploy_stack(executor)`` starts the stack into a fresh state folder with the example
playbooks and ``tests/deploy/playbooks`` compiled into its DAG folder, and stops it at the end,
also when a test failed or the session was interrupted (``down`` kills every process group and
the Postgres cluster). A stack that cannot start fails the tests that need it, with the script's
output and the tail of the failing process's log: these tests are never skipped.

The fixtures are module-scoped: each test module uses one configuration (LocalExecutor or
Celery), and on a 2-core machine two idle deployments side by side would slow everything down.
Every module of this folder is in one xdist group ("deploy", see ``pytestmark``), so under
``pytest -n 2 --dist loadgroup`` (scripts/test.sh) they run one after the other on one worker.
"""

from __future__ import annotations

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
PLAYBOOKS = (REPO / "playbooks", Path(__file__).resolve().parent / "playbooks")


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


def start_stack(state: Path, executor: str) -> Iterator[Stack]:
    args = ["--state", str(state), "--executor", executor]
    for folder in PLAYBOOKS:
        args += ["--playbooks", str(folder)]
    started = time.monotonic()
    try:
        try:
            done = stack_script("up", *args, timeout=400)
        except subprocess.TimeoutExpired as error:
            pytest.fail(f"airflow-stack.sh up ({executor}) did not finish: {error}")
        if done.returncode != 0:
            pytest.fail(
                f"airflow-stack.sh up ({executor}) failed (exit {done.returncode}):\n"
                f"{done.stdout}\n{done.stderr}"
            )
        up_seconds = time.monotonic() - started
        print(done.stdout)  # the summary (URL, password file, timings) in the test report

        manifest = json.loads((state / "stack.json").read_text())
        client = AirflowClient.from_stack(state)
        events = EventStore(manifest["events_url"])
        try:
            yield Stack(state, manifest, client, events, up_seconds)
        finally:
            client.close()
            events.dispose()
    finally:
        done = stack_script("down", "--state", str(state), timeout=120)
        if done.returncode != 0:
            print(f"airflow-stack.sh down failed:\n{done.stdout}\n{done.stderr}")


@pytest.fixture(scope="module")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from start_stack(tmp_path_factory.mktemp("stack-local"), "local")


@pytest.fixture(scope="module")
def celery_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from start_stack(tmp_path_factory.mktemp("stack-celery"), "celery")
