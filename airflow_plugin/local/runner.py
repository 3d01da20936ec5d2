"""One `noetlc run` request inside the Airflow process: DB, DAGs, run, progress, report.

``execute`` is phase 2 of ``python -m airflow_plugin.local`` (see ``__main__``): it creates the
metadata DB if the home has none, imports the compiled DAGs, runs the parent DAG with
``driver.Driver`` (child runs of nested playbooks included), prints a line per step as it
finishes, and the report at the end. Airflow is imported here, never by the CLI.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import logging
import os
import shutil
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from noetl_compile.engine_profiles import CANONICAL, EngineProfile, profile_for

from ..templating.ids import ids_as_text
from .home import Home, code_stamp
from .report import TaskRow, build_report, complete_units, progress_line, render_summary, units_of

__all__ = ["UsageProblem", "ensure_db", "execute", "gate_signals", "record_sync", "run_conf"]

EXIT_OK, EXIT_FAILED = 0, 1
log = logging.getLogger("noetlc.run")


class UsageProblem(Exception):
    """A request this run cannot honour because of what the user passed (exit 2)."""


def ensure_db(home: Home) -> bool:
    """Create the metadata DB unless this slot of the home already has one for this Airflow
    version.

    The home is a cache: a DB without our marker (a first run that died half-way) or made by
    another Airflow version is replaced rather than migrated. A slot's new DB is a copy of the
    home's template when there is one of this version (milliseconds), else ``initdb`` (seconds),
    which then leaves the template for the next slot. Returns True when it created one.
    """
    from ..compat import version_text

    version = version_text()
    if home.db.exists() and _marked(home.marker, version):
        return False
    home.synced.unlink(missing_ok=True)
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{home.db}{suffix}").unlink(missing_ok=True)
    from airflow import settings

    started = time.monotonic()
    template_marker = home.template.with_suffix(".json")
    if home.template.exists() and _marked(template_marker, version):
        # Under this slot's lock; the template is never written in place (os.replace), so a
        # plain copy is a consistent DB. Connections opened before (to the file just removed)
        # are dropped.
        temporary = home.db.with_name(f".{home.db.name}.{os.getpid()}.tmp")
        shutil.copyfile(home.template, temporary)
        os.replace(temporary, home.db)
        if settings.engine is not None:
            settings.engine.dispose()
        log.info("copied the template DB in %.2fs", time.monotonic() - started)
    else:
        from airflow.utils import db

        db.initdb()
        log.info("created the metadata DB in %.1fs", time.monotonic() - started)
        _keep_template(home, version)
    _write_marker(home.marker, version)
    return True


def _marked(marker: Path, version: str) -> bool:
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("airflow") == version


def _write_marker(marker: Path, version: str) -> None:
    record = {"airflow": version, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    temporary = marker.with_name(f".{marker.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(record) + "\n", encoding="utf-8")
    os.replace(temporary, marker)


def _keep_template(home: Home, version: str) -> None:
    """The DB ``initdb`` just made, before any run wrote to it, as the home's template (SQLite's
    backup API: a consistent copy of a DB in WAL mode). Two slots racing both write one; the
    last ``os.replace`` wins, both are the same pristine DB."""
    import sqlite3

    temporary = home.template.with_name(f".{home.template.name}.{os.getpid()}.tmp")
    try:
        with (
            contextlib.closing(sqlite3.connect(home.db)) as source,
            contextlib.closing(sqlite3.connect(temporary)) as copy,
        ):
            source.backup(copy)
        os.replace(temporary, home.template)
        _write_marker(home.template.with_suffix(".json"), version)
    except (OSError, sqlite3.Error):
        log.warning("could not keep a template DB; new slots run initdb", exc_info=True)
        temporary.unlink(missing_ok=True)


def _import_dag(dag_id: str, path: str) -> tuple[Any, dict[str, Any]]:
    """The DAG object and PAYLOADS of a compiled DAG file."""
    from airflow.sdk import DAG

    name = "noetlc_local_" + "".join(c if c.isalnum() else "_" for c in dag_id)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot import the compiled DAG file {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dags = [v for v in vars(module).values() if isinstance(v, DAG) and v.dag_id == dag_id]
    if not dags:
        raise RuntimeError(f"{path} defines no DAG {dag_id!r}")
    payloads = getattr(module, "PAYLOADS", None)
    return dags[0], dict(payloads) if isinstance(payloads, Mapping) else {}


def run_conf(dag: Any, conf: Mapping[str, Any], sets: list[list[str]]) -> dict[str, Any]:
    """``--conf`` with each ``--set KEY=VALUE`` on top; VALUE is a string for a string param
    (``--set name=007`` stays "007") and JSON otherwise (numbers, booleans, lists, objects)."""
    result = dict(conf)
    for key, raw in sets:
        schema: Mapping[str, Any] = {}
        if key in dag.params:
            schema = getattr(dag.params.get_param(key), "schema", {}) or {}
        kind = schema.get("type")
        kinds = set(kind) if isinstance(kind, list) else {kind}
        if "string" in kinds:
            result[key] = raw
            continue
        try:
            result[key] = json.loads(raw)
        except ValueError:
            if kinds - {None}:
                raise UsageProblem(
                    f"--set {key}: expected {' or '.join(sorted(k for k in kinds if k))}"
                    f" (JSON), got {raw!r}"
                ) from None
            result[key] = raw
    return result


def gate_signals(dags: Mapping[str, Any], items: list[list[str]]) -> dict[str, list[str]]:
    """``--signal GATE=VALUE`` pairs -> gate -> answers; a GATE that is no approve/input gate
    of this run's DAGs is a usage error naming the gates there are."""
    from ..compat import hitl_operators

    HITLOperator, _ = hitl_operators()

    gates = sorted(
        {
            task_id
            for dag in dags.values()
            for task_id, task in dag.task_dict.items()
            if isinstance(task, HITLOperator)
        }
    )
    signals: dict[str, list[str]] = {}
    for gate, value in items:
        if gate not in gates:
            known = ", ".join(gates) if gates else "none"
            raise UsageProblem(f"--signal {gate}: no approve/input gate {gate!r} (gates: {known})")
        signals.setdefault(gate, []).append(value)
    return signals


class Progress:
    """Prints one line per step when the task(s) holding it have all finished."""

    def __init__(
        self, payloads: Mapping[str, Mapping[str, Any]], stream: IO[str], recorder: Any
    ) -> None:
        self.payloads = payloads
        self.stream = stream
        self.recorder = recorder
        self.printed: set[tuple[str, str, str]] = set()
        self.parents: dict[tuple[str, str], tuple[str, str] | None] = {}
        self.width = max(
            (len(step) for units in payloads.values() for step in _step_names(units)), default=4
        )

    def run_started(self, dag_id: str, run_id: str, parent: tuple[str, str] | None) -> None:
        self.parents[(dag_id, run_id)] = parent
        if parent is not None:
            self.stream.write(f"  > child run of {dag_id}: {run_id}\n")

    def tasks_changed(self, dag_id: str, run_id: str, rows: list[TaskRow]) -> None:
        from ..templating.ids import execution_id_for

        payloads = self.payloads.get(dag_id) or {}
        done = [
            unit
            for unit in complete_units(payloads, rows)
            if (dag_id, run_id, unit) not in self.printed
        ]
        if not done:
            return
        self.printed.update((dag_id, run_id, unit) for unit in done)
        report = build_report(
            payloads=payloads,
            tasks=rows,
            xcoms=fetch_xcoms(dag_id, run_id),
            events=list(self.recorder.events),
            dag_id=dag_id,
            run_id=run_id,
            execution_id=execution_id_for(dag_id, run_id),
            only_units=done,
        )
        prefix = "  " if self.parents.get((dag_id, run_id)) else ""
        for step, step_report in report["steps"].items():
            if step_report["state"] != "not_run":
                self.stream.write(progress_line(step, step_report, self.width, prefix) + "\n")


def _step_names(payloads: Mapping[str, Any]) -> list[str]:
    return [step for unit in units_of(payloads) for step in unit.steps]


def fetch_xcoms(dag_id: str, run_id: str) -> dict[str, Any]:
    """XCom ``return_value`` of the run's unmapped task instances."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(XComModel)
            .filter_by(dag_id=dag_id, run_id=run_id, key="return_value", map_index=-1)
            .all()
        )
        return {row.task_id: XComModel.deserialize_value(row) for row in rows}


def fetch_tasks(dag_id: str, run_id: str, errors: Mapping[tuple, str]) -> list[TaskRow]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    from .driver import task_row

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id).all()
        return [task_row(ti, errors.get((dag_id, run_id, ti.task_id, ti.map_index))) for ti in tis]


def run_variables(dag: Any, dag_id: str, run_id: str, profile: EngineProfile) -> dict[str, Any]:
    """The execution's variables before any step wrote one, as NoETL's ctx starts: the
    workload (the DAG's params, the playbook's defaults), then the request payload (the run's
    conf) on top, as the operators read them (``NoetlTask.workload``)."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    from ..templating.context import execution_variables

    params = getattr(dag, "params", None) or {}
    with create_session() as session:
        conf = session.query(DagRun.conf).filter_by(dag_id=dag_id, run_id=run_id).scalar()
    conf = conf or {}
    defaults = {key: params[key] for key in params if key not in conf}
    return execution_variables(defaults, conf, profile)


def _profile(payloads: Mapping[str, Any]) -> EngineProfile:
    """As ``NoetlTask.noetl_profile``: the profile of the first payload that names one."""
    for payload in payloads.values():
        if payload.get("generation") or payload.get("dialect"):
            return profile_for(payload)
    return CANONICAL


def run_report(driver: Any, payloads: Mapping[str, Any], dag_id: str, run_id: str, state: str):
    from ..templating.ids import execution_id_for

    return build_report(
        variables=run_variables(
            driver.dags.get(dag_id), dag_id, run_id, _profile(payloads.get(dag_id) or {})
        ),
        payloads=payloads.get(dag_id) or {},
        tasks=fetch_tasks(dag_id, run_id, driver.errors),
        xcoms=fetch_xcoms(dag_id, run_id),
        events=list(driver.recorder.events),
        dag_id=dag_id,
        run_id=run_id,
        execution_id=execution_id_for(dag_id, run_id),
        state="success" if state == "success" else "failed",
    )


class _LocalRunEnd:
    """The ``component`` that ``before_stopping`` is told about: this local run."""


def _stop_listeners() -> None:
    """Tell Airflow's listeners the run is over, as an Airflow job does when it stops. The
    OpenLineage provider's listener sends DAG run events through a pool of forked processes and
    shuts it down here (the run's last event is written first); without it those processes
    outlive the ``os._exit`` this process leaves with and keep the caller's pipes open."""
    from airflow.listeners.listener import get_listener_manager

    try:
        get_listener_manager().hook.before_stopping(component=_LocalRunEnd())
    except Exception:  # a listener's failure never fails the run
        log.warning("a listener failed at the end of the run", exc_info=True)


def execute(request: Mapping[str, Any], home: Home, log_path: Path, out: IO[str], err: IO[str]):
    from ..compat import ParamValidationError
    from ..events import NullRecorder, default_recorder, flush, set_default_recorder
    from ..templating.ids import execution_id_for
    from .driver import Driver, RunRecorder
    from .live import Live

    started = time.monotonic()
    as_json = bool(request.get("json"))
    progress_stream = err if as_json else out
    _one_fsync_per_checkpoint()
    if ensure_db(home):
        if home.slot == 0:
            err.write(f"noetlc: created the local Airflow home {home.root} (first run only)\n")
        else:  # a run beside another one: its own DB (home.py says why), made once per slot
            err.write(f"noetlc: set up run slot {home.slot} of {home.root} (once per slot)\n")
    dags: dict[str, Any] = {}
    payloads: dict[str, dict[str, Any]] = {}
    for dag_id, path in request["dags"].items():
        dags[dag_id], payloads[dag_id] = _import_dag(dag_id, path)
    parent = request["dag_id"]
    conf = run_conf(dags[parent], request.get("conf") or {}, request.get("set") or [])

    event_log = default_recorder()  # the store the environment configures (or none)
    recorder = RunRecorder(None if isinstance(event_log, NullRecorder) else event_log)
    set_default_recorder(recorder)
    progress = Progress(payloads, progress_stream, recorder)
    signals = gate_signals(dags, request.get("signals") or [])
    driver = Driver(dags, recorder, progress, signals=signals)
    # Start lines and heartbeats go to stderr: stdout keeps one line per finished step (text) or
    # one JSON object (--json), while a terminal shows both.
    terminal = not as_json and _is_terminal(out) and _is_terminal(err)
    driver.live = live = Live(payloads, err, width=progress.width, terminal=terminal)
    recorder.observers.append(live.observe)
    if terminal:
        progress.stream = _Through(live)  # finished lines above rich's live status line

    def interrupt(signum: int, frame: Any) -> None:
        driver.interrupted = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    stale = driver.fail_stale_runs()
    if stale:
        log.info("marked %d run(s) of an interrupted command failed", stale)
    sync_sign = _sync_signature(home)
    if sync_sign is not None and _read_text(home.synced) == sync_sign and driver.synced():
        driver.unpause()  # the same files as the last sync: the DB holds their DAGs already
    else:
        home.synced.unlink(missing_ok=True)
        driver.sync()
        record_sync(home, sync_sign)
    try:
        run = driver.create_run(parent, conf)
    except ParamValidationError as exc:
        first = (str(exc).strip().splitlines() or ["invalid"])[0]
        raise UsageProblem(f"the workload does not fit the playbook: {first}") from None
    execution_id = execution_id_for(parent, run.run_id)
    progress.stream.write(f"{parent}  run {run.run_id}  execution_id {execution_id}\n")
    progress.stream.write(f"events  {_event_log_location(event_log, execution_id)}\n")
    # Set-up is over: what it built stays (frozen, never scanned again); the tasks, which may
    # loop for long, run with the collector on.
    gc.freeze()
    gc.enable()
    try:
        state = driver.drive(run)
    finally:
        live.close()
        _stop_listeners()
    if recorder.forward is not None and not flush(recorder.forward, 30.0):
        err.write("noetlc: the event log is unreachable; events wait in its outbox\n")
    for event in recorder.events:  # the event trail, for whoever reads the log
        log.info(
            "event %s %s step=%s execution_id=%s task=%s iteration=%s",
            event.name,
            event.status,
            event.step,
            event.execution_id,
            event.task_id,
            event.iteration,
        )
    report = run_report(driver, payloads, parent, run.run_id, state)
    children = [
        run_report(driver, payloads, dag_id, run_id, _final_state(dag_id, run_id))
        for dag_id, run_id in driver.driven[1:]
    ]
    if children:
        report["children"] = children
    report["log"] = str(log_path)
    if as_json:
        out.write(json.dumps(ids_as_text(report), ensure_ascii=False, default=str) + "\n")
    else:
        out.write(render_summary(report, _wall_time(request, started), str(log_path)))
    return EXIT_OK if report["state"] == "success" else EXIT_FAILED


def _one_fsync_per_checkpoint() -> None:
    """The home's SQLite DB (WAL, which Airflow sets on every connection) without an fsync per
    commit: ``synchronous=NORMAL``, which in WAL mode never corrupts the DB and at worst loses
    the last transactions to a power cut, where a run is lost anyway. A run commits about 20
    times (6 ms each measured in a warm fork at load 20); applies to connections opened from
    here on (a warm fork opens all of its own)."""
    from airflow import settings
    from sqlalchemy import event

    engine = settings.engine
    if engine is None or engine.dialect.name != "sqlite":
        return
    if not event.contains(engine, "connect", _synchronous_normal):
        event.listen(engine, "connect", _synchronous_normal)


def _synchronous_normal(dbapi_connection: Any, connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
            cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def record_sync(home: Home, signature: str | None = None) -> None:
    """Note that the DB now holds the DAGs of the home's dags folder as it is."""
    signature = _sync_signature(home) if signature is None else signature
    if signature is not None:
        home.synced.write_text(signature, encoding="utf-8")


def _sync_signature(home: Home) -> str | None:
    """What a DAG sync of this home depends on: every file of the dags folder, the DB (its
    marker says which Airflow made it and when) and the plugin's code (operators serialize
    their fields). Equal signatures: the sync would write what the DB holds (about 0.1 s of a
    warm run saved). None when the folder cannot be read: sync."""
    import hashlib

    digest = hashlib.sha256()
    digest.update((_read_text(home.marker) or "").encode())
    digest.update(code_stamp().encode())
    try:
        for folder, subfolders, files in sorted(os.walk(home.dags)):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            for name in sorted(files):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, home.dags).encode() + b"\0")
                with open(path, "rb") as handle:
                    digest.update(handle.read())
                digest.update(b"\0")
    except OSError:
        return None
    return digest.hexdigest()


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


class _Through:
    """A text stream whose lines go through the live display's console."""

    def __init__(self, live: Any) -> None:
        self.live = live

    def write(self, text: str) -> int:
        self.live.print_line(text)
        return len(text)

    def flush(self) -> None:
        return None


def _wall_time(request: Mapping[str, Any], started: float) -> float:
    """Seconds since the command started (the CLI stamps ``started_at``, epoch seconds, before
    it compiles and this process imports Airflow), else since this process got the request."""
    began = request.get("started_at")
    if isinstance(began, int | float) and 0 < time.time() - began < 86400 * 7:
        return time.time() - began
    return time.monotonic() - started


def _event_log_location(event_log: Any, execution_id: int) -> str:
    store = getattr(event_log, "store", None)
    if store is None:
        return "off (NOETL_EVENTS=off)"
    return f"{store.describe()}  (noetlc events {execution_id})"


def _final_state(dag_id: str, run_id: str) -> str:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        run = session.query(DagRun).filter_by(dag_id=dag_id, run_id=run_id).one()
        return str(getattr(run.state, "value", run.state))
