"""A rehearsal run in the warm runner before it serves (``warm.serve``).

Much of what a run costs in a fork of the runner is state that Airflow and SQLAlchemy build on
first use and then keep for the life of the process: the compiled form of every SQL statement
(SQLAlchemy's per-engine cache), the Execution API's first requests, validators, template
environments. A fork starts from the runner's memory, so the runner runs one small playbook of
its own first, the way a user's run goes (compile, sync, create the run, drive its two python
steps through the in-process Execution API, read the report back), and every fork starts with
all of that built. Measured with ``os.wait4`` on hello_world (the runner logs each fork's CPU
time): 0.57-0.67 s per fork without the rehearsal, 0.34-0.44 s with it (load 24-27).

What the rehearsal leaves behind: its DAG row (``noetlc.warm_rehearsal``) in the metadata DB,
with no file in the dags folder; no run (deleted, its task instances and XComs with it by the
schema's cascades); no event (its recorder keeps them in memory, and the process-wide recorder
is reset afterwards so that each fork reads its own environment's event log); no thread (the
in-process Execution API's event-loop thread is shut down and its transport forgotten: each
fork starts its own). It runs under slot 0's lock, so it never shares a DB with a user's run,
and it never touches the user's compiled DAG files.
"""

from __future__ import annotations

import gc
import io
import logging
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import compat
from .home import Home, locked

__all__ = ["REHEARSAL", "rehearse"]

log = logging.getLogger("noetlc.warm")

# Two python steps, the second reading the first's result through a template.
REHEARSAL = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: warm_rehearsal
  path: noetlc/warm_rehearsal
workload:
  word: warm
workflow:
  - step: start
    tool:
      kind: python
      input:
        word: "{{ workload.word }}"
      code: |
        result = {"word": word}
    next:
      arcs:
        - step: end
  - step: end
    tool:
      kind: python
      input:
        word: "{{ start.word }}"
      code: |
        result = {"echo": word}
"""

_FILE = "noetlc_warm_rehearsal.py"  # its name in the home's dags folder, for the sync


def rehearse(home: Home, compile_playbook: Callable[[str, str], dict[str, Any]]) -> str:
    """Run the rehearsal playbook in this process; returns its final state.

    ``compile_playbook(path, dags_folder)`` is the CLI's compile step (the warm runner passes
    it: the plugin reaches the compiler only there)."""
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from sqlalchemy import delete

    from ..events import forget_default_recorder, set_default_recorder
    from .driver import Driver, RunRecorder
    from .runner import Progress, _import_dag, record_sync, run_report

    scratch = Path(tempfile.mkdtemp(prefix="noetlc-rehearsal-"))
    placed = home.dags / _FILE
    state = "not run"
    with locked(home):
        driver = None
        try:
            source = scratch / "warm_rehearsal.yaml"
            source.write_text(REHEARSAL, encoding="utf-8")
            request = compile_playbook(str(source), str(scratch / "dags"))
            dag_id = request["dag_id"]
            shutil.copyfile(request["dags"][dag_id], placed)
            dag, payloads = _import_dag(dag_id, str(placed))
            recorder = RunRecorder(None)
            set_default_recorder(recorder)
            progress = Progress({dag_id: payloads}, io.StringIO(), recorder)
            driver = Driver({dag_id: dag}, recorder, progress)
            driver.sync()
            run = driver.create_run(dag_id, {})
            state = driver.drive(run)
            run_report(driver, {dag_id: payloads}, dag_id, run.run_id, state)
            driver.session.execute(delete(DagRun).where(DagRun.dag_id == dag_id))
            driver.session.commit()
        finally:
            forget_default_recorder()
            placed.unlink(missing_ok=True)
            shutil.rmtree(scratch, ignore_errors=True)
            if driver is not None:
                driver.sync()  # the DB as the home's dags folder says: the rehearsal DAG stale
                record_sync(home)
                driver.session.close()
            if settings.Session is not None:
                settings.Session.remove()
            _stop_execution_api_thread()
    return state


def _stop_execution_api_thread() -> None:
    """Close the in-process Execution API the rehearsal used and build a fresh one, with no
    transport: its transport's event-loop thread would not follow a fork (a request through it
    would wait forever), and closing it closes that app's lifespan and services, so a fork could
    not start it again. Airflow's own finalizer of the transport does the closing
    (``_shutdown_loop``: lifespan, loop, thread); something of the run may still hold the
    transport, so it is called now rather than at collection."""
    from airflow.sdk.execution_time.supervisor import in_process_api_server

    from .warmup import prepare_execution_api

    api = in_process_api_server()
    slot = type(api).__dict__.get("transport")
    try:
        transport = slot.__get__(api, type(api)) if slot is not None else None
    except AttributeError:  # a slot of an attrs class, unset: never built
        transport = None
    if transport is not None:
        for finalizer, info in list(getattr(weakref.finalize, "_registry", {}).items()):
            if info.weakref() is transport:
                finalizer()
        del transport
    compat.forget_in_process_api()
    prepare_execution_api()
    gc.collect()
    alive = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if alive:
        # A thread left behind does not follow a fork; say so (the forks build their own).
        log.warning("threads left after the rehearsal: %s", ", ".join(alive))
