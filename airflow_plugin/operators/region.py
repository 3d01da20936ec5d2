"""``NoetlRegionOperator``: one task for a cyclic region of the step graph (design brief §3).

Routing cycles (pagination, queues, retry arcs) cannot be static Airflow edges, so every
strongly connected component of the step graph becomes one task that interprets the region's
steps with the same step runtime: it starts at the entry steps the upstream tasks routed to,
follows the arcs inside the region until no step is pending, and then skips the exits (tasks
outside the region) no step routed to. The acyclic rest of the playbook stays native Airflow.

Payload: ``{"region", "dialect", "entry": [step], "steps": {step: step payload}, "exits": [task_id]}``.
XCom: ``{"result", "results": {step: last result}, "ctx", "vars", "next"}``; downstream tasks
read a member's result through ``reads["region_results"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import NoetlRuntimeError
from ..runtime.payload import validate_payload
from .base import fail_task
from .loop import CompiledStepOperator, validate_reads

__all__ = ["NoetlRegionOperator", "validate_region"]


def validate_region(payload: Any) -> None:
    if not isinstance(payload, Mapping):
        raise ValueError(f"NoETL region payload must be a dict, got {type(payload).__name__}")  # noqa: TRY004
    name = payload.get("region")
    problems = []
    if not isinstance(name, str) or not name:
        problems.append("`region` must be a non-empty string")
    steps = payload.get("steps")
    if not isinstance(steps, Mapping) or not steps:
        problems.append("`steps` must map member step names to step payloads")
        steps = {}
    for member, step_payload in steps.items():
        validate_payload(step_payload)
        if step_payload.get("step") != member:
            problems.append(
                f"`steps[{member!r}]` holds the payload of step {step_payload.get('step')!r}"
            )
    entry = payload.get("entry")
    if not isinstance(entry, list) or not entry or any(e not in steps for e in entry):
        problems.append("`entry` must list member steps the region starts at")
    exits = payload.get("exits", [])
    if not isinstance(exits, list) or not all(isinstance(t, str) for t in exits):
        problems.append("`exits` must list task ids")
    unknown = sorted(set(payload) - {"region", "dialect", "entry", "steps", "exits"})
    if unknown:
        problems.append(f"unknown key(s) {', '.join(map(str, unknown))}")
    if problems:
        raise ValueError(f"invalid NoETL region payload {name!r}: " + "; ".join(problems))


class NoetlRegionOperator(CompiledStepOperator):
    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        validate_region(payload)
        validate_reads(reads, f"region {payload.get('region')!r}")
        super().__init__(payload=payload, reads=reads, **kwargs)

    @property
    def step(self) -> str:
        return self.payload["region"]

    def execute(self, context: Any) -> Any:
        from ..runtime.interpreter import interpret

        steps = self.payload["steps"]
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
                raise fail_task(getattr(exc, "step", self.step), exc) from exc
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
        if ran.errors:
            output["errors"] = ran.errors  # failed calls that routed on (operators/outcome.py)
        self.log.info("NoETL region %s ran %s; exits: %s", self.step, ran.order, exits)
        chosen = [task_id for _, task_id, _ in ran.exits if task_id is not None]
        return self.push_and_route(context, output, chosen if self.payload.get("exits") else None)
