"""The stack's environment: the NoETL plugin registers once, PYTHONPATH names each entry once.

Every ``airflow`` command against the stack said "Plugin 'noetl' already registered": with the
checkout on PYTHONPATH, its ``noetlc.egg-info`` (left by the editable install) is a second
``noetlc`` distribution beside the installed one, and Airflow loads the ``airflow.plugins``
entry point of each. The stack now puts links to the checkout's packages first instead. A real
Airflow process loads its plugins with both paths here (no stack needed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_plugin.deploy.layout import Layout
from airflow_plugin.deploy.stack import (
    REPO,
    SUPERVISOR_SETTINGS,
    _base_env,
    _write_env_file,
    python_path,
)

PROBE = (
    "import json; from airflow import plugins_manager; "
    "plugins, errors = plugins_manager._get_plugins(); "
    "print(json.dumps({'names': [p.name for p in plugins], 'errors': errors}))"
)


def loaded_plugins(pythonpath: str, home: Path) -> dict:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "PYTHONPATH": pythonpath,
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_stacks_python_path_loads_the_plugin_once(tmp_path):
    layout = Layout(tmp_path / "state")
    # What scripts/airflow-stack.sh exports (the checkout) is left out, the rest kept once.
    path = python_path(layout, os.pathsep.join([str(REPO), "/opt/extra", "/opt/extra"]))
    assert path.split(os.pathsep) == [str(layout.python), "/opt/extra"]
    assert (layout.python / "airflow_plugin").resolve() == (REPO / "airflow_plugin").resolve()
    found = loaded_plugins(path, tmp_path)
    assert found["names"].count("noetl") == 1
    assert not any("noetl" in str(error) for error in found["errors"].values()), found["errors"]


@pytest.mark.skipif(
    not any(REPO.glob("*.egg-info")), reason="no egg-info in the checkout: nothing to load twice"
)
def test_the_checkout_itself_on_the_path_registered_it_twice(tmp_path):
    """The cause, shown: what the stack used to do."""
    found = loaded_plugins(os.pathsep.join([str(REPO), str(REPO)]), tmp_path)
    assert any("already registered" in str(error) for error in found["errors"].values())


def test_the_env_file_names_pythonpath_once_with_each_entry_once(tmp_path):
    layout = Layout(tmp_path / "state")
    layout.state.mkdir()
    env = {"PYTHONPATH": python_path(layout, str(REPO)), "AIRFLOW_HOME": str(layout.home)}
    _write_env_file(layout, env)
    lines = [line for line in layout.env_file.read_text().splitlines() if "PYTHONPATH" in line]
    assert lines == [f"export PYTHONPATH='{layout.python}'"]


def test_the_stacks_processes_keep_bytecode_caches(tmp_path, monkeypatch):
    """Each task instance is a fresh interpreter importing the runtime: under a caller's
    PYTHONDONTWRITEBYTECODE every one compiled the checkout from source. The stack's
    processes write (and so reuse) bytecode caches whatever the caller's shell says."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = _base_env(None, Layout(tmp_path / "state"))
    (tmp_path / "probe_module.py").write_text("VALUE = 1\n")
    subprocess.run(
        [sys.executable, "-c", "import probe_module"],
        env={**env, "PYTHONPATH": str(tmp_path)},
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    assert list((tmp_path / "__pycache__").glob("probe_module.*.pyc"))


def test_a_task_supervisor_of_the_stack_waits_at_most_a_second_for_its_process(tmp_path):
    """A supervisor whose task process closed its sockets before it could be reaped slept
    ``[workers] min_heartbeat_interval`` (5 s by default) holding the worker slot (docs/deploy.md).
    The stack's setting, read by Airflow's own supervisor module, bounds that to 1 s."""
    layout = Layout(tmp_path / "state")
    env = _base_env(None, layout)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from airflow.sdk.execution_time import supervisor; "
            "print(supervisor.MIN_HEARTBEAT_INTERVAL)",
        ],
        env={**env, **SUPERVISOR_SETTINGS, "AIRFLOW_HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split()[-1] == "1", done.stdout + done.stderr
