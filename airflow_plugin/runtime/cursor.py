"""Cursor-driven loops (``loop.cursor``, seed 002): worker slots that drain a claim.

    head: claim_spec() renders the cursor once per loop start; slot_count() slots start
    slot:  drain(): claim -> bind ``iter.<iterator>`` to the row -> run the step's task chain
           -> repeat until the claim returns no row
    tail:  runtime.loop.finish() over every slot's records: the aggregated result, ``loop.done``

Per item the event log receives one completion event (``LoopIterationCompleted``, alias
``call.done``, carrying the slot, the claimed row, the result and the attempts), not the
per-iteration trail of a ``loop.in`` (iteration start, step start/finish, tool start/finish):
the seed's ~10x fewer events. What is never dropped: errors and template warnings.

An item whose chain fails fails its slot (loudly: the task fails, and so does the loop). The
item stays claimed; the claim statement's stale-claim clause hands it to a later claim. A
slot that is killed mid-item leaves the same state; its task is retried (the operator's
``SLOT_RETRIES``) and drains on, and the item's completion event is written once, by the slot
that finally completes it. The loop result aggregates the records of the slot attempts that
finished: items a killed attempt had completed are done, and each has its completion event,
but they are not in ``results``/``stats``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..drivers import ClaimSpec, CursorDriver, CursorDriverError, driver_class, open_driver
from ..events import names, recording
from ..templating.context import step_context
from ..templating.render import RenderError, render_value, to_jsonable
from .loop import loop_event, max_in_flight
from .step import StepFailed, execute_step

__all__ = ["claim_spec", "drain", "keep_item_event", "run_claimed", "slot_count"]


def _fail(step: str, message: str, kind: str = "CursorError", **extra: Any) -> StepFailed:
    return StepFailed(
        step, {"kind": "cursor", "type": kind, "message": message, "retryable": False, **extra}
    )


def claim_spec(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> ClaimSpec:
    """The cursor with its templates rendered strictly against the execution context (never
    against a row: row values reach the item only through ``iter``)."""
    step = payload["step"]
    cursor = payload["loop"]["cursor"]
    context = step_context(payload, inputs)
    rendered: dict[str, Any] = {}
    for key in ("kind", "auth", "claim", "options"):
        try:
            rendered[key] = render_value(
                cursor.get(key), context, strict=True, field=f"loop.cursor.{key}"
            )
        except RenderError as exc:
            raise _fail(step, f"field loop.cursor.{key}: {exc}", "TemplateError") from exc
    if not isinstance(rendered["claim"], str) or not rendered["claim"].strip():
        raise _fail(step, "loop.cursor.claim rendered to an empty statement")
    options = rendered["options"] or {}
    if not isinstance(options, Mapping):
        raise _fail(step, f"loop.cursor.options must be a mapping, got {options!r:.100}")
    try:
        # An unknown driver fails the loop once, at its start, not once per slot.
        driver_class(str(rendered["kind"]))
    except CursorDriverError as exc:
        raise _fail(step, str(exc), "CursorDriverError") from exc
    return ClaimSpec(
        kind=str(rendered["kind"]),
        claim=rendered["claim"],
        auth=rendered["auth"],
        options=to_jsonable(dict(options)),
        step=step,
    )


def slot_count(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> int:
    """``spec.max_in_flight`` (a number or a template); one slot when it is absent."""
    return max_in_flight(payload, inputs) or 1


def keep_item_event(name: str, status: str) -> bool:
    """What an item's task chain still records: failures and template warnings."""
    return status == "error" or name == names.TEMPLATE_WARNING


def run_claimed(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    row: Mapping[str, Any],
    slot: int,
    sequence: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """One claimed item through the step's task chain -> its record; StepFailed when it fails."""
    step = payload["step"]
    binding = {
        "iterator": payload["loop"]["iterator"],
        "item": dict(row),
        "index": sequence,
        "length": None,  # a cursor has no known length
        "loop_id": step,
    }
    started = time.monotonic()
    entity_id = f"{step}#{slot}.{sequence}"
    try:
        with recording(keep=keep_item_event):
            outcome = execute_step(
                payload, {**inputs, "loop": binding}, sleep=sleep, phase="iteration"
            )
    except StepFailed as exc:
        loop_event(
            payload,
            inputs,
            names.LOOP_ITERATION_COMPLETED,
            "error",
            alias="call.error",
            iteration=sequence,
            entity_id=entity_id,
            duration=time.monotonic() - started,
            data={"slot": slot, "item": row, "error": exc.error},
        )
        raise
    record = {
        "index": [slot, sequence],
        "slot": slot,
        "status": "ok" if outcome.status != "error" else "error",
        "result": outcome.result,
        "ctx": outcome.ctx_writes,
        "vars": outcome.vars_writes,
        "attempts": outcome.attempts,
        "next": outcome.deferred_next,
    }
    loop_event(
        payload,
        inputs,
        names.LOOP_ITERATION_COMPLETED,
        "success" if record["status"] == "ok" else "error",
        alias="call.done",
        iteration=sequence,
        entity_id=entity_id,
        attempt=outcome.attempts,
        duration=time.monotonic() - started,
        data={"slot": slot, "item": row, "result": outcome.result},
    )
    return record


def drain(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    spec: ClaimSpec,
    slot: int,
    *,
    driver: CursorDriver | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dict[str, Any]]:
    """One worker slot: claim and run items until the claim returns no row -> their records."""
    step = payload["step"]
    try:
        handle = driver if driver is not None else open_driver(spec)
    except CursorDriverError as exc:
        raise _fail(step, str(exc), "CursorDriverError", code=exc.code) from exc
    records: list[dict[str, Any]] = []

    def claim() -> Any:
        try:
            return handle.claim()
        except CursorDriverError as exc:
            raise _fail(
                step,
                f"slot {slot}, after {len(records)} item(s): {exc}",
                "CursorClaimError",
                code=exc.code,
            ) from exc

    try:
        while True:
            row = claim()
            if row is None:
                # Confirm once: a claim whose stale-claim clause just gave a dead slot's item
                # back cannot take it in the same statement (its snapshot still sees the item
                # claimed); the next claim can.
                row = claim()
            if row is None:
                return records
            if not isinstance(row, Mapping):
                raise _fail(
                    step,
                    f"cursor driver {spec.kind!r} returned {type(row).__name__}, not a row",
                )
            records.append(run_claimed(payload, inputs, row, slot, len(records), sleep=sleep))
    finally:
        if driver is None:
            handle.close()
