"""Loops (``loop.in``): the collection, one iteration, the aggregated result, the loop's end.

The same functions serve every shape the compiler gives a loop: the mapped task group (head
renders and chunks, each body instance runs its chunk's iterations, the tail aggregates and
routes), the sequential loop that writes ctx (one task, :func:`run_loop`), and loops inside
regions or inline children (:func:`run_loop` from the interpreter).

* The collection is ``loop.in`` rendered strictly (NoETL's engine renders it with undefined as an
  error): a template that cannot be rendered fails the step, naming it. A value that is not a
  list is normalised per dialect (:func:`_as_list`). v1 ``filter`` (an iterator's ``where``)
  keeps the items for which it is true, v1 ``order_by`` sorts them by its value (stable),
  then v1 ``limit`` keeps the first that many.
* An iteration binds ``iter.<iterator>``, the bare iterator, ``loop_index`` and ``loop``; case
  rules of ``call.*`` run per iteration, routing waits for the end.
* A v1 loop runs its body steps per item (routed from the loop step's own ``next``, closed by the
  ``end_loop`` step); an iteration's result is ``{body step: result}``, and the end step's
  ``result`` mapping is rendered once at the end with ``<loop>_results`` (the list of iteration
  results), published as the end step's result and merged into the loop step's result.
* The loop result is NoETL's ``{results, stats: {total, success, failed},
  omitted_results_count}`` with results in collection order (case-v2: without
  ``omitted_results_count``, as that dialect's engine). Canonical loops keep NoETL's bounds
  (138c10ed's engine): the last ``NOETL_LOOP_RESULT_MAX_ITEMS`` (128) iteration results, the
  older ones counted in ``omitted_results_count``, and an iteration result larger than
  ``NOETL_LOOP_RESULT_MAX_BYTES`` (65536) of JSON kept as NoETL's preview
  ``{_truncated, _original_size_bytes, _type, _preview}``. Those bounds also keep the loop's XCom
  small: a body instance drops the results the tail will not keep (:func:`retains_result`).
  NoETL stores each kept item as a result-store reference record; noetlc keeps the result itself
  (docs/semantics.md section 1).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from noetl_compile.engine_profiles import CANONICAL, EngineProfile, profile_for

from ..events import Event, emit, names
from ..templating.context import loop_variables, step_context, with_loop
from ..templating.proxy import promoted
from ..templating.render import RenderError, evaluate_condition, render_value, to_jsonable
from .loop_items import run_items
from .payload import as_step
from .step import StepFailed, StepOutcome, complete_step, execute_step

# How a v1 loop body (a set of steps with its own routing) runs: the interpreter's `interpret`,
# handed down by whoever runs the loop (the interpreter itself, the loop operator), so this
# floor never imports the interpreter that runs it.
BodyRunner = Callable[..., Any]

__all__ = [
    "aggregate",
    "chunk",
    "compact_result",
    "finish",
    "guard_holds",
    "iteration_record",
    "loop_event",
    "max_in_flight",
    "render_collection",
    "retains_result",
    "run_iteration",
    "run_loop",
]


def _fail(step: str, message: str, kind: str = "LoopError") -> StepFailed:
    return StepFailed(step, {"kind": "loop", "type": kind, "message": message, "retryable": False})


def guard_holds(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> bool:
    """NoETL 5's local step `when` on a loop step (noetl/cli: evaluated before the step runs):
    false, and the loop does not start and its branch ends. Evaluated once by the loop's head,
    as a plain step's guard is (a guard that cannot be evaluated is false and noted)."""
    guard = payload.get("guard")
    if guard is None:
        return True
    return evaluate_condition(guard, step_context(payload, inputs), flavor="arc", field="when")


def render_collection(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> list[Any]:
    """The items of ``loop.in`` (after ``filter``), or StepFailed naming the step and template."""
    step, loop = payload["step"], payload["loop"]
    context = step_context(payload, inputs)
    try:
        items = render_value(loop.get("in"), context, strict=True, field="loop.in")
    except RenderError as exc:
        raise _fail(step, f"field loop.in: {exc}", "TemplateError") from exc
    items = _as_list(step, items, profile_for(payload))
    condition = loop.get("filter")
    if condition is not None:
        kept = []
        for index, item in enumerate(items):
            bound = with_loop(
                context,
                iterator=loop["iterator"],
                item=item,
                index=index,
                length=len(items),
                profile=profile_for(payload),
            )
            if evaluate_condition(condition, bound, flavor="arc", field="loop.filter"):
                kept.append(item)
        items = kept
    if loop.get("order_by") is not None:  # v1 iterator: sorted by the key, stable
        items = _ordered(step, loop, items, context)
    if loop.get("limit") is not None:  # v1: the first `limit` items after filter and order
        items = items[: _limit(step, loop["limit"], context)]
    collection: list[Any] = to_jsonable(items)
    return collection


def _ordered(step: str, loop: Mapping[str, Any], items: list[Any], context: Any) -> list[Any]:
    """NoETL's v1 ``order_by``: each item's key rendered with the iterator bound, a stable sort.
    NoETL keeps the original order when keys cannot be compared; that fails here, naming them."""
    keys = []
    for index, item in enumerate(items):
        bound = with_loop(
            context,
            iterator=loop["iterator"],
            item=item,
            index=index,
            length=len(items),
        )
        try:
            keys.append(render_value(loop["order_by"], bound, strict=True, field="loop.order_by"))
        except RenderError as exc:
            raise _fail(step, f"field loop.order_by: {exc}", "TemplateError") from exc
    try:
        order = sorted(range(len(items)), key=lambda i: keys[i])
    except TypeError as exc:
        raise _fail(step, f"loop.order_by keys cannot be compared ({exc}): {keys!r:.200}") from exc
    return [items[i] for i in order]


def _limit(step: str, value: Any, context: Mapping[str, Any]) -> int:
    try:
        value = render_value(value, context, strict=True, field="loop.limit")
        limit = int(value)
    except (RenderError, TypeError, ValueError) as exc:
        raise _fail(
            step, f"loop.limit must be a non-negative integer, got {value!r}: {exc}"
        ) from exc
    if limit < 0:
        raise _fail(step, f"loop.limit must be a non-negative integer, got {limit}")
    return limit


def _as_list(step: str, items: Any, profile: EngineProfile) -> list[Any]:
    """A rendered ``loop.in`` as the list of items, the way the profile's engine normalises a
    value that is not a list (recorded: tests/differential/cases/loops/non_list_*,
    case_v2/loop_string_in). None is no item and a mapping one item in every engine; a string
    and a scalar follow ``profile.loop_string_items`` / ``loop_scalar_items``: one item
    (canonical: JSON list text and CSV are never split or parsed), ``characters`` (case-v2 ran
    ``list(value)``) or ``error`` (the step fails, naming the value).
    """
    if items is None:
        return []
    if isinstance(items, list):
        return items
    if isinstance(items, (tuple, set)):
        return list(items)
    if isinstance(items, Mapping):
        return [items]  # one object: one iteration (NoETL wraps a single item)
    shape = profile.loop_string_items if isinstance(items, str) else profile.loop_scalar_items
    if shape == "characters":
        return list(items)
    if shape == "one item":
        return [items]
    raise _fail(step, f"loop.in must render to a list, got {type(items).__name__}: {items!r:.200}")


def max_in_flight(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> int | None:
    """``loop.max_in_flight`` as a number (a template is rendered), None when unbounded."""
    limit = payload["loop"].get("max_in_flight")
    if isinstance(limit, str):
        try:
            limit = render_value(
                limit, step_context(payload, inputs), strict=True, field="loop.max_in_flight"
            )
        except RenderError as exc:
            raise _fail(
                payload["step"], f"field loop.max_in_flight: {exc}", "TemplateError"
            ) from exc
    if limit is None:
        return None
    try:
        value = int(limit)
    except (TypeError, ValueError):
        raise _fail(
            payload["step"], f"loop.max_in_flight must be a positive integer, got {limit!r}"
        ) from None
    if value < 1:
        raise _fail(payload["step"], f"loop.max_in_flight must be a positive integer, got {value}")
    return value


def chunk(items: Sequence[Any], max_chunks: int) -> list[dict[str, Any]]:
    """Split ``items`` into at most ``max_chunks`` contiguous chunks ``{offset, items}``: one item
    per chunk while they fit, so small loops map one instance per item."""
    if not items:
        return []
    count = min(len(items), max(1, max_chunks))
    size, extra = divmod(len(items), count)
    chunks, offset = [], 0
    for number in range(count):
        length = size + (1 if number < extra else 0)
        chunks.append({"offset": offset, "items": list(items[offset : offset + length])})
        offset += length
    return chunks


def loop_event(
    payload: Mapping[str, Any], inputs: Mapping[str, Any], name: str, status: str, **fields: Any
) -> None:
    step = payload["step"]
    emit(
        Event(
            name=name,
            entity="loop",
            entity_id=fields.pop("entity_id", step),
            status=status,
            execution_id=str(inputs.get("execution_id", 0)),
            step=step,
            loop_id=step,
            data=to_jsonable(fields.pop("data", {})),
            **fields,
        )
    )


def iteration_record(index: Any, outcome: StepOutcome, result: Any) -> dict[str, Any]:
    """What the loop's tail collects of one iteration (a collection item's, or a cursor item's
    with ``index`` [slot, sequence]): its status, result and the writes the tail merges."""
    return {
        "index": index,
        "status": "ok" if outcome.status != "error" else "error",
        "result": result,
        "ctx": outcome.ctx_writes,
        "vars": outcome.vars_writes,
        "attempts": outcome.attempts,
        "next": outcome.deferred_next,
    }


def run_iteration(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    item: Any,
    index: int,
    length: int,
    *,
    sleep: Callable[[float], None] = time.sleep,
    run_body: BodyRunner | None = None,
) -> dict[str, Any]:
    """Run one iteration -> ``{index, status, result, ctx, vars, attempts}``; an unhandled failure
    raises StepFailed (the loop fails: its task, and the run, fail loudly)."""
    loop = payload["loop"]
    binding = {
        "iterator": loop["iterator"],
        "item": item,
        "index": index,
        "length": length,
        "loop_id": payload["step"],
    }
    loop_event(
        payload,
        inputs,
        names.LOOP_ITERATION_STARTED,
        "in_progress",
        iteration=index,
        entity_id=f"{payload['step']}#{index}",
    )
    started = time.monotonic()
    try:
        if loop.get("body"):
            record = _run_v1_body(payload, inputs, binding, sleep, run_body)
        else:
            outcome = execute_step(
                payload, {**inputs, "loop": binding}, sleep=sleep, phase="iteration"
            )
            # An iteration that ran a tool pipeline keeps NoETL's record with the last task's
            # result promoted under it ({**last, **record}), as NoETL's engine stores each
            # iteration's call.done: `r.shout` of `{{ loop.results }}` reads the last task's
            # field, as it would for a single tool.
            result = outcome.result
            if isinstance(result, Mapping) and profile_for(payload).pipeline_last_task_promoted:
                result = promoted(result)
            record = iteration_record(index, outcome, result)
    except StepFailed as exc:
        loop_event(
            payload,
            inputs,
            names.LOOP_ITERATION_COMPLETED,
            "error",
            iteration=index,
            entity_id=f"{payload['step']}#{index}",
            duration=time.monotonic() - started,
            data={"error": exc.error},
        )
        raise
    loop_event(
        payload,
        inputs,
        names.LOOP_ITERATION_COMPLETED,
        "success" if record["status"] == "ok" else "error",
        iteration=index,
        entity_id=f"{payload['step']}#{index}",
        duration=time.monotonic() - started,
        data={"result": record["result"]},
    )
    return record


def _run_v1_body(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    binding: dict[str, Any],
    sleep: Callable[[float], None],
    interpret: BodyRunner | None,
) -> dict[str, Any]:
    if interpret is None:
        raise _fail(
            payload["step"], "a v1 loop body runs through the interpreter: pass run_body", "BUG"
        )
    body = payload["loop"]["body"]
    # The loop step's own ``next`` routes into the body: evaluate it with the item bound.
    router = {
        "step": payload["step"],
        "dialect": payload.get("dialect"),
        "routing": body.get("routing"),
    }
    entry = execute_step(router, {**inputs, "loop": binding}, sleep=sleep)
    # The body's steps as the operator decoded them (a plain payload is decoded here, once).
    spec = as_step(payload)
    members = spec.loop.body if spec.loop is not None and spec.loop.body is not None else {}
    ran = interpret(
        members,
        [(step, entry.next_args.get(step, {})) for step in entry.next_steps if step in members],
        {**inputs, "loop": binding},
        sleep=sleep,
    )
    return {
        "index": binding["index"],
        "status": "ok",
        "result": ran.results,
        "ctx": ran.ctx,
        "vars": ran.vars,
        "attempts": sum(ran.attempts.values()),
    }


def _env_int(name: str, default: int, floor: int) -> int:
    try:
        return max(floor, int(os.environ.get(name, default)))
    except ValueError:
        return default


def result_limits() -> tuple[int, int]:
    """(items kept, bytes per item) of a canonical loop's result: NoETL's engine settings
    ``NOETL_LOOP_RESULT_MAX_ITEMS`` (128, at least 1) and ``NOETL_LOOP_RESULT_MAX_BYTES`` (65536;
    0 keeps every result whole), read from the same variables so a migrating deployment's
    tuning carries over."""
    return (
        _env_int("NOETL_LOOP_RESULT_MAX_ITEMS", 128, 1),
        _env_int("NOETL_LOOP_RESULT_MAX_BYTES", 65536, 0),
    )


def retains_result(index: int, total: int, profile: EngineProfile) -> bool:
    """Whether iteration ``index`` of ``total`` is among the results the loop result keeps
    (``profile.loop_results_capped``: 138c10ed bounds them; dc55c492 keeps every result, and
    v1's ``<loop>_results`` feed its end step whole)."""
    return not profile.loop_results_capped or index >= total - result_limits()[0]


_PREVIEW_KEYS, _PREVIEW_ITEMS = 8, 3


def _preview(value: Any, depth: int = 0) -> Any:
    """NoETL's preview of a large iteration result: 8 keys / 3 items per level, two levels."""
    if isinstance(value, Mapping):
        if depth >= 2:
            return f"dict({len(value)} keys)"
        items = list(value.items())
        out: dict[str, Any] = {str(k): _preview(v, depth + 1) for k, v in items[:_PREVIEW_KEYS]}
        if len(items) > _PREVIEW_KEYS:
            out["_truncated_keys"] = len(items) - _PREVIEW_KEYS
        return out
    if isinstance(value, (list, tuple)):
        if depth >= 2:
            return f"list({len(value)} items)"
        shown = [_preview(v, depth + 1) for v in value[:_PREVIEW_ITEMS]]
        if len(value) > _PREVIEW_ITEMS:
            shown.append(f"... {len(value) - _PREVIEW_ITEMS} more")
        return shown
    return value


def compact_result(result: Any, profile: EngineProfile) -> Any:
    """An iteration result as the loop result keeps it: whole, or past the byte bound NoETL's
    ``{_truncated: true, _original_size_bytes, _type, _preview}``."""
    limit = result_limits()[1]
    if (
        not profile.loop_results_capped
        or limit <= 0
        or not isinstance(result, (Mapping, list, tuple))
    ):
        return result
    size = len(json.dumps(result, default=str, separators=(",", ":")).encode())
    if size <= limit:
        return result
    return {
        "_truncated": True,
        "_original_size_bytes": size,
        "_type": "dict" if isinstance(result, Mapping) else "list",
        "_preview": _preview(result),
    }


def aggregate(
    records: Sequence[Mapping[str, Any]], profile: EngineProfile = CANONICAL
) -> dict[str, Any]:
    """NoETL's loop result over iteration records (any order in, index order out). The case-v2
    era engine (dc55c492) hands downstream steps ``{results, stats}`` only; the later engine
    adds ``omitted_results_count`` and keeps only the last 128 results (recorded:
    tests/differential/cases/case_v2/loop_*, loops/result_cap_*): ``profile.loop_omitted_count``
    and ``loop_results_capped``."""
    ordered = sorted(records, key=lambda r: r["index"])
    failed = sum(1 for r in ordered if r["status"] != "ok")
    kept = ordered
    if profile.loop_results_capped:
        kept = ordered[-result_limits()[0] :]
    result: dict[str, Any] = {
        "results": [compact_result(r["result"], profile) for r in kept],
        "stats": {"total": len(ordered), "success": len(ordered) - failed, "failed": failed},
    }
    if profile.loop_omitted_count:
        result["omitted_results_count"] = len(ordered) - len(kept)
    return result


def finish(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[StepOutcome, dict[str, Any]]:
    """The loop's end over its iteration records -> (loop step outcome, extra step results: the
    v1 end step's and the body steps' latest)."""
    step = payload["step"]
    result = aggregate(records, profile_for(payload))
    ctx: dict[str, Any] = {}
    vars_: dict[str, Any] = {}
    for record in sorted(records, key=lambda r: r["index"]):
        ctx.update(record.get("ctx") or {})
        vars_.update(record.get("vars") or {})
    extra: dict[str, Any] = {}
    end = payload["loop"].get("end")
    end_inputs = {
        **inputs,
        "ctx": {**(inputs.get("ctx") or {}), **ctx},
        "vars": {**(inputs.get("vars") or {}), **vars_},
    }
    if payload["loop"].get("body"):
        for record in sorted(records, key=lambda r: r["index"]):
            extra.update(record["result"] or {})
    if end:
        context = step_context(payload, end_inputs)
        context[f"{step}_results"] = result["results"]
        context["results"] = result["results"]
        try:
            derived = render_value(
                end.get("result") or {}, context, strict=True, field=f"{end['step']}.result"
            )
        except RenderError as exc:
            raise _fail(end["step"], f"field result: {exc}", "TemplateError") from exc
        extra[end["step"]] = derived
        if isinstance(derived, Mapping):
            result = {**result, **derived}
    loop_event(
        payload,
        inputs,
        names.LOOP_FINISHED,
        "success",
        alias="loop.done",
        data={"stats": result["stats"]},
    )
    deferred: dict[str, dict[str, Any]] = {}
    for record in sorted(records, key=lambda r: r["index"]):
        for target in record.get("next") or []:
            entry = deferred.setdefault(target["step"], {"step": target["step"], "args": {}})
            if "task_id" in target:
                entry["task_id"] = target["task_id"]
            deferred[target["step"]]["args"].update(target.get("args") or {})
    # The variables NoETL leaves behind after a loop (the last item's iterator and loop_index,
    # written per iteration: templating.context.loop_variables) are the loop step's writes too,
    # so its finish event reports them in item order whatever order the iterations ended in.
    last = loop_variables(payload, {"iterator": payload["loop"].get("iterator"), "item": None})
    issued = {key: ctx[key] for key in last if key in ctx}
    outcome = complete_step(
        payload,
        end_inputs,
        result,
        sleep=sleep,
        deferred=list(deferred.values()),
        writes=to_jsonable(issued),
    )
    outcome.ctx_writes = {**to_jsonable(ctx), **outcome.ctx_writes}
    outcome.vars_writes = {**to_jsonable(vars_), **outcome.vars_writes}
    outcome.attempts = len(records)
    return outcome, to_jsonable(extra)


def run_loop(
    payload: Mapping[str, Any],
    inputs: Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
    run_body: BodyRunner | None = None,
) -> StepOutcome:
    """The whole loop in this process, one iteration after the other; each iteration sees the
    ctx/vars written by the earlier ones (what a sequential loop that writes ctx needs). A
    failed item fails the loop: at once where the engine starts no further item
    (``loop_items.run_items``), else after the remaining items ran."""
    items = render_collection(payload, inputs)
    loop_event(payload, inputs, names.LOOP_STARTED, "in_progress", data={"total": len(items)})
    ctx = dict(inputs.get("ctx") or {})
    vars_ = dict(inputs.get("vars") or {})

    def one(index: int, item: Any) -> dict[str, Any]:
        record = run_iteration(
            payload,
            {**inputs, "ctx": ctx, "vars": vars_},
            item,
            index,
            len(items),
            sleep=sleep,
            run_body=run_body,
        )
        ctx.update(record.get("ctx") or {})
        vars_.update(record.get("vars") or {})
        return record

    records, failure = run_items(payload, items, one)
    if failure is not None:
        raise failure
    outcome, extra = finish(payload, inputs, records, sleep=sleep)
    outcome.extra_results = extra
    return outcome
