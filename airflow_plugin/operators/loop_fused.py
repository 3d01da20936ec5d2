"""A fused loop's head and tail (``noetlc compile --fuse``; ``noetl_compile/lower/fuse.py``
``loop_folds``): the loop's task group also runs the plain steps around it.

    head (lead steps, then the collection)  ->  mapped body  ->  tail (collect, then the trail)

On a deployed Airflow every level of a DAG costs a scheduling round whatever its task does, so
the unfused ``start -> head -> body -> tail -> total`` of a loop takes two rounds more than the
DAG a person writes for the same work (a task making the batches, the mapped work, a task
summing up). Fused, the loop has those three levels:

* ``NoetlFusedLoopHeadOperator`` runs its *lead* first: the entry step when it is a bare
  ``noop`` routing only to the loop (it cannot fail and renders nothing; what it does is its
  events, recorded here as its own task would have); then it is the loop's head;
* ``NoetlFusedLoopTailOperator`` collects the loop as the tail does, then runs its *trail*, the
  chain of plain steps after the loop, with the step runtime a fused run uses
  (``runtime.interpreter``), starting at the steps the loop routed to. Its XCom holds the loop
  step's and each trail step's result by name (``results``; downstream tasks read them through
  ``reads["region_results"]``), and it skips the exits no step routed to.

Each step still records its own events, and ``noetlc status``, the run report and the NoETL view
show steps; the Airflow graph shows the loop's group only. A trail step whose call fails fails
the tail's task (red, its traceback in the log); a Clear runs the tail again, which collects
the loop again from the body instances' XComs.
"""

from __future__ import annotations

from typing import Any

from noetl_compile.step_decode import decode_fused_loop
from noetl_compile.step_model import PayloadError

from ..errors import NoetlRuntimeError
from .base import fail_task, failed_step, step_output
from .loop import NoetlLoopHeadOperator, NoetlLoopTailOperator

__all__ = ["NoetlFusedLoopHeadOperator", "NoetlFusedLoopTailOperator"]


class NoetlFusedLoopHeadOperator(NoetlLoopHeadOperator):
    """Runs the lead steps, then renders ``loop.in`` and returns the body's chunks."""

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        lead, _ = decode_fused_loop(payload)
        super().__init__(payload=payload, reads=reads, **kwargs)
        if not lead:
            raise PayloadError(
                f"invalid fused loop payload for step {self.step!r}",
                [("lead", "must list the step payloads the head runs before the loop")],
            )
        self.lead = lead

    def execute(self, context: Any) -> Any:
        from ..runtime.step import execute_step

        inputs = self.pull_inputs(context, self.step)
        # The lead's first step is the entry: it takes the run's entry args, as its own task
        # would; each next one, what the routing handed it.
        args = dict(inputs.get("args") or {})
        with self.recording(context):
            for number, step in enumerate(self.lead):
                try:
                    outcome = execute_step(step, {**inputs, "args": args})
                except NoetlRuntimeError as exc:
                    raise fail_task(step.name, exc) from exc
                following = self.lead[number + 1].name if number + 1 < len(self.lead) else self.step
                if following not in outcome.next_steps:
                    raise fail_task(
                        step.name,
                        RuntimeError(
                            f"routed to {outcome.next_steps or 'no step'}, not to {following!r} "
                            "(a fused loop's lead routes only to the next step)"
                        ),
                    )
                args = dict((outcome.next_args or {}).get(following) or {})
                self.log.info(
                    "NoETL step %s finished (%s); next: %s",
                    step.name,
                    outcome.status,
                    outcome.next_steps,
                )
        return self.chunks(context, {**inputs, "args": args})


class NoetlFusedLoopTailOperator(NoetlLoopTailOperator):
    """Collects the iterations into the loop step's result, then runs the trail."""

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        _, trail = decode_fused_loop(payload)
        super().__init__(payload=payload, reads=reads, **kwargs)
        if trail is None:
            raise PayloadError(
                f"invalid fused loop payload for step {self.step!r}",
                [("trail", "must be the region payload the tail runs after the loop")],
            )
        self.trail = trail

    def execute(self, context: Any) -> Any:
        from ..runtime.interpreter import interpret
        from ..runtime.loop import finish

        records, _ = self.collected(context)
        inputs = self.pull_inputs(context, self.step)
        members = self.trail.steps
        with self.recording(context):
            try:
                outcome, extra = finish(self.payload, inputs, records)
            except NoetlRuntimeError as exc:
                raise fail_task(self.step, exc) from exc
            loop_output = step_output(outcome)
            results = {**extra, self.step: outcome.result}
            entries = [
                (step, dict((outcome.next_args or {}).get(step) or {}))
                for step in outcome.next_steps
                if step in members
            ]
            # The loop's own targets outside the trail (none where the compiler folded: the
            # loop routes only to the trail's first step; kept should a case rule name more).
            chosen = [t for t in outcome.next_task_ids if t]
            self.log.info(
                "NoETL loop %s finished: %s; next: %s",
                self.step,
                outcome.result.get("stats") if isinstance(outcome.result, dict) else None,
                outcome.next_steps,
            )
            if not entries:
                output = {**loop_output, "results": results}
                return self.push_and_route(context, output, self._targets(chosen))
            base = {
                **inputs,
                "results": {**(inputs.get("results") or {}), **results},
                "ctx": {**(inputs.get("ctx") or {}), **outcome.ctx_writes},
                "vars": {**(inputs.get("vars") or {}), **outcome.vars_writes},
            }
            base.pop("args", None)
            try:
                ran = interpret(members, entries, base)
            except NoetlRuntimeError as exc:
                raise fail_task(failed_step(self.log, self.step, exc), exc) from exc
        if ran.errors:
            # The compiler folds no step whose routing may take a failure; one that did anyway
            # (a payload written by hand) fails the task, never passes as a success.
            member, error = next(iter(ran.errors.items()))
            raise fail_task(member, RuntimeError(f"its call failed: {error}"))
        exits = [target for target, _, _ in ran.exits]
        output = {
            # The task's own step is the loop's: readers of the trail find it in `results`.
            "result": outcome.result,
            "results": {**results, **ran.results},
            "ctx": {**outcome.ctx_writes, **ran.ctx},
            "vars": {**outcome.vars_writes, **ran.vars},
            "next": exits,
            "args": {target: args for target, _, args in ran.exits if args},
            "status": "ok",
            "order": [self.step, *ran.order],
        }
        chosen += [task_id for _, task_id, _ in ran.exits if task_id is not None]
        self.log.info("NoETL loop %s: its trail ran %s; exits: %s", self.step, ran.order, exits)
        return self.push_and_route(context, output, self._targets(chosen))

    def _targets(self, chosen: list[str]) -> list[str] | None:
        """The tasks to keep downstream; None where nothing downstream is a step's target
        (a trail ending in a leaf: the outcome task after it is no branch to skip)."""
        from ..runtime.step import routing_targets

        if self.trail.exits or any(routing_targets(self.payload)):
            return chosen
        return None
