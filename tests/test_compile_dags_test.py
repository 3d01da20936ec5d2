"""`airflow dags test` on compiled playbooks: the corpus hello world and our branching example
(exclusive and inclusive arcs with a join) run to success, branches not taken are skipped, and
the step results are asserted. Runs the real Airflow CLI in a throwaway AIRFLOW_HOME.
"""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from noetl_compile.cli import main
from tests.corpus import CORPUS

ROOT = Path(__file__).resolve().parents[1]
HELLO = CORPUS / "canonical" / "hello_world" / "hello_world.yaml"
TIMEOUT = 300


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    importlib.import_module("airflow")
    home = tmp_path_factory.mktemp("airflow-home")
    dags = home / "dags"
    assert main(["compile", str(ROOT / "playbooks" / "branching.yaml"), "-o", str(dags)]) == 0
    if HELLO.is_file():
        assert main(["compile", str(HELLO), "-o", str(dags)]) == 0
    env = dict(
        os.environ,
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run(
        [airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=TIMEOUT
    )
    return home, env, airflow


def _dags_test(airflow_home, dag_id: str):
    home, env, airflow = airflow_home
    run = subprocess.run(
        ["timeout", "-s", "KILL", str(TIMEOUT), airflow, "dags", "test", dag_id],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    with sqlite3.connect(home / "airflow.db") as db:
        states = dict(
            db.execute("SELECT task_id, state FROM task_instance WHERE dag_id = ?", (dag_id,))
        )
        xcoms = {
            task: json.loads(value)
            for task, value in db.execute(
                "SELECT task_id, value FROM xcom WHERE dag_id = ? AND key = 'return_value'",
                (dag_id,),
            )
        }
        run_state = db.execute("SELECT state FROM dag_run WHERE dag_id = ?", (dag_id,)).fetchone()
    return run, states, {task: value.get("result") for task, value in xcoms.items()}, run_state


@pytest.mark.corpus
def test_corpus_hello_world_runs(airflow_home) -> None:
    run, states, results, run_state = _dags_test(
        airflow_home, "tests.fixtures.playbooks.hello_world"
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run_state == ("success",)
    # The outcome task (canonical: a failed call may go on along its arcs) found none.
    assert states == {
        "start": "success",
        "test_step": "success",
        "end": "success",
        "noetl_outcome": "success",
    }
    assert results["start"] == {"status": "initialized"}
    assert results["test_step"] == {"status": "ok", "data": {"message": "Hello World"}}
    assert results["end"] == {"status": "complete"}


def test_branching_example_runs_with_skips_and_a_join(airflow_home) -> None:
    run, states, results, run_state = _dags_test(airflow_home, "examples.branching")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run_state == ("success",)
    assert states == {
        "start": "success",
        "large_order": "success",
        "small_order": "skipped",  # exclusive: the first matching arc only
        "notify_finance": "success",
        "notify_sales": "success",
        "notify_legal": "skipped",  # inclusive: every matching arc, this one did not match
        "summary": "success",  # the join ran after the branches taken
        "noetl_outcome": "success",  # no step's call failed
    }
    assert results["start"] == {"amount": 250, "large": True}
    assert results["summary"] == {"tier": "large", "notified": ["finance", "sales"]}
