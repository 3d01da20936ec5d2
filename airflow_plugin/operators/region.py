"""``NoetlRegionOperator``: one task for a cyclic region of the step graph (design brief §3).

Routing cycles (pagination, queues, retry arcs) cannot be static Airflow edges, so every
strongly connected component of the step graph becomes one task that interprets the region's
steps with the same step runtime: it starts at the entry steps the upstream tasks routed to,
follows the arcs inside the region until no step is pending, and then skips the exits (tasks
outside the region) no step routed to. The acyclic rest of the playbook stays native Airflow.

Payload: ``{"region", "dialect", "entry": [step], "steps": {step: step payload}, "exits": [task_id]}``.
XCom: ``{"result", "results": {step: last result}, "ctx", "vars", "next"}``; downstream tasks
read a member's result through ``reads["region_results"]``. A member whose call failed while
the routing took the failure fails the region's task once the region has finished (red, the
member's traceback in the log), as a plain step's handled failure does (``failure_routes``).
"""

from __future__ import annotations

from typing import Any

from noetl_compile.step_decode import decode_reads, decode_region
from noetl_compile.step_model import Region

from ..compat import AirflowFailException
from ..errors import NoetlRuntimeError
from .base import XCOM_RETURN_KEY, fail_task, failed_step, failure_summary
from .failure_routes import ROUTED_TO, routes_by_trigger_rules
from .loop import CompiledStepOperator

__all__ = ["NoetlRegionOperator"]


class NoetlRegionOperator(CompiledStepOperator):
    def __init__(self, *, payload: Any, reads: Any, **kwargs: Any) -> None:
        # The region's one decode: its member steps reach the interpreter as typed steps.
        region: Region = decode_region(payload)
        table = dict(decode_reads(reads, f"region {region.name!r}", args=False).mapping)
        super().__init__(payload=payload, reads=table, **kwargs)
        self.region = region

    @property
    def step(self) -> str:
        return self.payload["region"]

    def execute(self, context: Any) -> Any:
        from ..runtime.interpreter import interpret

        steps = self.region.steps
        entries = [(s, a) for s, a in self.upstream_routes(context) if s in steps]
        if not entries and not self.upstream_task_ids:
            entries = [(s, {}) for s in self.payload["entry"]]
        if not entries:
            entries = [(s, {}) for s in self.payload["entry"]]
            self.log.warning(
                "NoETL region %s: no upstream output names an entry step; starting at %s",
                self.step,
                self.payload["entry"],
            )
        base = self.pull_inputs(context, entries[0][0])
        base.pop("args", None)
        with self.recording(context):
            try:
                ran = interpret(steps, entries, base)
            except NoetlRuntimeError as exc:
                raise fail_task(failed_step(self.log, self.step, exc), exc) from exc
        exits = [target for target, _, _ in ran.exits]
        output = {
            "result": ran.last_result,
            "results": ran.results,
            "ctx": ran.ctx,
            "vars": ran.vars,
            "next": exits,
            "args": {target: args for target, _, args in ran.exits if args},
            "status": "error" if ran.errors else "ok",
            "order": ran.order,
            "attempts": ran.attempts,
        }
        chosen = [task_id for _, task_id, _ in ran.exits if task_id is not None]
        if ran.errors:
            output["errors"] = ran.errors  # failed calls that routed on (operators/outcome.py)
            if routes_by_trigger_rules(self):
                return self.fail_routed(context, output, ran, chosen)
        self.log.info("NoETL region %s ran %s; exits: %s", self.step, ran.order, exits)
        return self.push_and_route(context, output, chosen if self.payload.get("exits") else None)

    def fail_routed(self, context: Any, output: dict, ran: Any, chosen: list[str]) -> Any:
        """A member's call failed and the routing took the failure: the region ran to its end;
        now its task fails as a plain step's handled failure does (red, each failed member's
        traceback in the log, Airflow's callbacks), after pushing the output with the first
        failure as its ``error`` and ``routed_to`` (the exits taken), so the tasks after it run
        by their trigger rules and the outcome task counts the failure as handled."""
        for member, error in ran.errors.items():
            error = error or {}
            self.log.error(
                "NoETL region %s: the call of member %s failed (%s); the routing took the "
                "failure%s",
                self.step,
                member,
                failure_summary(error),
                f":\n{error['traceback']}" if error.get("traceback") else "",
            )
        member, error = next(iter(ran.errors.items()))
        output = {**output, "error": error, ROUTED_TO: chosen}
        if self.do_xcom_push:
            context["ti"].xcom_push(XCOM_RETURN_KEY, output)
        exits = [target for target, _, _ in ran.exits]
        raise AirflowFailException(
            f"region {self.step!r}: step {member!r}: {failure_summary(error)} (the routing took "
            f"the failure; the region ran {len(ran.order)} step(s) and goes on to "
            f"{', '.join(exits) or 'no step'})"
        )
