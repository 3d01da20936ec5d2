"""The run loop of `noetlc run`: Airflow's own ``dag.test()`` loop, plus what a playbook needs.

``DAG.test()`` (Airflow 3.3) serialises the DAG, syncs the dags-folder bundle, creates a run and
loops: ``DagRun.update_state`` picks the runnable task instances, each runs in this process
through the in-process Execution API (``_run_task`` -> ``run_task_in_process``), deferrals run
their trigger inline. This module drives runs with those same calls and differs where a
playbook run needs it:

* **child runs**: a nested playbook step triggers its child's DAG (``TriggerDagRunOperator``)
  and defers until the child finishes. ``dag.test()`` has no scheduler to start the child, so
  its inline trigger would wait forever. Here, when a task defers, every queued run of a DAG of
  this command is driven to the end first (recursively), then the trigger runs and finds it done;
* **gates**: a human-in-the-loop task parks in ``awaiting_input`` (Airflow 3.3; before, it defers
  to ``HITLTrigger``, and the driver keeps that deferral aside as the gate); ``dag.test()`` waits
  for an answer forever. Here a ``--signal`` answers it through Airflow's own response path (the
  ``hitl_detail`` row written as the REST API writes it, then ``handle_event_submit`` with the
  event the trigger would send: the task resumes into ``execute_complete``); a gate with no
  signal whose deadline is near (at most ``gate_wait`` seconds) waits for it, then the timeout
  rule applies (defaults, or ``HITLTimeoutError``: Airflow's scheduler sweep
  ``check_awaiting_input_timeouts`` on 3.3, what ``HITLTrigger`` does on its deadline before);
  any other gate fails with a message naming the ``--signal`` to give;
* **no idle polling**: nothing sleeps unless an Airflow retry is waiting for its delay; a run
  where nothing can start any more ends instead of spinning;
* **progress**: a listener hears about every task instance that finished (skips included, which
  Airflow's listener hooks do not report) as soon as it did, and each task's error is kept;
* **events**: ``RunRecorder`` stamps the run being driven on runtime events that carry no
  Airflow coordinates, so parent and child steps of the same name stay apart.

Runs are created without a logical date (like the UI's trigger), so runs of the same DAG never
collide and none is ever deleted.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from airflow.models.dagrun import DagRun
from airflow.utils.state import DagRunState, TaskInstanceState
from airflow.utils.types import DagRunTriggeredByType, DagRunType

from ..compat import awaiting_input_state, is_hitl_trigger, run_user, timezone
from ..events import Event, MemoryRecorder, Recorder
from .report import FINISHED, TaskRow

__all__ = ["DriveListener", "Driver", "RunRecorder", "task_row"]

log = logging.getLogger(__name__)

MAX_RETRY_WAIT = 1.0  # seconds slept at a time while an Airflow retry waits for its delay
# A gate with no --signal waits for its own timeout when that comes within this many seconds
# (a test playbook's `timeout: 2s`); a longer one fails at once instead of hanging the command.
GATE_WAIT = 60.0


class RunRecorder(MemoryRecorder):
    """Keeps every event for the report; stamps the run being driven on events without
    coordinates, then hands them on to ``forward`` (the event log)."""

    def __init__(self, forward: Recorder | None = None) -> None:
        super().__init__()
        self.active: list[tuple[str, str]] = []
        self.forward = forward
        self.observers: list[Any] = []  # called with each event as it is recorded (live.Live)

    def record(self, event: Event) -> None:
        if self.active and event.dag_id is None:
            dag_id, run_id = self.active[-1]
            event = dataclasses.replace(event, dag_id=dag_id, run_id=run_id)
        super().record(event)
        for observe in self.observers:
            observe(event)
        if self.forward is not None:
            self.forward.record(event)


class DriveListener(Protocol):
    def run_started(self, dag_id: str, run_id: str, parent: tuple[str, str] | None) -> None: ...

    def tasks_changed(self, dag_id: str, run_id: str, rows: list[TaskRow]) -> None: ...


def _state(value: Any) -> str | None:
    value = getattr(value, "value", value)
    return None if value is None else str(value)


def task_row(ti: Any, error: str | None = None) -> TaskRow:
    end = getattr(ti, "end_date", None)
    return TaskRow(
        task_id=ti.task_id,
        map_index=int(ti.map_index if ti.map_index is not None else -1),
        state=_state(ti.state),
        try_number=int(ti.try_number or 0),
        duration=float(ti.duration) if ti.duration is not None else None,
        end=end.timestamp() if end is not None else None,
        error=error,
    )


def _error_text(error: BaseException | None) -> str | None:
    if error is None:
        return None
    text = str(error).strip()
    # Airflow's own failure exceptions carry the message; anything else keeps its type.
    if type(error).__name__ in ("AirflowFailException", "AirflowException") and text:
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _ti_key(ti: Any) -> tuple[str, str, str, int]:
    return (ti.dag_id, ti.run_id, ti.task_id, ti.map_index)


def _trigger_deadline(message: Any) -> Any:
    """The answer deadline a deferred gate's ``HITLTrigger`` holds (None: no timeout)."""
    from ..compat import trigger_kwargs

    return trigger_kwargs(message).get("timeout_datetime")


class Driver:
    """Creates and drives runs of the given DAGs (dag_id -> SDK DAG) in this process."""

    def __init__(
        self,
        dags: Mapping[str, Any],
        recorder: RunRecorder,
        listener: DriveListener,
        signals: Mapping[str, list[str]] | None = None,
        gate_wait: float = GATE_WAIT,
    ) -> None:
        from airflow import settings

        if settings.Session is None:
            raise RuntimeError("Airflow's ORM is not configured")
        self.session = settings.Session()
        self.dags = dict(dags)
        self.recorder = recorder
        self.listener = listener
        self.errors: dict[tuple[str, str, str, int], str] = {}
        self.driven: list[tuple[str, str]] = []  # (dag_id, run_id), in start order
        # Set on Ctrl-C. The task runner turns the KeyboardInterrupt into that task's failure
        # and would carry on with the next task; the loop checks this flag and stops instead.
        self.interrupted = False
        self._serialized: dict[str, Any] = {}
        # --signal answers: gate (step / task id) -> the answer texts, used for every run.
        self.signals = {k: list(v) for k, v in (signals or {}).items()}
        self.gate_wait = gate_wait
        self._sweeper: Any = None
        self.live: Any = None  # live.Live: start lines and heartbeats, when set
        # Gates parked as a deferral to HITLTrigger (Airflow < 3.3): ti key -> its DeferTask.
        self._parked: dict[tuple[str, str, str, int], Any] = {}

    # -- set-up -------------------------------------------------------------------------------

    def sync(self) -> None:
        """Write the dags folder's DAGs to the DB (what the DAG processor would do)."""
        from airflow.dag_processing.bundles.manager import DagBundlesManager

        from ..compat import bundle_dag_bag, sync_bag

        manager = DagBundlesManager()
        manager.sync_bundles_to_db(session=self.session)
        self.session.commit()
        for bundle in manager.get_all_dag_bundles():
            if not bundle.is_initialized:
                bundle.initialize()
            bag = bundle_dag_bag(bundle.path, bundle.name)
            if bag.import_errors:
                problems = "; ".join(f"{k}: {v}" for k, v in bag.import_errors.items())
                raise RuntimeError(f"a compiled DAG file does not import: {problems}")
            sync_bag(bag, bundle.name, bundle.version)
        self._unpause()

    def synced(self) -> bool:
        """Whether every DAG of this command is in the DB as the last sync left it (a row, not
        stale, a serialized version): what ``sync`` would write, when the files did not change."""
        from airflow.models.dag import DagModel
        from airflow.models.serialized_dag import SerializedDagModel
        from sqlalchemy import func, select

        ids = list(self.dags)
        fresh = self.session.scalar(
            select(func.count(DagModel.dag_id)).where(
                DagModel.dag_id.in_(ids), DagModel.is_stale.is_(False)
            )
        )
        serialized = self.session.scalar(
            select(func.count(func.distinct(SerializedDagModel.dag_id))).where(
                SerializedDagModel.dag_id.in_(ids)
            )
        )
        return fresh == len(ids) and serialized == len(ids)

    def unpause(self) -> None:
        self._unpause()

    def _unpause(self) -> None:
        """The command's DAGs run: a home made before they were created unpaused may hold them
        paused, and a child run of a paused DAG is refused (``fail_when_dag_is_paused``)."""
        from airflow.models.dag import DagModel
        from sqlalchemy import update

        self.session.execute(
            update(DagModel).where(DagModel.dag_id.in_(list(self.dags))).values(is_paused=False)
        )
        self.session.commit()

    def fail_stale_runs(self) -> int:
        """Runs left running or queued by a command that was killed (the slot's lock says that
        nothing else runs on this DB now): mark them failed so no child lookup ever picks them up."""
        from sqlalchemy import select

        stale = self.session.scalars(
            select(DagRun).where(DagRun.state.in_((DagRunState.RUNNING, DagRunState.QUEUED)))
        ).all()
        for run in stale:
            run.state = DagRunState.FAILED
        self.session.commit()
        return len(stale)

    def _scheduler_dag(self, dag_id: str) -> Any:
        if dag_id not in self._serialized:
            from ..compat import DagSerialization

            dag = self.dags[dag_id]
            dag.validate()
            self._serialized[dag_id] = DagSerialization.deserialize_dag(
                DagSerialization.serialize_dag(dag)
            )
        return self._serialized[dag_id]

    def create_run(self, dag_id: str, conf: Mapping[str, Any]) -> DagRun:
        """A manual run of ``dag_id``; raises ``ParamValidationError`` for a bad ``conf``."""
        now = timezone.utcnow()
        run_id = f"noetlc__{now.strftime('%Y-%m-%dT%H:%M:%S.%f')}_{uuid.uuid4().hex[:8]}"
        run = self._scheduler_dag(dag_id).create_dagrun(
            run_id=run_id,
            logical_date=None,
            data_interval=None,
            run_after=now,
            conf=dict(conf),
            run_type=DagRunType.MANUAL,
            triggered_by=DagRunTriggeredByType.TEST,
            **run_user("noetlc"),
            state=DagRunState.RUNNING,
            start_date=now,
            session=self.session,
        )
        self.session.commit()
        return run

    # -- the loop -----------------------------------------------------------------------------

    def drive(self, run: DagRun, parent: tuple[str, str] | None = None) -> str:
        """Run ``run`` to its end; returns its final state."""
        session = self.session
        dag = self.dags[run.dag_id]
        run.dag = self._scheduler_dag(run.dag_id)
        key = (run.dag_id, run.run_id)
        self.driven.append(key)
        self.listener.run_started(run.dag_id, run.run_id, parent)
        self.recorder.active.append(key)
        idle, last = 0, None
        try:
            while True:
                session.expire_all()
                if run.state != DagRunState.RUNNING:
                    break
                schedulable, _ = run.update_state(session=session)
                for ti in schedulable:
                    if ti.state != TaskInstanceState.UP_FOR_RESCHEDULE:
                        ti.try_number += 1
                    ti.state = TaskInstanceState.SCHEDULED
                    ti.scheduled_dttm = timezone.utcnow()
                session.commit()
                tis = run.get_task_instances(session=session)
                self._changed(run, tis)
                if run.state != DagRunState.RUNNING:
                    break
                ready = sorted(
                    (ti for ti in tis if ti.state == TaskInstanceState.SCHEDULED),
                    key=lambda ti: (ti.task_id, ti.map_index),
                )
                if ready:
                    idle = 0
                    for ti in ready:
                        self._run_one(dag, run, ti)
                        if self.interrupted:
                            run.set_state(DagRunState.FAILED)
                            session.commit()
                            raise KeyboardInterrupt
                        # Progress right after a task; a mapped instance finishes no step by
                        # itself (its loop's tail does), and a loop may map 1,024 of them.
                        if ti.map_index < 0:
                            self._changed(run, run.get_task_instances(session=session))
                    continue
                # update_state settles a few tasks per call (upstream_failed, skips); only calls
                # that change nothing at all count as idle.
                snapshot = sorted((ti.task_id, ti.map_index, _state(ti.state) or "") for ti in tis)
                idle = idle + 1 if snapshot == last else 0
                last = snapshot
                self._unblock(run, tis, idle)
        finally:
            self.recorder.active.pop()
        session.expire_all()
        return _state(run.state) or "failed"

    def _unblock(self, run: DagRun, tis: list[Any], idle: int) -> None:
        """Nothing is ready: wait for a retry delay, fail a gate, or end a run that is stuck."""
        waiting = [ti for ti in tis if _state(ti.state) not in FINISHED]
        awaiting = awaiting_input_state()
        gates = [
            ti
            for ti in waiting
            if (awaiting is not None and ti.state == awaiting) or self._parked_defer(ti) is not None
        ]
        retries = [ti for ti in waiting if ti.state == TaskInstanceState.UP_FOR_RETRY]
        if gates:
            for ti in gates:
                self._gate(run, ti)
        elif retries:
            time.sleep(MAX_RETRY_WAIT)
        elif idle >= 3 and waiting:
            # update_state found nothing to schedule three times in a row: nothing will.
            for ti in waiting:
                self._fail(run, ti, f"cannot start (state {_state(ti.state) or 'none'})")
        self.session.commit()

    def _gate(self, run: DagRun, ti: Any) -> None:
        """Answer a waiting gate from --signal, wait out a near deadline, or fail it."""
        from airflow.models.hitl import HITLDetail

        from ..runtime.gates import GateAnswerError, answer_syntax, param_defaults, parse_answer

        detail = self.session.get(HITLDetail, ti.id)
        if detail is None:
            self._fail(run, ti, "waits for input but has no human-in-the-loop request")
            return
        # Airflow 3.1 writes the DAG's params into the request beside the gate's own: the answer
        # is about the gate's, and carries the others' values unchanged (the HITL operator
        # checks that it has every one).
        task = self.dags[run.dag_id].task_dict.get(ti.task_id)
        own = (getattr(task, "tool", None) or {}).get("params") or {}
        params = {k: v for k, v in (detail.params or {}).items() if k in own}
        others = param_defaults({k: v for k, v in (detail.params or {}).items() if k not in own})
        syntax = answer_syntax(ti.task_id, list(detail.options or []), params)
        answers = self.signals.get(ti.task_id)
        if answers:
            try:
                chosen, values = parse_answer(answers, list(detail.options or []), params)
            except GateAnswerError as exc:
                self._fail(run, ti, f"--signal {ti.task_id}: {exc}; answer with {syntax}")
                return
            self._respond(ti, detail, chosen, {**others, **values})
            return
        parked = self._parked_defer(ti)
        deadline = ti.trigger_timeout if parked is None else _trigger_deadline(parked)
        now = timezone.utcnow()
        if deadline is not None and (deadline - now).total_seconds() <= self.gate_wait:
            if now <= deadline:
                time.sleep(min(MAX_RETRY_WAIT, (deadline - now).total_seconds() + 0.05))
                return
            if parked is not None:
                self._time_out_parked(ti, detail, parked)
                return
            self._sweep()
            return
        timeout = "" if deadline is None else f", timeout at {deadline.isoformat()}"
        self._fail(
            run,
            ti,
            f"gate {ti.task_id!r} waits for an answer ({detail.subject!r}{timeout}); "
            f"answer it with `noetlc run ... {syntax}`",
        )

    def _respond(self, ti: Any, detail: Any, chosen: list[str], values: dict[str, Any]) -> None:
        """Write the answer as the REST API's PATCH .../hitlDetails does, and resume the task
        the way it does (``handle_event_submit``: SCHEDULED into ``execute_complete``)."""
        import getpass

        from airflow.models.trigger import handle_event_submit
        from airflow.triggers.base import TriggerEvent

        user = getpass.getuser()
        detail.responded_by = {"id": user, "name": user}
        detail.responded_at = timezone.utcnow()
        detail.chosen_options = chosen
        detail.params_input = values
        self.session.add(detail)
        if self._parked.pop(_ti_key(ti), None) is not None:
            # A gate deferred to HITLTrigger (Airflow < 3.3): the event its trigger would send
            # on finding this answer (the trigger asks the supervisor, which a run in this
            # process does not have).
            payload = {
                "chosen_options": chosen,
                "params_input": values,
                "responded_at": detail.responded_at,
                "responded_by_user": detail.responded_by,
                "timedout": False,
            }
        else:
            payload = detail.as_resume_event_payload()
        handle_event_submit(TriggerEvent(payload), task_instance=ti, session=self.session)
        self.session.commit()

    def _parked_defer(self, ti: Any) -> Any:
        return self._parked.get(_ti_key(ti))

    def _time_out_parked(self, ti: Any, detail: Any, message: Any) -> None:
        """A deferred gate's deadline passed: what ``HITLTrigger._handle_timeout`` does (the
        defaults recorded as the answer, else a timeout failure), resumed the same way."""
        from airflow.models.trigger import handle_event_submit
        from airflow.triggers.base import TriggerEvent

        from ..compat import trigger_kwargs

        self._parked.pop(_ti_key(ti), None)
        kwargs = trigger_kwargs(message)
        defaults = kwargs.get("defaults")
        if defaults is None:
            payload: dict[str, Any] = {
                "error": "The timeout has passed, and the response has not yet been received.",
                "error_type": "timeout",
            }
        else:
            params = {
                key: spec.get("value") if isinstance(spec, Mapping) else spec
                for key, spec in (kwargs.get("params") or {}).items()
            }
            detail.chosen_options = list(defaults)
            detail.params_input = params
            detail.responded_at = timezone.utcnow()
            self.session.add(detail)
            payload = {
                "chosen_options": list(defaults),
                "params_input": params,
                "responded_by_user": None,
                "responded_at": detail.responded_at,
                "timedout": True,
            }
        handle_event_submit(TriggerEvent(payload), task_instance=ti, session=self.session)
        self.session.commit()

    def _sweep(self) -> None:
        """The scheduler's timeout rule for parked gates, run by the scheduler's own code."""
        if self._sweeper is None:
            from airflow.jobs.job import Job
            from airflow.jobs.scheduler_job_runner import SchedulerJobRunner

            self._sweeper = SchedulerJobRunner(job=Job())
        self._sweeper.check_awaiting_input_timeouts(session=self.session)
        self.session.commit()

    def _fail(self, run: DagRun, ti: Any, message: str) -> None:
        self.errors[(run.dag_id, run.run_id, ti.task_id, ti.map_index)] = message
        ti.set_state(TaskInstanceState.FAILED, session=self.session)

    def _run_one(self, dag: Any, run: DagRun, ti: Any) -> None:
        task = dag.task_dict[ti.task_id]
        key = (run.dag_id, run.run_id, ti.task_id, ti.map_index)
        if self.live is not None:
            prefix = "  " if len(self.recorder.active) > 1 else ""  # a child run's step
            self.live.task_started(run.dag_id, run.run_id, ti.task_id, prefix)
        try:
            self._run_task(dag, run, ti, task, key)
        finally:
            if self.live is not None:
                self.live.task_finished()

    def _run_task(self, dag: Any, run: DagRun, ti: Any, task: Any, key: tuple) -> None:
        from airflow.sdk.execution_time.comms import DeferTask

        from ..compat import run_test_task

        while True:
            try:
                outcome = run_test_task(ti, task)
            except Exception as exc:  # one task's crash is that task's failure, not the command's
                log.exception("task %s failed to run", ti.task_id)
                self.errors[key] = _error_text(exc) or "failed"
                if _state(ti.state) not in FINISHED:
                    ti.set_state(TaskInstanceState.FAILED, session=self.session)
                    self.session.commit()
                return
            if outcome is not None and outcome.error is not None:
                self.errors[key] = _error_text(outcome.error) or "failed"
            message = outcome.msg if outcome is not None else None
            if ti.state == TaskInstanceState.DEFERRED and isinstance(message, DeferTask):
                if is_hitl_trigger(message.classpath):  # a gate: answered by _unblock
                    self._parked[key] = message
                    return
                self.drive_children(parent=(run.dag_id, run.run_id))
                if self._resume(ti, message):
                    continue
            return

    def _resume(self, ti: Any, message: Any) -> bool:
        """Run the deferral's trigger inline; True when the task is ready to resume."""
        from uuid import UUID

        from airflow.sdk.api.datamodels._generated import TaskInstance as TaskInstanceSDK
        from airflow.sdk.execution_time.supervisor import InProcessTestSupervisor

        from ..compat import import_string, resume_kwargs, trigger_kwargs

        sdk_ti = TaskInstanceSDK(
            id=UUID(str(ti.id)),
            task_id=ti.task_id,
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            try_number=ti.try_number,
            map_index=ti.map_index,
            dag_version_id=UUID(str(ti.dag_version_id)),
        )
        try:
            trigger = import_string(message.classpath)(**trigger_kwargs(message))
            event = InProcessTestSupervisor.run_trigger_in_process(trigger=trigger, ti=sdk_ti)
        except Exception as exc:  # a broken trigger fails its task, not the command
            log.exception("trigger of %s failed", ti.task_id)
            self.errors[(ti.dag_id, ti.run_id, ti.task_id, ti.map_index)] = (
                f"waiting failed: {_error_text(exc)}"
            )
            ti.set_state(TaskInstanceState.FAILED, session=self.session)
            self.session.commit()
            return False
        ti.next_method = message.next_method
        ti.next_kwargs = resume_kwargs(event.payload) if event else message.next_kwargs
        ti.state = TaskInstanceState.SCHEDULED
        self.session.merge(ti)
        self.session.commit()
        return True

    def drive_children(self, parent: tuple[str, str]) -> None:
        """Drive every queued run of this command's DAGs (runs a nested playbook step started)."""
        from sqlalchemy import select

        while True:
            self.session.expire_all()
            queued = [
                run
                for run in self.session.scalars(
                    select(DagRun)
                    .where(DagRun.dag_id.in_(list(self.dags)))
                    .where(DagRun.state == DagRunState.QUEUED)
                    .order_by(DagRun.id)
                ).all()
                if (run.dag_id, run.run_id) not in self.driven
            ]
            if not queued:
                return
            child = queued[0]
            child.state = DagRunState.RUNNING
            child.start_date = timezone.utcnow()
            self.session.commit()
            self.drive(child, parent=parent)

    def _changed(self, run: DagRun, tis: list[Any]) -> None:
        rows = [
            task_row(ti, self.errors.get((run.dag_id, run.run_id, ti.task_id, ti.map_index)))
            for ti in tis
        ]
        self.listener.tasks_changed(run.dag_id, run.run_id, rows)
