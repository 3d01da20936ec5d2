"""Airflow listener hooks -> NoETL events: the workflow and task lifecycle.

Where each hook runs in Airflow 3.3 (shared/reference/airflow3.md section 7b) decides what it can
see and what it must not do:

| hook | process | events |
|---|---|---|
| ``on_task_instance_running`` | task runner (worker) | PlaybookExecutionRequested, WorkflowStarted (first task of a run; ids dedupe the rest), TaskStarted |
| ``on_task_instance_success/failed/skipped`` | task runner; scheduler for a killed worker, a timeout, a lost heartbeat, an executor reporting a dead task process while its task instance still runs; API server for a manual state change | TaskFinished (status success, error, skipped), then the task's events are flushed |
| ``on_dag_run_running`` | scheduler (not under ``dag.test``) | PlaybookExecutionRequested, WorkflowStarted |
| ``on_dag_run_success/failed`` | scheduler, API server, the ``dag.test`` process | TaskFinished for tasks that never ran (skipped, upstream_failed), for a failed last attempt whose process was killed before it could tell, and for every earlier attempt Airflow archived (``task_instance_history``: a killed attempt that was retried told nobody), WorkflowFinished, PlaybookProcessed |
| ``before_stopping`` | every task runner and Airflow job | flush |

A run that is cleared and runs again is a new attempt of the run (Airflow's ``clear_number``):
its WorkflowStarted, WorkflowFinished and PlaybookProcessed are new events, and its tasks' new
tries are new task events (ids carry the try number), so the log keeps the failed attempt and
the one that followed (``events.workflow``).

One transition can be told twice (the worker and the scheduler both report a failure; every task
of a run announces its start): ids are derived from the transition alone, so the store keeps one
row, and a task attempt has exactly one TaskFinished whoever reported it first. Hooks never raise
(pluggy stops at the first raising listener, which would silence the others) and never touch
Airflow's metadata DB from a worker (Airflow 3 forbids it there).

Only DAGs compiled by noetlc are recorded (their operators carry a NoETL ``payload``, or the DAG
is tagged ``noetl``).
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import pluggy

from ..errors import error_family
from ..templating.ids import execution_id_for
from . import names
from .identity import event_id
from .recorder import Event, default_recorder, deliver_soon, emit, flush
from .workflow import run_finished, run_started

__all__ = ["EventLogListener", "playbook_identity"]

log = logging.getLogger(__name__)

hookimpl = pluggy.HookimplMarker("airflow")

# The DAG's doc_md lists them as "- Source: `path`" and "- SHA-256: `hash`" (older DAG files:
# the module docstring's bare "Source: path" lines); both forms are read.
_SOURCE = re.compile(
    r"^(?:- )?+Source: (?:`(?P<quoted>[^`\n]++)`|(?P<path>[^`\n]++))$", re.MULTILINE
)
_HASH = re.compile(r"^(?:- )?+SHA-256: `?+(?P<hash>[0-9a-f]{64})`?+$", re.MULTILINE)
_NEVER_RAN = ("skipped", "upstream_failed", "removed")
_HOOK_OF = {"success": "success", "error": "failed", "skipped": "skipped"}
# The TaskFinished status of an archived attempt, by the state Airflow archived it in (an
# attempt archived while unfinished, as a killed one retried, is archived as failed).
_ARCHIVED_STATUS = {"success": "success", "skipped": "skipped", "upstream_failed": "skipped"}


def playbook_identity(dag: Any) -> tuple[str | None, str | None]:
    """(playbook path, content sha256) from a compiled DAG's docstring (emitter 1 writes both);
    ``dag`` may also be the docstring itself."""
    return _identity_of(dag if isinstance(dag, str) else getattr(dag, "doc_md", None) or "")


@functools.lru_cache(maxsize=256)  # asked by the listener and the operator for every task
def _identity_of(doc: str) -> tuple[str | None, str | None]:
    path, digest = _SOURCE.search(doc), _HASH.search(doc)
    found = (path["quoted"] or path["path"]).strip() if path else None
    return (found, digest["hash"] if digest else None)


def _state(value: Any) -> str | None:
    value = getattr(value, "value", value)
    return None if value is None else str(value)


def _is_worker_ti(task_instance: Any) -> bool:
    # The task runner passes a RuntimeTaskInstance; scheduler and API server pass the ORM model.
    return type(task_instance).__name__ == "RuntimeTaskInstance"


class EventLogListener:
    """Registered by ``airflow_plugin.plugin.NoetlPlugin``; one instance per process."""

    def __init__(self) -> None:
        # (execution, destination) pairs whose start this process already told: every task of
        # a run would tell it again (the store would keep one), this saves the round trips.
        self._announced: set[tuple[int, int]] = set()
        self._noetl_dags: dict[str, bool] = {}

    # -- task instances -----------------------------------------------------------------------

    @hookimpl
    def on_task_instance_running(self, previous_state: Any, task_instance: Any) -> None:
        self._guard(self._task_running, task_instance)

    @hookimpl
    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        self._guard(self._task_finished, task_instance, "success", None)

    @hookimpl
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        self._guard(self._task_finished, task_instance, "error", error)

    @hookimpl
    def on_task_instance_skipped(self, previous_state: Any, task_instance: Any) -> None:
        self._guard(self._task_finished, task_instance, "skipped", None)

    # -- DAG runs -----------------------------------------------------------------------------

    @hookimpl
    def on_dag_run_running(self, dag_run: Any, msg: str) -> None:
        self._guard(self._run_started, dag_run)

    @hookimpl
    def on_dag_run_success(self, dag_run: Any, msg: str) -> None:
        self._guard(self._run_finished, dag_run, "success", msg)

    @hookimpl
    def on_dag_run_failed(self, dag_run: Any, msg: str) -> None:
        self._guard(self._run_finished, dag_run, "error", msg)

    @hookimpl
    def before_stopping(self, component: Any) -> None:
        self._guard(lambda: flush(default_recorder()))

    # -- what the hooks do --------------------------------------------------------------------

    def _guard(self, action: Any, *args: Any) -> None:
        try:
            action(*args)
        except BaseException:  # a listener must never fail or silence anything else
            log.exception("NoETL event log listener failed")

    def _is_noetl(self, dag_id: str, dag: Any = None, task: Any = None, orm: Any = None) -> bool:
        if task is not None and isinstance(getattr(task, "payload", None), Mapping):
            self._noetl_dags[dag_id] = True
            return True
        if dag_id not in self._noetl_dags:
            tags = getattr(dag, "tags", None) if dag is not None else _tags_from_db(dag_id, orm)
            self._noetl_dags[dag_id] = "noetl" in set(tags or ())
        return self._noetl_dags[dag_id]

    def _run(
        self, dag_id: str, run_id: str, dag: Any, task: Any = None, orm: Any = None
    ) -> _Run | None:
        """The run's identity when its DAG was compiled by noetlc, else None (not recorded);
        ``orm`` is the hook's ORM object, whose session reads the DAG's tags if needed."""
        if not self._is_noetl(dag_id, dag, task, orm):
            return None
        path, digest = playbook_identity(dag)
        return _Run(dag_id, run_id, execution_id_for(dag_id, run_id), path, digest)

    def _task_running(self, ti: Any) -> None:
        task = getattr(ti, "task", None)
        run = self._run(ti.dag_id, ti.run_id, getattr(task, "dag", None), task)
        if run is None:
            return
        self._announce(run, "worker", lambda: _conf_of(ti), _clear_number_of(ti))
        operator = type(task).__name__ if task is not None else None
        emit(
            self._task_event(
                ti, names.TASK_STARTED, "in_progress", run, task, {"operator": operator}
            )
        )

    def _task_finished(self, ti: Any, status: str, error: Any) -> None:
        task = getattr(ti, "task", None)
        run = self._run(ti.dag_id, ti.run_id, getattr(task, "dag", None), task, ti)
        if run is None:
            return
        state = _state(getattr(ti, "state", None))
        data: dict[str, Any] = {"state": state}
        if error is not None:
            data["error"] = _error_text(error)
            family = _error_family(error)
            if family is not None:
                data["error_family"] = family
        if state == "up_for_retry":
            data["will_retry"] = True
        if not _is_worker_ti(ti):
            # Not the task process: the scheduler (the executor reported the process dead, a
            # lost heartbeat, a timeout) or the API server (a manual state change).
            data["told_by"] = f"server hook on_task_instance_{_HOOK_OF[status]}"
        duration = _float(getattr(ti, "duration", None))
        emit(self._task_event(ti, names.TASK_FINISHED, status, run, task, data, duration=duration))
        # The task is over: its events must be stored (or in the outbox) before the process
        # ends (the supervisor gives listeners task_success_overtime, 20 s by default).
        recorder = default_recorder()
        waiting, began = getattr(recorder, "pending", None), time.monotonic()
        flush(recorder)
        took = time.monotonic() - began
        # A task's end waits here: said in its log when it is long enough to matter.
        log.log(
            logging.INFO if took >= 0.05 else logging.DEBUG,
            "NoETL event log: the task's end stored %s events in %.2fs",
            waiting if waiting is not None else "?",
            took,
        )

    def _archived_finished(self, ti: Any, run: _Run) -> None:
        state = _state(ti.state)
        status = _ARCHIVED_STATUS.get(state or "", "error")
        data: dict[str, Any] = {"state": state, "told_by": "run end (task_instance_history)"}
        if status == "error":
            data["will_retry"] = True  # archived: a later try of this task instance followed
        end = getattr(ti, "end_date", None)
        fields: dict[str, Any] = {"duration": _float(getattr(ti, "duration", None))}
        if end is not None:
            fields["timestamp"] = end  # when that attempt ended, not when the run did
        emit(self._task_event(ti, names.TASK_FINISHED, status, run, None, data, **fields))

    def _task_event(
        self,
        ti: Any,
        name: str,
        status: str,
        run: _Run,
        task: Any,
        data: Mapping[str, Any],
        **fields: Any,
    ) -> Event:
        map_index = ti.map_index if ti.map_index is not None else -1
        try_number = int(ti.try_number or 0)
        entity_id = ti.task_id if map_index < 0 else f"{ti.task_id}[{map_index}]"
        payload = getattr(task, "payload", None) or {}
        label = _map_label(ti, task) if map_index >= 0 else None
        if label is not None:
            data = {**data, "map_label": label}
        return Event(
            name=name,
            entity="task",
            entity_id=entity_id,
            status=status,
            execution_id=str(run.execution_id),
            step=payload.get("step"),
            source="worker" if _is_worker_ti(ti) else "server",
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            task_id=ti.task_id,
            map_index=map_index,
            try_number=try_number,
            playbook_path=run.path,
            playbook_hash=run.digest,
            data=data,
            # One id per task attempt and name, whichever process tells it.
            event_id=event_id("task", run.execution_id, ti.task_id, map_index, try_number, name),
            **fields,
        )

    def _announce(
        self, run: _Run, source: str, conf: Callable[[], Mapping[str, Any]], attempt: int
    ) -> None:
        """Tell the start of the run's attempt ``attempt``, once per process and destination
        (``conf`` is read only then)."""
        key = (run.execution_id, attempt, id(default_recorder()))
        if key in self._announced:
            return
        self._announced.add(key)
        run_started(
            run.execution_id,
            run.dag_id,
            workload=conf(),
            run_attempt=attempt,
            source=source,
            **run.stamps(),
        )

    def _run_started(self, dag_run: Any) -> None:
        run = self._run(dag_run.dag_id, dag_run.run_id, getattr(dag_run, "dag", None), orm=dag_run)
        if run is not None:
            conf = lambda: getattr(dag_run, "conf", None) or {}
            self._announce(run, "server", conf, _int(getattr(dag_run, "clear_number", 0)))

    def _run_finished(self, dag_run: Any, status: str, msg: str | None) -> None:
        run = self._run(dag_run.dag_id, dag_run.run_id, getattr(dag_run, "dag", None), orm=dag_run)
        if run is None:
            return
        attempt = _int(getattr(dag_run, "clear_number", 0))
        self._announce(run, "server", lambda: getattr(dag_run, "conf", None) or {}, attempt)
        for ti in _task_instances(dag_run):
            state = _state(ti.state)
            if state in _NEVER_RAN:
                # Tasks the scheduler skipped never ran, so no task hook told of them.
                emit(
                    self._task_event(
                        ti, names.TASK_FINISHED, "skipped", run, None, {"state": state}
                    )
                )
            elif state == "failed":
                # A task process killed from outside (SIGKILL, the OOM killer) runs no hook,
                # and its supervisor reports the failure straight to the API server, which
                # calls none either: the run's end is the last place that attempt's end is
                # seen. The event id is the attempt's, so when the worker did tell it (an
                # ordinary failure) the store keeps that one and drops this.
                data = {"state": state, "told_by": "run end (the task process did not tell)"}
                emit(self._task_event(ti, names.TASK_FINISHED, "error", run, None, data))
        for ti in _archived_tries(dag_run):
            # Earlier attempts of retried (or cleared) tasks. A killed attempt that Airflow
            # retried is reported by its supervisor to the API server as up_for_retry (no hook
            # runs), and the next try replaces the task instance: its archived row is the only
            # trace of its end. Same id as the worker's report, so a told attempt stays one row.
            self._archived_finished(ti, run)
        run_finished(
            run.execution_id,
            run.dag_id,
            status=status,
            data={"state": _state(getattr(dag_run, "state", None)), "message": msg},
            run_attempt=attempt,
            source="server",
            duration=_run_duration(dag_run),
            **run.stamps(),
        )
        # A task process killed during this run may have left events in its journal: the
        # run's own last events, stored now, bring them along.
        deliver_soon(default_recorder())
        flush(default_recorder())


class _Run(NamedTuple):
    dag_id: str
    run_id: str
    execution_id: int
    path: str | None
    digest: str | None

    def stamps(self) -> dict[str, Any]:
        """The run-level fields of its workflow events."""
        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "playbook_path": self.path,
            "playbook_hash": self.digest,
        }


def _conf_of(ti: Any) -> Mapping[str, Any]:
    try:
        dag_run = ti.get_template_context().get("dag_run")
    except Exception:  # noqa: BLE001 - an ORM task instance has no template context: no conf
        return {}
    conf = getattr(dag_run, "conf", None)
    return conf if isinstance(conf, Mapping) else {}


def _map_label(ti: Any, task: Any) -> str | None:
    """The name Airflow shows for a mapped instance (its ``map_index_template`` rendered: a loop
    instance's item, ``Oslo``): the rendered one once Airflow has it, else the label the loop
    head put in the instance's chunk, which that template renders."""
    rendered = getattr(ti, "rendered_map_index", None)
    if isinstance(rendered, str) and rendered:
        return rendered
    chunk = getattr(task, "chunk", None)
    label = chunk.get("label") if isinstance(chunk, Mapping) else None
    return label if isinstance(label, str) and label else None


def _clear_number_of(ti: Any) -> int:
    """The attempt of the run a worker's task instance belongs to (the task SDK's DagRun carries
    Airflow's ``clear_number``); 0 when it cannot be read. Read from the run context the
    supervisor handed the task (what the template context is built from) when it is there:
    building a template context validates the DAG's params again, on every task start."""
    from_server = getattr(ti, "_ti_context_from_server", None)
    number = getattr(getattr(from_server, "dag_run", None), "clear_number", None)
    if number is not None:
        return _int(number)
    try:
        dag_run = ti.get_template_context().get("dag_run")
    except Exception:  # noqa: BLE001 - no template context (an ORM task instance): first attempt
        return 0
    return _int(getattr(dag_run, "clear_number", 0))


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _session_of(orm: Any) -> Any:
    """The SQLAlchemy session an ORM object of the hook belongs to (None: not an ORM object).

    In the scheduler a hook runs inside the scheduling loop's transaction, where Airflow forbids
    commits ("UNEXPECTED COMMIT - THIS WILL BREAK HA LOCKS!"). A query without a session would
    open, commit and roll back the thread's shared session: the loop's DagRun objects detach and
    the scheduler crashes. Reads therefore go through the caller's own session, never commit.
    """
    if orm is None:
        return None
    try:
        from sqlalchemy.orm import object_session

        return object_session(orm)
    except Exception:  # noqa: BLE001 - not a mapped instance (a worker's RuntimeTaskInstance)
        return None


def _task_instances(dag_run: Any) -> list[Any]:
    session = _session_of(dag_run)
    try:
        if session is not None:
            return list(dag_run.get_task_instances(session=session))
        return list(dag_run.get_task_instances())
    except Exception:  # noqa: BLE001 - no DB access here (a worker): the scheduler's hook reports them
        log.debug("NoETL event log: task instances of %s not readable here", dag_run.run_id)
        return []


def _archived_tries(dag_run: Any) -> list[Any]:
    """The run's archived task attempts (``TaskInstanceHistory``: one row per try that a later
    try replaced), read through the hook's own session (see ``_session_of``), else (``dag.test``
    passes a detached run) through a session of its own that is never the thread's scoped one,
    so nothing the caller holds is committed or closed."""
    try:
        from airflow import settings
        from airflow.models.taskinstancehistory import TaskInstanceHistory as History
        from sqlalchemy import select

        query = (
            select(History)
            .where(History.dag_id == dag_run.dag_id, History.run_id == dag_run.run_id)
            .order_by(History.task_id, History.map_index, History.try_number)
        )
        session = _session_of(dag_run)
        if session is not None:
            return list(session.scalars(query))
        if settings.NonScopedSession is None:
            return []  # no metadata DB in this process (a worker): the scheduler tells them
        with settings.NonScopedSession() as own:
            return list(own.scalars(query))
    except Exception:  # never fail the run's end over its history
        log.exception("NoETL event log: archived attempts of %s not readable", dag_run.run_id)
        return []


def _tags_from_db(dag_id: str, orm: Any = None) -> list[str]:
    session = _session_of(orm)
    try:
        from airflow.models.dag import DagModel

        if session is not None:
            model = DagModel.get_dagmodel(dag_id, session=session)
        else:
            model = DagModel.get_dagmodel(dag_id)
    except Exception:  # noqa: BLE001 - no metadata DB in this process: not known as NoETL
        return []
    return [getattr(tag, "name", tag) for tag in (getattr(model, "tags", None) or [])]


def _error_family(error: Any) -> str | None:
    """The runtime error family behind a task failure: an operator raises its Airflow exception
    ``from`` the runtime error (``operators.base.fail_task``)."""
    if not isinstance(error, BaseException):
        return None
    return error_family(error) or (
        error_family(error.__cause__) if error.__cause__ is not None else None
    )


def _error_text(error: Any) -> str:
    if isinstance(error, BaseException):
        text = str(error).strip()
        return f"{type(error).__name__}: {text}" if text else type(error).__name__
    return str(error)


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _run_duration(dag_run: Any) -> float | None:
    start, end = getattr(dag_run, "start_date", None), getattr(dag_run, "end_date", None)
    if start is None or end is None:
        return None
    return (end - start).total_seconds()
