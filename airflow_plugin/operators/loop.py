"""Loop operators: ``loop.in`` over a collection, lowered as a task group.

    head (render ``in``, chunk it)  ->  body.partial(...).expand(chunk=head.output)  ->  tail

* ``NoetlLoopHeadOperator`` renders the collection and returns the chunks
  ``{"offset": i, "items": [...]}``: as many as can run at once (``runtime.loop_items``:
  a sequential loop one; a parallel or async loop one per item while they fit in the
  deployment's parallelism, else up to ``max_in_flight``, that parallelism and
  ``[core] max_map_length``), so any size maps and a big loop costs a few task instances;
* ``NoetlLoopBodyOperator`` (mapped) runs the step once per item of its chunk, in index order
  (a sequential loop stops at a failed item where the engine does: ``run_items``);
* ``NoetlLoopTailOperator`` collects the body results in index order into the loop step's
  result (``results``, ``stats``), applies ``loop.done`` routing and skips the targets not taken;
  it also closes cursor loops (``operators.cursor``);
* ``NoetlSequentialLoopOperator`` iterates inside one task when a sequential loop writes ctx,
  so each iteration sees the writes of the previous ones.

Every constructor validates its payload (a malformed payload is a DAG import error that names
the step); ``execute()`` runs the iterations with ``runtime.loop``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from noetl_compile.step_decode import decode_loop_step, decode_reads
from noetl_compile.step_model import Step

from ..errors import NoetlRuntimeError
from ..events import names
from ..runtime.loop_items import instance_count, run_items, stops_at_failure
from .base import NoetlTask, fail_task, freeze_heap, runs_in_process, step_output
from .presentation import item_label

__all__ = [
    "CompiledStepOperator",
    "NoetlLoopBodyOperator",
    "NoetlLoopHeadOperator",
    "NoetlLoopTailOperator",
    "NoetlSequentialLoopOperator",
    "decoded",
    "max_map_length",
]


def decoded(
    payload: Any, reads: Any, where: str, *, cursor: bool | None = False
) -> tuple[Step, dict[str, Any]]:
    """A loop operator's payload and ``reads``, decoded (``step_model``): the typed step and
    the plain table the operator pulls with. ``where``: the task's part (``loop head``...)."""
    step = decode_loop_step(payload, cursor=cursor)
    return step, dict(decode_reads(reads, f"{where} of step {step.name!r}", args=False).mapping)


class CompiledStepOperator(NoetlTask):
    """Base: carries a compiled payload that Airflow's Jinja never renders. ``payload``: the
    decoded step (a ``Step`` reads as its payload) or, for a region, its decoded payload."""

    ui_color = "#e8f0fe"
    # A body, a cursor worker or a tail: downstream of its loop group's head (and body).
    loop_group_member = False

    def __init__(self, *, payload: Mapping[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.payload = payload
        self.reads = reads

    @property
    def step(self) -> str:
        return self.payload["step"]

    def group_task(self, name: str) -> str:
        """Task id of a sibling in this loop's task group (``head``, ``body``, ``tail``)."""
        prefix, _, _ = self.task_id.rpartition(".")
        return f"{prefix}.{name}" if prefix else name

    def outputless_upstreams(self) -> set[str]:
        # Inside a loop's task group the head returns chunks, a body or a cursor worker its
        # records: none is a step output. Each of a 5,000-item loop's 16 body instances pulled
        # the head's whole collection this way, and the tail every instance's records twice.
        if not self.loop_group_member:
            return set()
        return {self.group_task(part) for part in ("head", "body", "worker")}

    def finish_and_route(self, context: Any, inputs: dict[str, Any], records: list) -> dict:
        from ..runtime.loop import finish
        from ..runtime.step import routing_targets

        outcome, extra = finish(self.payload, inputs, records)
        output = step_output(outcome, results={**extra, self.step: outcome.result})
        self.log.info(
            "NoETL loop %s finished: %s; next: %s",
            self.step,
            outcome.result.get("stats") if isinstance(outcome.result, dict) else None,
            outcome.next_steps,
        )
        targets = outcome.next_task_ids if routing_targets(self.payload) else None
        return self.push_and_route(context, output, targets)


def max_map_length() -> int:
    from ..compat import conf

    try:
        return max(1, conf.getint("core", "max_map_length"))
    except Exception:  # noqa: BLE001 - the documented default when the option cannot be read
        return 1024


class NoetlLoopHeadOperator(CompiledStepOperator):
    """Renders ``loop.in`` and returns the chunks the body is mapped over."""

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        step, reads = decoded(payload, reads, "loop head")
        super().__init__(payload=step, reads=reads, **kwargs)

    def execute(self, context: Any) -> Any:
        return self.chunks(context, self.pull_inputs(context, self.step))

    def chunks(self, context: Any, inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """The loop's guard, its collection rendered and cut into the body's chunks."""
        from ..runtime.loop import chunk, guard_holds, loop_event, max_in_flight, render_collection

        with self.recording(context):
            if not guard_holds(self.payload, inputs):
                from ..compat import AirflowSkipException

                # The body and the tail (none_failed_min_one_success) are skipped with the
                # head: the loop's branch ends here, as a plain step's does.
                raise AirflowSkipException(f"loop step {self.step!r}: its `when` guard is false")
            try:
                items = render_collection(self.payload, inputs)
                # Few, full instances (runtime/loop_items.py): as many as can run at once.
                # A templated bound cannot be a parse-time max_active_tis_per_dagrun, so the
                # instance count carries it.
                limit = instance_count(
                    self.payload["loop"].get("mode"),
                    len(items),
                    map_limit=max_map_length(),
                    slots=self._slots(),
                    max_in_flight=max_in_flight(self.payload, inputs),
                    templated=isinstance(self.payload["loop"].get("max_in_flight"), str),
                    in_process=runs_in_process(),
                )
            except NoetlRuntimeError as exc:
                raise fail_task(self.step, exc) from exc
            loop_event(
                self.payload, inputs, names.LOOP_STARTED, "in_progress", data={"total": len(items)}
            )
        chunks = chunk(items, limit)
        for part in chunks:
            part["total"] = len(items)
            # The body's map_index_template shows it: instances named by their item.
            part["label"] = item_label(part["items"])
            if inputs["args"]:
                # Args routed into the loop step reach the head (its upstream is the router);
                # every body instance binds them too.
                part["args"] = inputs["args"]
        self.log.info("NoETL loop %s: %d items in %d chunks", self.step, len(items), len(chunks))
        return chunks

    def _slots(self) -> int:
        """Task instances one run of this DAG can have running at once: ``[core] parallelism``
        (0: unbounded), the DAG's ``max_active_tasks`` and ``[noetl] worker_slots``, the
        smallest. ``worker_slots`` is what the deployment's workers run at once (the Celery
        workers' concurrency, summed: no Airflow option knows how many workers there are):
        where ``parallelism`` exceeds it, one more instance than the workers hold waits for a
        second wave and pays a second process start, while a fuller instance costs only its
        items (the scripted Celery stack: 2 workers x 4; a 5,000-item loop in 8 instances ran
        in 0.76x the time of 16 there)."""
        from ..compat import conf

        limits = [getattr(self.dag, "max_active_tasks", None) or _max_active_tasks()]
        try:
            parallelism = conf.getint("core", "parallelism")
        except Exception:  # noqa: BLE001 - the documented default when the option cannot be read
            parallelism = 32
        if parallelism > 0:
            limits.append(parallelism)
        workers = _worker_slots()
        if workers > 0:
            limits.append(workers)
        return max(1, min(limits))


def _worker_slots() -> int:
    """``[noetl] worker_slots`` (``AIRFLOW__NOETL__WORKER_SLOTS``); 0 when unset or unreadable."""
    from ..compat import conf

    try:
        return max(0, conf.getint("noetl", "worker_slots", fallback=0))
    except Exception:  # noqa: BLE001 - a malformed value bounds nothing, as an unset one
        return 0


class NoetlLoopBodyOperator(CompiledStepOperator):
    """One mapped instance: runs the loop step for each item of ``chunk``."""

    loop_group_member = True

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:  # the mapped operator is built from partial()
        # Decoded here so a bad payload fails at DAG import; the partial keeps the plain
        # payload (Airflow serialises it) and each mapped instance decodes its own.
        decoded(kwargs.get("payload"), kwargs.get("reads"), "loop body")
        return super().partial(**kwargs)

    def __init__(
        self, *, payload: dict[str, Any], reads: dict[str, Any], chunk: Any = None, **kwargs: Any
    ) -> None:
        step, reads = decoded(payload, reads, "loop body")
        super().__init__(payload=step, reads=reads, **kwargs)
        self.chunk = chunk

    def execute(self, context: Any) -> Any:
        from ..runtime.interpreter import interpret
        from ..runtime.loop import run_iteration

        entered, entered_cpu = time.monotonic(), time.process_time()
        freeze_heap()
        part = self.chunk if isinstance(self.chunk, dict) else {}
        offset, items, total = part.get("offset", 0), part.get("items") or [], part.get("total")
        inputs = self.pull_inputs(context, self.step)
        pulled = time.monotonic()
        # The loop's upstream routed into the head with args: the same args bind every item.
        inputs["args"] = dict(part.get("args") or {})
        records, failure = [], None

        def one(position: int, item: Any) -> dict:
            return run_iteration(
                self.payload,
                inputs,
                item,
                offset + position,
                total or len(items),
                run_body=interpret,
            )

        looped = pulled
        with self.recording(context):
            try:
                workers = self._in_process_workers(inputs, len(items))
            except NoetlRuntimeError as exc:
                raise fail_task(self.step, exc) from exc
            if workers > 1:
                records, failure = _run_concurrently(
                    one, items, workers, self.step, stop=stops_at_failure(self.payload)
                )
            else:
                # In index order. After a failed item a sequential loop of an engine that
                # issues no further item stops; otherwise the chunk's other items still run,
                # as they would in instances of their own (NoETL's iterations are commands).
                records, failure = run_items(
                    self.payload,
                    items,
                    one,
                    log=self.log.info,
                    shared=_SiblingStop.of(
                        context, self.task_id, part, len(items), int(self.retries or 0)
                    ),
                    offset=offset,
                )
            looped = time.monotonic()
        looped_cpu = time.process_time()
        if failure is not None:
            raise fail_task(self.step, failure) from failure
        output = {"records": _bounded_records(self.payload, records, total or len(items))}
        cpu = (entered_cpu, looped_cpu - entered_cpu)
        self._log_phases(context, entered, pulled, looped, len(items), output, cpu)
        return output

    def _log_phases(
        self,
        context: Any,
        entered: float,
        pulled: float,
        looped: float,
        items: int,
        output: dict,
        cpu: tuple[float, float],
    ) -> None:
        """One INFO line with where this instance's time went: its start-up (the task instance
        started -> execute), the inputs pull, the items, the end so far (events left to store,
        the XCom about to be pushed). A deployed loop's instance costs seconds where its items
        cost milliseconds; this line says which part. ``cpu``: this process's CPU before
        ``execute`` and over the inputs and items (the event writer's thread included), which
        tells a slow part from one that waited for a CPU other instances held."""
        import json
        from datetime import UTC, datetime

        from ..events.recorder import default_recorder

        started = getattr(context.get("ti"), "start_date", None)
        startup = "?"
        if isinstance(started, datetime):
            now = datetime.now(UTC)
            before = (now - started).total_seconds() - (time.monotonic() - entered)
            startup = f"{max(0.0, before):.2f}s"
        waiting = getattr(default_recorder(), "pending", None)
        try:
            size = len(json.dumps(output, default=str))
        except (TypeError, ValueError):
            size = -1
        self.log.info(
            "NoETL loop body %s: start-up %s, inputs %.2fs, %d items %.2fs (%.2f ms each), "
            "end %.2fs; CPU %.2fs before execute, %.2f ms per item; "
            "events not yet stored %s; XCom %d records, %d bytes",
            self.step,
            startup,
            pulled - entered,
            items,
            looped - pulled,
            (looped - pulled) * 1000 / max(1, items),
            time.monotonic() - looped,
            cpu[0],
            cpu[1] * 1000 / max(1, items),
            waiting if waiting is not None else "?",
            len(output.get("records") or []),
            size,
        )

    def _in_process_workers(self, inputs: Mapping[str, Any], items: int) -> int:
        """Threads for this instance's items: under ``noetlc run`` / ``dag.test()`` a parallel
        loop's single instance runs ``max_in_flight`` items at once (unbounded: Airflow's
        ``[core] max_active_tasks_per_dag``, what bounds a deployment's instances); 1 elsewhere,
        where the loop has as many instances as can run at once and Airflow runs them side by
        side."""
        from ..runtime.loop import max_in_flight

        if items < 2 or self.payload["loop"].get("mode") != "parallel" or not runs_in_process():
            return 1
        limit = max_in_flight(self.payload, inputs) or _max_active_tasks()
        return max(1, min(limit, items))


class _SiblingStop:
    """The loop's stop flag across its mapped instances (runtime.loop_items.StopFlag): the
    instance whose item failed pushes an XCom under ``KEY``; each instance reads that key of
    every map index of its task (one Execution API call, ``XCom.get_all``) before an item, at
    most every ``EVERY`` seconds (the first item always reads it).
    Under ``dag.test()`` the instances run one after another, so a later one starts no item;
    deployed, one running beside the failed one starts none after the push. A failure that
    Airflow will try again (a retryable error with retries left) pushes nothing, so the retry
    that succeeds leaves no item unrun; nor does an instance that dies without raising (a
    killed worker): its siblings run their items."""

    KEY = "noetl_loop_failed_item"
    # How stale the flag may be, in seconds: one Execution API call per item would cost a big
    # loop more than its items (5,000 calls for large_loop). Read at most this often, an item
    # may start up to this long after a sibling's failure, as NoETL's commands issued before
    # the failure was known still run. Each read is an HTTP call the API server answers: at a
    # quarter second, 80 calls per run of the 5,000-item example (8 instances of ~3 s), a
    # tenth of the run's CPU outside the items (issue 32).
    EVERY = 1.0

    def __init__(self, ti: Any, task_id: str, retries: int) -> None:
        self.ti, self.task_id, self.retries = ti, task_id, retries
        self._read_at: float | None = None
        self._known: int | None = None

    @classmethod
    def of(
        cls, context: Any, task_id: str, part: Mapping[str, Any], items: int, retries: int = 0
    ) -> Any:
        """The flag, or None when this instance holds every item (no sibling to tell: a
        sequential loop, a loop that fits one instance), so such a loop pays no call."""
        ti = context.get("ti") if hasattr(context, "get") else None
        total = part.get("total")
        if ti is None or not isinstance(total, int) or total <= items:
            return None
        return cls(ti, task_id, retries)

    def failed(self) -> int | None:
        now = time.monotonic()
        if self._known is None and (self._read_at is None or now - self._read_at >= self.EVERY):
            self._read_at = now
            self._known = self._pull()
        return self._known

    def _pull(self) -> int | None:
        pulled = self.ti.xcom_pull(task_ids=self.task_id, key=self.KEY)
        values = pulled if isinstance(pulled, list) else [pulled]
        positions = [v["position"] for v in values if isinstance(v, dict) and "position" in v]
        return min(positions) if positions else None

    def fail(self, position: int, error: NoetlRuntimeError) -> None:
        from ..errors import fails_task

        tries = getattr(self.ti, "try_number", None)
        retried = isinstance(tries, int) and tries <= self.retries
        if fails_task(error) or not retried:
            self.ti.xcom_push(key=self.KEY, value={"position": position})


def _max_active_tasks() -> int:
    from ..compat import conf

    try:
        return max(1, conf.getint("core", "max_active_tasks_per_dag"))
    except Exception:  # noqa: BLE001 - the documented default when the option cannot be read
        return 16


def _run_concurrently(
    one: Any, items: list, workers: int, step: str, *, stop: bool = False
) -> tuple[list, Any]:
    """``one(position, item)`` for every item on ``workers`` threads -> (records in item order
    of the items that ran, the first failure). Each thread runs in a copy of this task's
    context (the event scope, render issues) with a recording scope of its own, so an
    iteration's nested run names its own calling event as parent. ``stop``: once an item
    failed, no item that has not started yet starts (the engine issues none); those running
    finish."""
    import contextvars
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from ..events import recording

    failed = threading.Event()

    def scoped(position: int, item: Any) -> dict | None:
        if stop and failed.is_set():
            return None  # not started: no event, no record
        try:
            with recording():
                return one(position, item)
        except NoetlRuntimeError:
            failed.set()
            raise

    records, failure = [], None
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"noetl-{step}") as pool:
        futures = [
            pool.submit(contextvars.copy_context().run, scoped, position, item)
            for position, item in enumerate(items)
        ]
        for future in futures:
            try:
                record = future.result()
            except NoetlRuntimeError as exc:
                failure = failure or exc
                continue
            if record is not None:
                records.append(record)
    return records, failure


def _bounded_records(payload: Mapping[str, Any], records: list, total: int) -> list:
    """The records a body instance pushes: the results the loop result will not keep (NoETL
    keeps the last 128, see runtime.loop) are left out and the others compacted as the tail
    would, so a loop's XCom stays about the size of its result whatever its length."""
    from noetl_compile.engine_profiles import profile_for

    from ..runtime.loop import compact_result, retains_result

    if payload["loop"].get("body"):
        return records  # v1 bodies: every body step's result feeds the end step
    profile = profile_for(payload)
    out = []
    for record in records:
        # The tail reads ctx, vars and next with .get(): an empty one is left out (with a
        # result not kept, that was 40% of a 313-item instance's XCom).
        kept = {k: v for k, v in record.items() if k not in _EMPTY_OK or v}
        if retains_result(record["index"], total, profile):
            kept["result"] = compact_result(record["result"], profile)
        else:
            kept["result"] = None
        out.append(kept)
    return out


_EMPTY_OK = frozenset({"ctx", "vars", "next"})


class NoetlLoopTailOperator(CompiledStepOperator):
    """Collects the iterations into the loop step's result and routes (``loop.done``)."""

    loop_group_member = True

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        # The tail closes a loop over `in` and a cursor loop alike: its mode says which.
        step, reads = decoded(payload, reads, "loop tail", cursor=None)
        super().__init__(payload=step, reads=reads, **kwargs)

    @property
    def closes_cursor(self) -> bool:
        """Whether this tail closes a cursor loop (its mapped task: worker slots, not bodies)."""
        return self.payload["loop"].get("mode") == "cursor"

    def collected(self, context: Any) -> tuple[list[dict[str, Any]], list[Any]]:
        """The iteration records of every mapped instance, and the instances' outputs."""
        ti = context["ti"]
        # The mapped task of the group: loop bodies, or a cursor loop's worker slots.
        mapped = "worker" if self.closes_cursor else "body"
        body = ti.xcom_pull(task_ids=self.group_task(mapped), key="return_value")
        # Airflow 3.3 returns every map index's value for a mapped task (None when none ran).
        parts = body if isinstance(body, list) else [body] if body else []
        records = [r for part in parts if isinstance(part, dict) for r in part.get("records", [])]
        return records, parts

    def execute(self, context: Any) -> Any:
        records, parts = self.collected(context)
        inputs = self.pull_inputs(context, self.step)
        with self.recording(context):
            try:
                routed = self.finish_and_route(context, inputs, records)
            except NoetlRuntimeError as exc:
                raise fail_task(self.step, exc) from exc
        if self.closes_cursor:
            self._forget_leases(parts)
        return routed

    def _forget_leases(self, parts: list[Any]) -> None:
        """A cursor loop that ended well no longer needs its leases (drivers/base.py). Only when
        every slot returned: a failed slot may be cleared and run again under the same loop
        start, and its leases still fence it then. Cleanup never fails the loop."""
        from ..drivers import ClaimSpec, open_driver

        specs = [p.get("cursor") for p in parts if isinstance(p, dict) and p.get("cursor")]
        if not specs or len(specs) != len(parts) or parts[0].get("slots") != len(parts):
            return
        try:
            driver = open_driver(ClaimSpec.from_dict(specs[0]))
            try:
                forget = getattr(driver, "forget", None)
                if callable(forget):
                    self.log.info("NoETL cursor %s: %s lease rows deleted", self.step, forget())
            finally:
                driver.close()
        except Exception as exc:  # noqa: BLE001 - housekeeping; the loop's outcome stands
            self.log.warning("NoETL cursor %s: its leases were kept (%s)", self.step, exc)


class NoetlSequentialLoopOperator(CompiledStepOperator):
    """A sequential loop whose iterations write ctx: all iterations inside this one task."""

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        step, reads = decoded(payload, reads, "sequential loop")
        if step.loop is None or step.loop.mode != "sequential":
            raise ValueError(
                f"step {step.name!r}: `loop.mode` must be sequential for NoetlSequentialLoopOperator"
            )
        super().__init__(payload=step, reads=reads, **kwargs)

    def execute(self, context: Any) -> Any:
        from ..runtime.interpreter import interpret
        from ..runtime.loop import loop_event, render_collection, run_iteration

        inputs = self.pull_inputs(context, self.step)
        with self.recording(context):
            try:
                items = render_collection(self.payload, inputs)
                loop_event(
                    self.payload,
                    inputs,
                    names.LOOP_STARTED,
                    "in_progress",
                    data={"total": len(items)},
                )
                running = dict(inputs)

                def one(index: int, item: Any) -> dict:
                    record = run_iteration(
                        self.payload, running, item, index, len(items), run_body=interpret
                    )
                    running["ctx"] = {**running["ctx"], **(record.get("ctx") or {})}
                    running["vars"] = {**running["vars"], **(record.get("vars") or {})}
                    return record

                records, failure = run_items(self.payload, items, one, log=self.log.info)
                if failure is not None:
                    raise failure
                return self.finish_and_route(context, inputs, records)
            except NoetlRuntimeError as exc:
                raise fail_task(self.step, exc) from exc
