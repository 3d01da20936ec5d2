"""Session-wide test fixtures, including real Airflow runs with ``dag.test()``.

Airflow reads its configuration on first import, so the environment is set here, at conftest
import time, before any test module can import Airflow:

* ``AIRFLOW_HOME`` -> a fresh temporary directory (never the developer's real home/DB);
* ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` -> SQLite inside it (overrides a DSN set in the shell);
* ``AIRFLOW__CORE__DAGS_FOLDER`` -> ``<home>/dags``: ``dag.test()`` syncs the DAG *bundle* to the
  DB before it can create a run, so a DAG must live in a file of the dags folder — a DAG object
  built inside a test function fails with "the dag is not serialized";
* ``AIRFLOW__CORE__LOAD_EXAMPLES=False``, ``AIRFLOW__CORE__UNIT_TEST_MODE=True``;
* ``AIRFLOW__CORE__MAX_MAP_LENGTH=64``: loops past the limit are chunked with small numbers.

``airflow_db`` (session) creates the schema once (``airflow.utils.db.initdb``, ~3-5 s).
``run_dag`` writes a DAG source into the dags folder, imports it, runs ``dag.test()`` and returns
task states and XCom return values.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Fixture modules of the harness (each starts a real service on loopback on first use).
pytest_plugins: list[str] = ["tests.harness.http_server", "tests.harness.postgres"]

# `noetlc run` keeps a warm runner per home by default; a test run starts none unless a test asks
# (tests/test_warm_run.py passes NOETLC_WARM=1 to its own runs). Every subprocess inherits this.
os.environ["NOETLC_WARM"] = "0"

_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="noetlc-airflow-test-"))
atexit.register(shutil.rmtree, _AIRFLOW_HOME, ignore_errors=True)

if "airflow" not in sys.modules:
    (_AIRFLOW_HOME / "dags").mkdir()
    os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{_AIRFLOW_HOME}/airflow.db"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(_AIRFLOW_HOME / "dags")
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "True"
    # dag.test() runs mapped instances one after another (~0.15 s each): a small map limit keeps
    # loops that exceed it (and so are chunked, the behaviour under test) fast.
    os.environ["AIRFLOW__CORE__MAX_MAP_LENGTH"] = "64"


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """Initialise the Airflow metadata DB once per session; returns the dags folder."""
    from airflow.configuration import conf

    dags_folder = Path(conf.get("core", "dags_folder"))
    if not str(dags_folder).startswith(str(_AIRFLOW_HOME)):
        pytest.fail("Airflow was imported before tests/conftest.py could isolate its home")
    from airflow.utils import db

    db.initdb()
    return dags_folder


@dataclass
class DagRunResult:
    state: str
    run_id: str
    states: dict[str, str]  # task_id -> state
    xcom: dict[str, Any]  # task_id -> XCom return_value

    def ran(self, task_id: str) -> bool:
        return self.states.get(task_id) == "success"


def _text(state: Any) -> str:
    # States are str-enums on ORM objects and plain strings elsewhere.
    return str(getattr(state, "value", state))


@pytest.fixture
def run_dag(airflow_db: Path):
    """``run_dag(source, dag_id, conf=None) -> DagRunResult`` for a DAG file written by the test."""

    def run(source: str, dag_id: str, conf: dict[str, Any] | None = None) -> DagRunResult:
        path = airflow_db / f"{dag_id}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(f"noetlc_test_dag_{dag_id}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        dag = module.dag
        dag_run = dag.test(run_conf=conf)

        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session

        states = {ti.task_id: _text(ti.state) for ti in dag_run.get_task_instances()}
        xcom: dict[str, Any] = {}
        with create_session() as session:
            rows = (
                session.query(XComModel)
                .filter_by(dag_id=dag_id, run_id=dag_run.run_id, key="return_value")
                .all()
            )
            for row in rows:
                xcom[row.task_id] = XComModel.deserialize_value(row)
        return DagRunResult(
            state=_text(dag_run.state), run_id=dag_run.run_id, states=states, xcom=xcom
        )

    return run


def pytest_configure(config):
    """Fetch the playbook corpus once per test run when it is nowhere (the controller only:
    xdist workers start after this and find it in the cache)."""
    if hasattr(config, "workerinput") or os.environ.get("NOETLC_CORPUS_FETCH") == "0":
        return
    from tests import corpus

    if corpus.FROM_CACHE and not corpus.available():
        fetch = corpus.fetch_module()
        try:
            fetched = fetch.fetch(corpus.CORPUS, corpus.pins())
            _FETCH_NOTE.append(f"fetched {fetched} files of github.com/noetl/noetl")
        except RuntimeError as exc:
            _FETCH_NOTE.append(f"cannot fetch them: {exc}")


# What pytest_configure's fetch did, for the header and the summary (print would be captured).
_FETCH_NOTE: list[str] = []


def pytest_report_header(config):
    from tests import corpus

    state = "present" if corpus.available() else "MISSING"
    return [f"playbook corpus: {corpus.CORPUS} ({corpus.SOURCE}), {state}", *_FETCH_NOTE]


def pytest_collection_modifyitems(config, items):
    """Tests marked ``corpus`` are skipped, with the reason, where the corpus is missing."""
    from tests import corpus

    if corpus.available():
        return
    skip = pytest.mark.skip(reason=corpus.SKIP_REASON)
    for item in items:
        if item.get_closest_marker("corpus"):
            item.add_marker(skip)


def _skipped_for(terminalreporter, why: str) -> list[str]:
    """The reasons of the skips whose reason holds ``why``."""

    def reason(report) -> str:  # a skip's longrepr is (path, line, "Skipped: <reason>")
        longrepr = report.longrepr
        return longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)

    reports = terminalreporter.stats.get("skipped", [])
    return [reason(report) for report in reports if why in reason(report)]


def _not_run_for_the_corpus(terminalreporter) -> int:
    from tests import corpus

    return len(_skipped_for(terminalreporter, corpus.SKIP_REASON))


def _not_run_for_noetl5(terminalreporter) -> None:
    """The NoETL 5 differential tests skipped because its CLI could not be installed: said as
    loudly as the corpus (a session fixture's skip is reported once per test that needs it)."""
    from tests.harness.noetl5 import SKIP_REASON

    reasons = _skipped_for(terminalreporter, SKIP_REASON)
    if not reasons:
        return
    terminalreporter.section("NoETL 5 CLI", red=True, bold=True)
    detail = reasons[0].split(SKIP_REASON, 1)[1].lstrip(": ")
    terminalreporter.write_line(
        f"{len(reasons)} tests NOT RUN: they compare with {SKIP_REASON.split(' (')[0]}, which "
        f"cannot be installed here ({detail}). Run tests/noetl5 where PyPI is reachable.",
        red=True,
        bold=True,
    )


@pytest.hookimpl(trylast=True)  # after the durations, so the count is among the last lines
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The corpus run counts (runnable per dialect, skips per reason), then whether the tests had
    NoETL's public playbooks (how many did not run without them), at the end of every run."""
    from tests import corpus
    from tests.corpus_run.test_corpus_run import summary_lines

    _not_run_for_noetl5(terminalreporter)
    terminalreporter.section("NoETL corpus run")
    for line in summary_lines():
        terminalreporter.write_line(line)
    missing = _not_run_for_the_corpus(terminalreporter)
    terminalreporter.section("NoETL public playbooks", red=bool(missing), bold=bool(missing))
    for note in _FETCH_NOTE:
        terminalreporter.write_line(note)
    where = f"at {corpus.CORPUS} ({corpus.SOURCE})"
    if missing:
        terminalreporter.write_line(
            f"{missing} tests NOT RUN: they need NoETL's public playbooks, none {where}. "
            f"Fetch them with `{corpus.FETCH_COMMAND}` and run again"
            + (" with NOETLC_CORPUS unset." if corpus.SOURCE == "NOETLC_CORPUS" else "."),
            red=True,
            bold=True,
        )
    elif corpus.available():
        terminalreporter.write_line(f"0 tests without the public playbooks: corpus {where}")
    else:
        terminalreporter.write_line(
            f"0 tests without the public playbooks: none {where}, and none of these tests reads them"
        )
