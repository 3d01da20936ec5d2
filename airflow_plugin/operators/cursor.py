"""Cursor loops (``loop.cursor``, spec-extensions §3) as mapped worker slots.

    head (render the claim and max_in_flight once)  ->  worker.partial(...).expand(slot=head.output)
        ->  tail (operators.loop.NoetlLoopTailOperator: loop.done routing)

``NoetlCursorHeadOperator`` returns ``max_in_flight`` slot descriptors (at most
``[core] max_map_length``); each ``NoetlCursorWorkerOperator`` instance repeats claim -> bind
``iter.<iterator>`` -> run the step's task chain until the claim returns no row. Drivers are
looked up by ``loop.cursor.kind`` (entry-point group ``noetl.cursor_drivers``).
"""

from __future__ import annotations

from typing import Any

from .loop import _CompiledStepOperator, not_built, validate_loop, validate_reads

__all__ = ["NoetlCursorHeadOperator", "NoetlCursorWorkerOperator"]


class NoetlCursorHeadOperator(_CompiledStepOperator):
    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        validate_loop(payload, cursor=True)
        validate_reads(reads, f"cursor head of step {payload.get('step')!r}")
        super().__init__(payload=payload, reads=reads, **kwargs)

    def execute(self, context: Any) -> Any:
        raise not_built(self, "rendering the cursor claim and starting worker slots")


class NoetlCursorWorkerOperator(_CompiledStepOperator):
    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        payload = kwargs.get("payload")
        validate_loop(payload, cursor=True)
        validate_reads(kwargs.get("reads"), f"cursor worker of step {payload.get('step')!r}")
        return super().partial(**kwargs)

    def __init__(
        self, *, payload: dict[str, Any], reads: dict[str, Any], slot: Any = None, **kwargs: Any
    ) -> None:
        validate_loop(payload, cursor=True)
        validate_reads(reads, f"cursor worker of step {payload.get('step')!r}")
        super().__init__(payload=payload, reads=reads, **kwargs)
        self.slot = slot

    def execute(self, context: Any) -> Any:
        raise not_built(self, "draining a cursor claim")
