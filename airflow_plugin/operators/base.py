"""What every NoETL task does around the runtime: pull its inputs, record events, push, branch.

``NoetlTask`` is the base of the step, loop, region and nested-playbook operators:

* ``template_fields = ()``: the payload is NoETL Jinja that only the NoETL runtime renders;
* :meth:`pull_inputs`: the workload (DAG params with ``dag_run.conf`` on top) and exactly the
  upstream XComs the compiler listed in ``reads`` (step results, region members' results,
  ctx/vars writes: the last listed task that ran wins, incoming ``args``);
* :meth:`recording`: events of this task are stamped with its Airflow coordinates;
* :meth:`push_and_route`: Airflow's branch machinery skips the direct downstream tasks the step
  did not route to (``BranchMixIn.do_branch``); on that path the task runner does not push the
  return value, so the task pushes it itself;
* :meth:`route_guard` (each NoETL operator's ``pre_execute``): a task the compiler let start
  after a failed upstream (``none_skipped``, a join ``all_done``) runs only where that
  failure's routing chose it (``failure_routes.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.branch import BranchMixIn
from airflow.sdk import BaseOperator

from ..compat import (
    AirflowException,
    AirflowFailException,
    DownstreamTasksSkipped,
    in_process_comms,
)
from ..errors import NoetlRuntimeError, fails_task
from ..templating.ids import catalog_id_for, execution_id_for
from .failure_routes import FAILURE_TOLERANT_RULES, task_states, upstream_verdict
from .lineage import LineageMixin
from .presentation import ToolKindMixin

if TYPE_CHECKING:
    from noetl_compile.engine_profiles import EngineProfile

__all__ = [
    "XCOM_RETURN_KEY",
    "NoetlTask",
    "NoetlTaskMixin",
    "fail_task",
    "failed_step",
    "failure_summary",
    "freeze_heap",
    "is_noetl_output",
    "step_output",
]

XCOM_RETURN_KEY = "return_value"


def is_noetl_output(value: Any) -> bool:
    return isinstance(value, Mapping) and "result" in value


def runs_in_process() -> bool:
    """True under ``dag.test()`` / ``noetlc run``: every task instance runs one after another in
    this process through the in-process Execution API, and no scheduler exists to start other
    DAG runs."""
    comms = in_process_comms()
    if comms is None:
        return False
    from airflow.sdk.execution_time import task_runner

    return isinstance(getattr(task_runner, "SUPERVISOR_COMMS", None), comms)


def freeze_heap() -> None:
    """Before a task runs many items in its own process (a deployed loop body or cursor
    worker): move every object alive now (Airflow, the DAG, the imports) out of the cyclic
    garbage collector's reach (``gc.freeze``). The items allocate and free objects by the
    hundred thousand, and each collection they trigger walked that whole heap again: 10-15% of
    an item's CPU (``bench/loop_item_cost.py``, about what turning the collector off saves).
    Those objects live as long as the process anyway. Not in a process that runs every task
    (``dag.test()``, ``noetlc run``): what one task frees there must stay collectable."""
    if not runs_in_process():
        import gc

        gc.freeze()


def failed_step(log: Any, default: str, exc: NoetlRuntimeError) -> str:
    """The step a runtime error of an interpreted task (a region, a fused run or loop tail) is
    about, its call's traceback logged as the step's own task logs it."""
    step = getattr(exc, "step", None) or default
    error = getattr(exc, "error", None)
    traceback = error.get("traceback") if isinstance(error, Mapping) else None
    if traceback:
        log.error("NoETL step %s tool error:\n%s", step, traceback)
    return step


def failure_summary(error: Any) -> str:
    """``Type: message`` of a step output's ``error`` (what a consumer says of its producer)."""
    if not isinstance(error, Mapping):
        return "its call failed"
    kind, message = error.get("type"), error.get("message")
    text = ": ".join(str(part) for part in (kind, message) if part)
    return text or "its call failed"


def fail_task(step: str, exc: BaseException) -> AirflowException:
    """The task failure for ``exc``; the message names the step once. Operators catch
    ``NoetlRuntimeError`` and hand it here, and ``errors.fails_task`` decides: fail at once
    (``AirflowFailException``, Airflow's retries skipped: NoETL's retries ran inside the step),
    or, for a runtime error that says trying again may succeed (``retryable``), a plain
    ``AirflowException`` that the task's Airflow retries apply to. An exception the operator
    built itself (not a runtime error) fails at once."""
    text = str(exc)
    if not text.startswith(f"step {step!r}"):
        text = f"step {step!r}: {text}"
    if isinstance(exc, NoetlRuntimeError) and not fails_task(exc):
        return AirflowException(text)
    return AirflowFailException(text)


class NoetlTaskMixin(LineageMixin, BranchMixIn):
    """The NoETL helpers, for operators whose base is another Airflow operator (the nested
    playbook operator is a TriggerDagRunOperator); OpenLineage's operator hook (lineage.py)."""

    template_fields = ()
    inherits_from_skipmixin = True

    payload: dict[str, Any]
    reads: dict[str, Any]

    # -- inputs -------------------------------------------------------------------------------

    @property
    def noetl_profile(self) -> EngineProfile:
        """The engine whose request handling applies (``profile_for`` the payload)."""
        # Imported here: a DAG file parse needs no profile (the profiles are ~2 ms to build).
        from noetl_compile.engine_profiles import CANONICAL, profile_for

        payload = getattr(self, "payload", None)
        return profile_for(payload) if isinstance(payload, Mapping) else CANONICAL

    def workload(self, context: Mapping[str, Any]) -> dict[str, Any]:
        # Workload = DAG params (playbook defaults) with the run request (dag_run.conf) on top.
        params = context.get("params") or {}
        dag_run = context.get("dag_run")
        conf = getattr(dag_run, "conf", None) or {}
        # Airflow already laid conf over params (core.dag_run_conf_overrides_params): take the
        # defaults alone, so a payload's `ctx` is merged as NoETL merges it, not kept as a key.
        defaults = {key: params[key] for key in params if key not in conf}
        # Imported here: a DAG file parse imports this module and needs neither (the secrets
        # hooks and connection lookups behind them are 4 ms of each cold parse).
        from ..hooks.redact import mask_secret_values
        from ..templating.context import execution_variables

        workload = execution_variables(defaults, conf, self.noetl_profile)
        # Values under secret-looking keys (`db_password: ...`) are hidden from here on, in the
        # task log and in events, even where a step copies them under another name.
        mask_secret_values(workload)
        return workload

    def execution_id(self, context: Mapping[str, Any]) -> int:
        ti = context["ti"]
        dag_id = getattr(ti, "dag_id", None) or self.dag_id
        run_id = getattr(ti, "run_id", None) or context["run_id"]
        return execution_id_for(dag_id, run_id)

    def outputless_upstreams(self) -> set[str]:
        """Direct upstream tasks whose return value is never a step output (no ``args`` to
        look for): pulling them is an XCom round trip through the API server for nothing."""
        return set()

    def pull_inputs(self, context: Mapping[str, Any], step: str) -> dict[str, Any]:
        ti = context["ti"]
        pulled: dict[str, Any] = {}

        def output_of(task_id: str) -> Mapping[str, Any] | None:
            if task_id not in pulled:
                value = ti.xcom_pull(task_ids=task_id, key=XCOM_RETURN_KEY)
                # Only NoETL outputs count; a skipped task has none (None).
                pulled[task_id] = value if is_noetl_output(value) else None
            return pulled[task_id]

        reads = self.reads or {}
        results: dict[str, Any] = {}
        failed: dict[str, str] = {}
        for name, task_id in (reads.get("results") or {}).items():
            output = output_of(task_id)
            if output is not None:
                results[name] = output.get("result")
                if output.get("status") == "error":
                    # A template reading this step's result that cannot render names it.
                    failed[name] = failure_summary(output.get("error"))
        # A step inside a cyclic region or a v1 loop body ran inside that task: its result is
        # one entry of the task's `results`.
        for name, task_id in (reads.get("region_results") or {}).items():
            output = output_of(task_id)
            inner = output.get("results") if output else None
            if isinstance(inner, Mapping) and name in inner:
                results[name] = inner[name]

        def latest(namespace: str) -> dict[str, Any]:
            values: dict[str, Any] = {}
            for name, task_ids in (reads.get(namespace) or {}).items():
                for task_id in reversed(task_ids):
                    output = output_of(task_id)
                    written = output.get(namespace) if output else None
                    if isinstance(written, Mapping) and name in written:
                        values[name] = written[name]
                        break
            return values

        args: dict[str, Any] = {}
        senders = reads.get("args")
        if senders is None:
            senders = sorted(set(self.upstream_task_ids) - self.outputless_upstreams())
        for task_id in senders:
            output = output_of(task_id)
            sent = (output.get("args") or {}).get(step) if output else None
            if isinstance(sent, Mapping):
                args.update(sent)

        if not self.upstream_task_ids:
            # The entry step: the canonical engine issues its first command with the request
            # payload as args (arcs' args, absent here, would come on top); the profile says.
            from ..templating.context import entry_args

            conf = getattr(context.get("dag_run"), "conf", None) or {}
            args = {**entry_args(conf, self.noetl_profile), **args}
        inputs = {
            "workload": self.workload(context),
            "results": results,
            "ctx": latest("ctx"),
            "vars": latest("vars"),
            "args": args,
            "execution_id": self.execution_id(context),
            "catalog_id": catalog_id_for(self.dag_id),
        }
        if failed:
            inputs["failed_steps"] = failed
        conf = getattr(context.get("dag_run"), "conf", None) or {}
        if "noetl_strict" in conf:
            inputs["strict"] = bool(conf["noetl_strict"])
        return inputs

    def upstream_routes(self, context: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """(step, args) of every step the direct upstream tasks routed to, in upstream order."""
        ti = context["ti"]
        routes: list[tuple[str, dict[str, Any]]] = []
        for task_id in sorted(self.upstream_task_ids):
            output = ti.xcom_pull(task_ids=task_id, key=XCOM_RETURN_KEY)
            if not is_noetl_output(output):
                continue
            for step in output.get("next") or []:
                routes.append((step, dict((output.get("args") or {}).get(step) or {})))
        return routes

    def route_guard(self, context: Any) -> None:
        """Skip this task unless the rule its tolerant trigger rule (``none_skipped``, a join's
        ``all_done``) stands in for would have run it (``failure_routes.upstream_verdict``); a
        task with any other trigger rule was started by Airflow's own rule and goes on. Bound as ``pre_execute``: it runs before ``execute``
        and again before a deferred task resumes (the same answer)."""
        if getattr(self, "trigger_rule", None) not in FAILURE_TOLERANT_RULES:
            return
        ti = context["ti"]
        upstream = sorted(self.upstream_task_ids)
        if not upstream:
            return
        run_id = getattr(ti, "run_id", None) or context["run_id"]
        dag_id = getattr(ti, "dag_id", None) or self.dag_id
        raw = ti.get_task_states(dag_id=dag_id, task_ids=upstream, run_ids=[run_id]) or {}
        states = task_states(raw.get(run_id) or {}, upstream)
        outputs = {
            task_id: ti.xcom_pull(task_ids=task_id, key=XCOM_RETURN_KEY)
            for task_id in upstream
            if any(state in ("failed", "upstream_failed") for state in states.get(task_id, ()))
        }
        run, why = upstream_verdict(self.task_id, upstream, states, outputs, join=len(upstream) > 1)
        if run:
            return
        from ..compat import AirflowSkipException

        raise AirflowSkipException(f"NoETL: {why}")

    # -- events -------------------------------------------------------------------------------

    def recording(self, context: Mapping[str, Any]):
        from ..events import recording
        from ..events.listener import playbook_identity

        ti = context["ti"]
        path, digest = playbook_identity(getattr(self, "dag", None))
        return self._recording_scope(
            recording(
                dag_id=getattr(ti, "dag_id", None) or self.dag_id,
                run_id=getattr(ti, "run_id", None) or context.get("run_id"),
                task_id=self.task_id,
                map_index=getattr(ti, "map_index", None),
                try_number=getattr(ti, "try_number", None),
                playbook_path=path,
                playbook_hash=digest,
            )
        )

    @contextlib.contextmanager
    def _recording_scope(self, events: Any):
        # A task's tool calls run inside `recording`: what they touch is its lineage too.
        with events, self.lineage_scope():
            yield

    # -- output -------------------------------------------------------------------------------

    def push_and_route(
        self, context: Any, output: dict[str, Any], task_ids: list[str] | None
    ) -> dict[str, Any]:
        """Return ``output``; when ``task_ids`` is not None, skip the direct downstream tasks
        not listed (an empty list skips them all: nothing was routed to)."""
        if task_ids is None or set(self.downstream_task_ids) <= set(task_ids):
            # Every direct downstream task was chosen (a chain, a full fan-out): nothing to skip,
            # so no branch decision to record either.
            return output
        try:
            self.do_branch(context, list(task_ids))
        except DownstreamTasksSkipped:
            # The task runner will not push the return value on this path; do it here.
            if self.do_xcom_push:
                context["ti"].xcom_push(XCOM_RETURN_KEY, output)
            raise
        return output


class NoetlTask(ToolKindMixin, BaseOperator, NoetlTaskMixin):
    # ToolKindMixin first: it takes the compiler's `tool_kind` before BaseOperator checks kwargs.
    # Class attributes of BaseOperator come first in the MRO: restate the mixin's.
    template_fields = ()
    inherits_from_skipmixin = True
    ui_color = "#dfe9f7"
    pre_execute = NoetlTaskMixin.route_guard


def step_output(outcome: Any, **extra: Any) -> dict[str, Any]:
    """The XCom of a task that ran a step: ``{result, ctx, vars, next, args, status}`` (+extra);
    a step whose failed call routed on (``status: error``) adds its ``error`` (the outcome task
    names it)."""
    output = {
        "result": outcome.result,
        "ctx": outcome.ctx_writes,
        "vars": outcome.vars_writes,
        "next": outcome.next_steps,
        "args": outcome.next_args,
        "status": outcome.status,
        **extra,
    }
    if outcome.status == "error" and getattr(outcome, "error", None):
        output["error"] = outcome.error
    return output
