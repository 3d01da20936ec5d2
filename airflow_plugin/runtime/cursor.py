"""Cursor-driven loops (``loop.cursor``, seed 002): worker slots that drain a claim.

    head: claim_spec() renders the cursor once per loop start; slot_count() slots start
    slot:  drain(): claim -> bind ``iter.<iterator>`` to the row -> run the step's task chain
           -> repeat until the claim returns no row
    tail:  runtime.loop.finish() over every slot's records: the aggregated result, ``loop.done``

Per item the event log receives one completion event (``LoopIterationCompleted``, alias
``call.done``, carrying the slot, the claimed row, the result and the attempts), not the
per-iteration trail of a ``loop.in`` (iteration start, step start/finish, tool start/finish):
the seed's ~10x fewer events. What is never dropped: errors and template warnings.

Exactly once (a leasing driver: ``drivers.base``; postgres is one): a claim carries a fencing
token (claim id + lease deadline). While the item's chain runs, a heartbeat thread
(``cursor_lease.Heartbeat``) renews the lease; the item completes only while its token still
holds, and for postgres the item's own SQL against the cursor's database commits in the same
transaction as that completion (``hooks/pg_item.py``). A slot that stalls past its lease (stopped,
starved of CPU) finds its renewal or completion refused: the item is stopped, its writes rolled
back, ``CursorLeaseLost`` recorded and the item listed under the slot's ``lease_lost``; the slot
claims on. An item whose slot died is claimed again once its lease expires, and a slot whose
claim is empty waits for leases other slots still hold, so the loop ends with every item done.

An item whose chain fails fails its slot (loudly: the task fails, and so does the loop); its
lease is marked failed (the claim statement's stale-claim clause may hand it out again). With a
driver that takes no leases (at least once) the item stays claimed until that clause hands it
to a later claim. A slot that is killed mid-item is retried by its task (``SLOT_RETRIES``) and
drains on; each item's completion event is written once, by the slot that completes it. The
loop result aggregates the records of the slot attempts that finished: items a killed attempt
had completed are done, and each has its completion event, but they are not in
``results``/``stats``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..drivers import (
    ClaimSpec,
    CursorDriver,
    CursorDriverError,
    Lease,
    driver_class,
    guarantee_of,
    leases,
    open_driver,
)
from ..events import names, recording
from ..templating.context import step_context
from ..templating.render import RenderError, render_value, to_jsonable
from .cursor_lease import Heartbeat
from .loop import iteration_record, loop_event, max_in_flight
from .step import StepFailed, execute_step

__all__ = [
    "SlotReport",
    "claim_spec",
    "drain",
    "keep_item_event",
    "run_claimed",
    "run_leased",
    "slot_count",
]


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
        # One per loop start: a leasing driver keys its leases by it, so an item done in an
        # earlier start of the loop (re-queued on purpose) is claimed again.
        scope=f"{inputs.get('execution_id', 0)}:{step}:{uuid.uuid4().hex[:12]}",
    )


def slot_count(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> int:
    """``spec.max_in_flight`` (a number or a template); one slot when it is absent."""
    return max_in_flight(payload, inputs) or 1


def keep_item_event(name: str, status: str) -> bool:
    """What an item's task chain still records: failures and template warnings."""
    return status == "error" or name == names.TEMPLATE_WARNING


def _binding(payload: Mapping[str, Any], row: Mapping[str, Any], sequence: int) -> dict[str, Any]:
    return {
        "iterator": payload["loop"]["iterator"],
        "item": dict(row),
        "index": sequence,
        "length": None,  # a cursor has no known length
        "loop_id": payload["step"],
    }


def _run_chain(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    row: Mapping[str, Any],
    sequence: int,
    sleep: Callable[[float], None],
) -> Any:
    with recording(keep=keep_item_event):
        return execute_step(
            payload,
            {**inputs, "loop": _binding(payload, row, sequence)},
            sleep=sleep,
            phase="iteration",
        )


def _failed(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    row: Mapping[str, Any],
    slot: int,
    sequence: int,
    started: float,
    exc: StepFailed,
) -> None:
    loop_event(
        payload,
        inputs,
        names.LOOP_ITERATION_COMPLETED,
        "error",
        alias="call.error",
        iteration=sequence,
        entity_id=f"{payload['step']}#{slot}.{sequence}",
        duration=time.monotonic() - started,
        data={"slot": slot, "item": row, "error": exc.error},
    )


def _completed(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    row: Mapping[str, Any],
    slot: int,
    sequence: int,
    started: float,
    outcome: Any,
) -> dict[str, Any]:
    record = {**iteration_record([slot, sequence], outcome, outcome.result), "slot": slot}
    loop_event(
        payload,
        inputs,
        names.LOOP_ITERATION_COMPLETED,
        "success" if record["status"] == "ok" else "error",
        alias="call.done",
        iteration=sequence,
        entity_id=f"{payload['step']}#{slot}.{sequence}",
        attempt=outcome.attempts,
        duration=time.monotonic() - started,
        data={"slot": slot, "item": row, "result": outcome.result},
    )
    return record


def run_claimed(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    row: Mapping[str, Any],
    slot: int,
    sequence: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """One claimed item (a driver without leases) through the step's task chain -> its record;
    StepFailed when it fails."""
    started = time.monotonic()
    try:
        outcome = _run_chain(payload, inputs, row, sequence, sleep)
    except StepFailed as exc:
        _failed(payload, inputs, row, slot, sequence, started, exc)
        raise
    return _completed(payload, inputs, row, slot, sequence, started, outcome)


def run_leased(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    handle: Any,
    lease: Lease,
    slot: int,
    sequence: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """One item under a lease -> its record, or ``{"lease_lost": ...}`` when another claim took
    the item meanwhile (the item was stopped; its writes in the cursor's database rolled back,
    its completion refused and recorded). StepFailed when its chain fails while the lease holds.
    """
    step = payload["step"]
    row = lease.row
    started = time.monotonic()
    failed: StepFailed | None = None
    outcome = None
    with handle.item(lease) as work:
        with Heartbeat(handle, lease, name=f"noetl-cursor-{step}-{slot}") as beat:
            try:
                outcome = _run_chain(payload, inputs, row, sequence, sleep)
            except StepFailed as exc:
                failed = exc
        lost = beat.lost
        if failed is None and lost is None:
            try:
                if work.complete():
                    return _completed(payload, inputs, row, slot, sequence, started, outcome)
            except CursorDriverError as exc:
                raise _fail(
                    step, f"slot {slot}: {exc}", "CursorCompletionError", code=exc.code
                ) from exc
            lost = "the completion was refused: another claim holds the item"
        elif failed is not None and lost is None and not _still_held(handle, lease):
            lost = "the item failed after another claim took it over"
        if lost is None and failed is not None:  # not lost: the chain failed while held
            work.fail()
            _failed(payload, inputs, row, slot, sequence, started, failed)
            raise failed
    lost_record = {
        "slot": slot,
        "item": dict(row),
        "key": lease.key,
        "claims": lease.claims,
        "reason": lost,
    }
    loop_event(
        payload,
        inputs,
        names.CURSOR_LEASE_LOST,
        "error",
        iteration=sequence,
        entity_id=f"{step}#{slot}.{sequence}",
        duration=time.monotonic() - started,
        data=lost_record,
    )
    return {"lease_lost": lost_record}


def _still_held(handle: Any, lease: Lease) -> bool:
    try:
        return bool(handle.renew(lease))
    except CursorDriverError:
        return True  # cannot tell: the failure is the item's, reported as such


class SlotReport(list[dict[str, Any]]):
    """A slot's records (a list, what ``drain`` always returned) plus what the slot lost:
    ``lease_lost`` (items another claim took over), ``guarantee`` (the driver's), ``skipped``."""

    lease_lost: list[dict[str, Any]]
    guarantee: str
    skipped: int = 0  # claims that returned an item another claim held (not run)


def drain(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    spec: ClaimSpec,
    slot: int,
    *,
    driver: CursorDriver | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> SlotReport:
    """One worker slot: claim and run items until the claim returns no row -> their records.

    With a leasing driver the slot also waits, once the claim is empty, for leases other slots
    still hold: an item whose slot stalled or died is claimed again when its lease expires, so
    the loop ends only when every item is done (or failed)."""
    step = payload["step"]
    try:
        handle = driver if driver is not None else open_driver(spec)
    except CursorDriverError as exc:
        raise _fail(step, str(exc), "CursorDriverError", code=exc.code) from exc
    records = SlotReport()
    records.lease_lost = []
    records.guarantee = guarantee_of(handle)
    leasing = leases(handle)
    claimed = 0

    def claim() -> Any:
        try:
            if leasing:
                # A leasing driver (``leases(handle)``) has claim_lease beside the protocol's.
                return getattr(handle, "claim_lease")(slot)  # noqa: B009
            return handle.claim()
        except CursorDriverError as exc:
            raise _fail(
                step,
                f"slot {slot}, after {len(records)} item(s): {exc}",
                "CursorClaimError",
                code=exc.code,
            ) from exc

    def held_wait() -> float | None:
        wait_for = getattr(handle, "held_wait", None)  # optional in the leasing contract
        if not leasing or wait_for is None:
            return None
        try:
            wait: float | None = wait_for()
            return wait
        except CursorDriverError as exc:
            raise _fail(step, f"slot {slot}: {exc}", "CursorClaimError", code=exc.code) from exc

    try:
        while True:
            got = claim()
            if got is None:
                # Confirm once: a claim whose stale-claim clause just gave a dead slot's item
                # back cannot take it in the same statement (its snapshot still sees the item
                # claimed); the next claim can.
                got = claim()
            while got is None:
                wait = held_wait()
                if wait is None:
                    records.skipped = getattr(handle, "skipped", 0)
                    return records
                sleep(min(max(wait, 0.05), 1.0))
                got = claim()
            if leasing:
                done = run_leased(payload, inputs, handle, got, slot, claimed, sleep=sleep)
                if "lease_lost" in done:
                    records.lease_lost.append(done["lease_lost"])
                else:
                    records.append(done)
            else:
                if not isinstance(got, Mapping):
                    raise _fail(
                        step,
                        f"cursor driver {spec.kind!r} returned {type(got).__name__}, not a row",
                    )
                records.append(run_claimed(payload, inputs, got, slot, claimed, sleep=sleep))
            claimed += 1
    finally:
        if driver is None:
            handle.close()
