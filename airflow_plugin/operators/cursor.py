"""Cursor loops (``loop.cursor``, spec-extensions §3) as mapped worker slots.

    head (render the claim and max_in_flight once)  ->  worker.partial(...).expand(slot=head.output)
        ->  tail (operators.loop.NoetlLoopTailOperator: aggregated result, loop.done routing)

``NoetlCursorHeadOperator`` renders the cursor once per loop start and returns one slot
descriptor per worker (``max_in_flight``, at most ``[core] max_map_length``); each
``NoetlCursorWorkerOperator`` instance drains the claim (``runtime.cursor.drain``) until it
returns no row. The slots run wherever the executor puts them (processes of the LocalExecutor,
Celery workers), so they drain concurrently; the claim statement is what keeps an item to one
slot. Drivers are looked up by ``loop.cursor.kind`` (entry-point group ``noetl.cursor_drivers``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..errors import NoetlRuntimeError
from ..events import names
from .base import fail_task, freeze_heap
from .loop import CompiledStepOperator, decoded, max_map_length

__all__ = ["SLOT_RETRIES", "NoetlCursorHeadOperator", "NoetlCursorWorkerOperator"]

# A slot whose process died (a killed worker, a lost node) is retried: draining is a pull loop,
# so a new attempt just claims again, and the item the dead attempt held comes back through the
# claim's stale-claim clause. An item whose task chain fails fails its slot at once
# (AirflowFailException: no retry), so a bad item is never retried behind the playbook's back.
SLOT_RETRIES = 2
SLOT_RETRY_DELAY = timedelta(seconds=5)


class NoetlCursorHeadOperator(CompiledStepOperator):
    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        step, reads = decoded(payload, reads, "cursor head", cursor=True)
        super().__init__(payload=step, reads=reads, **kwargs)

    def execute(self, context: Any) -> Any:
        from ..runtime.cursor import claim_spec, slot_count
        from ..runtime.loop import loop_event

        inputs = self.pull_inputs(context, self.step)
        with self.recording(context):
            try:
                spec = claim_spec(self.payload, inputs)
                wanted = slot_count(self.payload, inputs)
            except NoetlRuntimeError as exc:
                raise fail_task(self.step, exc) from exc
            slots = min(wanted, max_map_length())
            if slots < wanted:
                self.log.warning(
                    "NoETL cursor %s: max_in_flight %d capped at [core] max_map_length %d",
                    self.step,
                    wanted,
                    slots,
                )
            loop_event(
                self.payload,
                inputs,
                names.LOOP_STARTED,
                "in_progress",
                data={"mode": "cursor", "driver": spec.kind, "slots": slots},
            )
        self.log.info("NoETL cursor %s: %d slots on driver %s", self.step, slots, spec.kind)
        return [
            {"slot": number, "slots": slots, "cursor": spec.as_dict(), "args": inputs["args"]}
            for number in range(slots)
        ]


class NoetlCursorWorkerOperator(CompiledStepOperator):
    loop_group_member = True  # its head returns slots, not a step output

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        # Decoded for the DAG import's sake; each mapped instance decodes its own (loop.py).
        decoded(kwargs.get("payload"), kwargs.get("reads"), "cursor worker", cursor=True)
        kwargs.setdefault("retries", SLOT_RETRIES)
        kwargs.setdefault("retry_delay", SLOT_RETRY_DELAY)
        return super().partial(**kwargs)

    def __init__(
        self, *, payload: dict[str, Any], reads: dict[str, Any], slot: Any = None, **kwargs: Any
    ) -> None:
        step, reads = decoded(payload, reads, "cursor worker", cursor=True)
        kwargs.setdefault("retries", SLOT_RETRIES)
        kwargs.setdefault("retry_delay", SLOT_RETRY_DELAY)
        super().__init__(payload=step, reads=reads, **kwargs)
        self.slot = slot

    def execute(self, context: Any) -> Any:
        from ..drivers import ClaimSpec
        from ..runtime import interpreter  # noqa: F401  (registers kind: playbook)
        from ..runtime.cursor import drain

        slot = self.slot if isinstance(self.slot, dict) else {}
        if "cursor" not in slot:
            raise fail_task(
                self.step, ValueError(f"cursor worker got no slot from its head: {slot!r:.200}")
            )
        freeze_heap()
        inputs = self.pull_inputs(context, self.step)
        inputs["args"] = dict(slot.get("args") or {})
        number = int(slot.get("slot", 0))
        with self.recording(context):
            try:
                records = drain(self.payload, inputs, ClaimSpec.from_dict(slot["cursor"]), number)
            except NoetlRuntimeError as exc:
                raise fail_task(self.step, exc) from exc
        lost = getattr(records, "lease_lost", [])
        self.log.info(
            "NoETL cursor %s slot %d drained: %d items, %d lost to another claim (%s)",
            self.step,
            number,
            len(records),
            len(lost),
            getattr(records, "guarantee", ""),
        )
        return {
            "records": list(records),
            "slot": number,
            "slots": slot.get("slots"),
            "cursor": slot["cursor"],  # the tail forgets the loop start's leases with it
            "lease_lost": lost,
            "skipped": getattr(records, "skipped", 0),
        }
