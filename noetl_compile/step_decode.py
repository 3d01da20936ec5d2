"""The one decode of a compiled step payload into the typed step (``step_model``).

Each operator calls one of these in its constructor, when the DAG file is parsed:
:func:`decode_step` (any step), :func:`decode_loop_step` (a loop operator's), :func:`decode_region`
(a routing cycle's task), :func:`decode_reads` (which XComs a task pulls). Every problem is
collected with its path and raised together as one :class:`~.step_model.PayloadError`.

Standard library only (and the leaves it builds from): the runtime imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .step_model import (
    ARC_KEYS,
    DIALECTS,
    EXTENSION_KEYS,
    FUSED_LOOP_KEYS,
    LOOP_MODES,
    PAYLOAD_KEYS,
    READS_KEYS,
    REGION_KEYS,
    ROUTING_MODES,
    Arc,
    CaseRule,
    Loop,
    PayloadError,
    Reads,
    Region,
    Routing,
    Step,
    Tool,
    normalise_case_next,
)

__all__ = [
    "decode_fused_loop",
    "decode_loop_step",
    "decode_reads",
    "decode_region",
    "decode_step",
    "without_fold",
]


class _Problems:
    """Problems found on the way down, each with its path."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.found.append((path, message))

    def raise_if_any(self, what: str) -> None:
        if self.found:
            raise PayloadError(what, self.found)


def decode_step(payload: Any) -> Step:
    """The typed step of ``payload``; :class:`PayloadError` lists every problem with its path."""
    if not isinstance(payload, Mapping):
        raise PayloadError(
            "invalid NoETL step payload",
            [("", f"a step payload must be a dict, got {type(payload).__name__}")],
        )
    problems = _Problems()
    step = _step(payload, "", problems)
    name = payload.get("step")
    problems.raise_if_any(
        f"invalid NoETL step payload for step {name if isinstance(name, str) and name else '?'!r}"
    )
    assert step is not None  # no problems: the step was built
    return step


def decode_loop_step(payload: Any, *, cursor: bool | None = False) -> Step:
    """A loop operator's step: the payload must hold a ``loop``; ``cursor`` true: a cursor loop
    (``mode: cursor`` with a ``cursor`` object), false: a loop over ``in``, ``None``: either,
    as its ``mode`` says (the tail closes both). A fused loop's ``lead`` and ``trail`` are
    not the loop step's (:func:`decode_fused_loop`)."""
    step = decode_step(without_fold(payload))
    problems = _Problems()
    loop = step.loop
    if loop is None:
        problems.add("loop", "is required: a loop operator needs a `loop` object in its payload")
    elif loop.mode is None:
        problems.add(
            "loop.mode", f"must be one of {', '.join(LOOP_MODES)}: a loop operator runs one"
        )
    else:
        is_cursor = loop.mode == "cursor" if cursor is None else cursor
        if is_cursor:
            if loop.mode != "cursor" or loop.cursor is None:
                problems.add(
                    "loop", "a cursor loop needs `loop.mode: cursor` and a `loop.cursor` object"
                )
            elif not isinstance(loop.cursor.get("kind"), str) or not isinstance(
                loop.cursor.get("claim"), str
            ):
                problems.add("loop.cursor", "needs a string `kind` and a string `claim`")
        else:
            if not loop.has_in:
                problems.add("loop.in", "(the collection) is required")
            if loop.mode == "cursor":
                problems.add(
                    "loop.mode",
                    "a cursor loop is lowered with operators.cursor, not operators.loop",
                )
    problems.raise_if_any(f"invalid loop payload for step {step.name!r}")
    return step


def without_fold(payload: Any) -> Any:
    """A fused loop's payload without what it adds to its loop step's (``FUSED_LOOP_KEYS``)."""
    if isinstance(payload, Mapping) and FUSED_LOOP_KEYS & set(payload):
        return {k: v for k, v in payload.items() if k not in FUSED_LOOP_KEYS}
    return payload


def decode_fused_loop(payload: Any) -> tuple[list[Step], Region | None]:
    """A fused loop's ``lead`` (the steps its head runs first, in order) and ``trail`` (the
    region its tail runs after the loop; None without one)."""
    if not isinstance(payload, Mapping):
        return [], None
    name = payload.get("step")
    problems = _Problems()
    lead: list[Step] = []
    raw = payload.get("lead", [])
    if not isinstance(raw, list):
        problems.add("lead", f"must list step payloads, got {type(raw).__name__}")
        raw = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            problems.add(f"lead[{index}]", f"must be a step payload, got {type(item).__name__}")
            continue
        step = _step(item, f"lead[{index}].", problems)
        if step is not None:
            lead.append(step)
    problems.raise_if_any(f"invalid fused loop payload for step {name!r}")
    trail = payload.get("trail")
    return lead, decode_region(trail) if trail is not None else None


def decode_reads(reads: Any, where: str, *, args: bool = True) -> Reads:
    """The ``reads`` table of a task (``None``: reads nothing). ``args`` false: a task that
    pulls no routed ``args`` (every operator but the plain step's)."""
    if reads is None:
        reads = {}
    if not isinstance(reads, Mapping):
        raise PayloadError(
            f"invalid `reads` of {where}",
            [("reads", f"must be a dict, got {type(reads).__name__}")],
        )
    problems = _Problems()
    known = set(READS_KEYS) if args else set(READS_KEYS) - {"args"}
    unknown = sorted(map(str, set(reads) - known))
    if unknown:
        problems.add("reads", f"has unknown key(s) {', '.join(unknown)}")
    tables: dict[str, Mapping[str, str]] = {}
    for key in ("results", "region_results"):
        table = reads.get(key) or {}
        if not isinstance(table, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in table.items()
        ):
            problems.add(f"reads.{key}", "must map step names to task ids (strings)")
            table = {}
        tables[key] = MappingProxyType(dict(table))
    lists: dict[str, Mapping[str, tuple[str, ...]]] = {}
    for key in ("ctx", "vars"):
        table = reads.get(key) or {}
        if not isinstance(table, Mapping) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(t, str) for t in v)
            for k, v in table.items()
        ):
            problems.add(f"reads.{key}", "must map names to lists of task ids")
            table = {}
        lists[key] = MappingProxyType({k: tuple(v) for k, v in table.items()})
    routed = reads.get("args")
    if routed is not None and not (
        isinstance(routed, list) and all(isinstance(t, str) for t in routed)
    ):
        problems.add("reads.args", "must be a list of task ids")
        routed = None
    problems.raise_if_any(f"invalid `reads` of {where}")
    # The operator's own plain copy (what it pulls with; it travels in no DAG file).
    mapping = {
        key: ({k: list(v) for k, v in value.items()} if key in ("ctx", "vars") else dict(value))
        if isinstance(value, Mapping)
        else list(value)
        for key, value in reads.items()
        if value is not None
    }
    return Reads(
        results=tables["results"],
        region_results=tables["region_results"],
        ctx=lists["ctx"],
        vars=lists["vars"],
        args=tuple(routed) if routed is not None else None,
        mapping=mapping,
    )


def decode_region(payload: Any) -> Region:
    """A region task's payload: ``{region, dialect, entry, steps, exits}``."""
    if not isinstance(payload, Mapping):
        raise PayloadError(
            "invalid NoETL region payload",
            [("", f"a region payload must be a dict, got {type(payload).__name__}")],
        )
    problems = _Problems()
    name = payload.get("region")
    if not isinstance(name, str) or not name:
        problems.add("region", "must be a non-empty string")
    raw_steps = payload.get("steps")
    steps: dict[str, Step] = {}
    if not isinstance(raw_steps, Mapping) or not raw_steps:
        problems.add("steps", "must map member step names to step payloads")
        raw_steps = {}
    for member, step_payload in raw_steps.items():
        path = f"steps[{member!r}]"
        if not isinstance(step_payload, Mapping):
            problems.add(path, f"must be a step payload, got {type(step_payload).__name__}")
            continue
        decoded = _step(step_payload, path + ".", problems)
        if step_payload.get("step") != member:
            problems.add(path, f"holds the payload of step {step_payload.get('step')!r}")
        if decoded is not None:
            steps[member] = decoded
    entry = payload.get("entry")
    if not isinstance(entry, list) or not entry or any(e not in raw_steps for e in entry):
        problems.add("entry", "must list member steps the region starts at")
        entry = []
    exits = payload.get("exits", [])
    if not isinstance(exits, list) or not all(isinstance(t, str) for t in exits):
        problems.add("exits", "must list task ids")
        exits = []
    dialect = payload.get("dialect", "canonical")
    if dialect not in DIALECTS:
        problems.add("dialect", f"must be one of {', '.join(DIALECTS)}, got {dialect!r}")
    unknown = sorted(map(str, set(payload) - REGION_KEYS))
    if unknown:
        problems.add("", f"unknown key(s) {', '.join(unknown)}")
    problems.raise_if_any(f"invalid NoETL region payload {name!r}")
    return Region(
        name=str(name),
        dialect=str(dialect),
        entry=tuple(entry),
        steps=MappingProxyType(steps),
        exits=tuple(exits),
        payload=payload,
    )


def _step(payload: Mapping[str, Any], at: str, problems: _Problems) -> Step | None:
    """Decode one step payload, adding its problems under the prefix ``at``; ``None`` when
    something is wrong (the problems say what)."""
    before = len(problems.found)
    name = payload.get("step")
    if not isinstance(name, str) or not name:
        problems.add(at + "step", "must be a non-empty string")
    unknown = sorted(map(str, set(payload) - PAYLOAD_KEYS - EXTENSION_KEYS))
    if unknown:
        problems.add(
            at.rstrip("."),
            f"unknown key(s) {', '.join(unknown)} (this runtime knows {', '.join(sorted(PAYLOAD_KEYS))})",
        )
    dialect = payload.get("dialect", "canonical")
    if dialect not in DIALECTS:
        problems.add(at + "dialect", f"must be one of {', '.join(DIALECTS)}, got {dialect!r}")
    generation = payload.get("generation")
    if generation is not None and not isinstance(generation, str):
        problems.add(at + "generation", "must be a string")
    for key in ("input", "vars"):
        if payload.get(key) is not None and not isinstance(payload[key], Mapping):
            problems.add(at + key, "must be an object or null")
    if payload.get("set") is not None and not isinstance(payload["set"], (Mapping, list)):
        problems.add(at + "set", "must be an object (or a case-v2 list of {name, value})")
    if not isinstance(payload.get("guard_walks_on", False), bool):
        problems.add(at + "guard_walks_on", "must be true or false")

    raw_tool, raw_pipeline = payload.get("tool"), payload.get("pipeline")
    if raw_tool is not None and raw_pipeline is not None:
        problems.add(at + "tool", "and `pipeline` are exclusive")
    tool = _tool(raw_tool, at + "tool", problems) if raw_tool is not None else None
    pipeline: tuple[Tool, ...] | None = None
    if raw_pipeline is not None:
        if not isinstance(raw_pipeline, list) or not raw_pipeline:
            problems.add(at + "pipeline", "must be a non-empty list of tasks")
        else:
            tasks = [_tool(t, f"{at}pipeline[{i}]", problems) for i, t in enumerate(raw_pipeline)]
            labels = [
                t.name if t is not None and t.name else f"task_{i}" for i, t in enumerate(tasks)
            ]
            dupes = sorted({label for label in labels if labels.count(label) > 1})
            if dupes:
                problems.add(at + "pipeline", f"has duplicate task label(s): {', '.join(dupes)}")
            pipeline = tuple(t for t in tasks if t is not None)

    case = _case(payload.get("case"), at + "case", problems)
    routing = _routing(payload.get("routing"), at + "routing", problems)
    loop = (
        _loop(payload["loop"], at + "loop", problems) if payload.get("loop") is not None else None
    )

    if len(problems.found) > before:
        return None
    return Step(
        name=str(name),
        dialect=str(dialect),
        generation=generation,
        tool=tool,
        pipeline=pipeline,
        case=case,
        routing=routing,
        loop=loop,
        guard=payload.get("guard"),
        guard_walks_on=bool(payload.get("guard_walks_on", False)),
        payload=payload,
    )


def _tool(value: Any, path: str, problems: _Problems) -> Tool | None:
    if not isinstance(value, Mapping):
        problems.add(path, f"must be an object with `kind`, got {type(value).__name__}")
        return None
    kind = value.get("kind")
    if not isinstance(kind, str) or not kind:
        problems.add(path, "needs a string `kind`")
        return None
    label, workbook = value.get("name"), value.get("workbook")
    return Tool(
        kind=kind,
        name=label if isinstance(label, str) else None,
        workbook=workbook if isinstance(workbook, str) else None,
        settings=value,
    )


def _case(value: Any, path: str, problems: _Problems) -> tuple[CaseRule, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.add(path, "must be a list of {when, then}")
        return ()
    rules: list[CaseRule] = []
    for i, rule in enumerate(value):
        if not isinstance(rule, Mapping) or "then" not in rule:
            problems.add(f"{path}[{i}]", "must be an object with `then`")
            continue
        then = rule["then"]
        for action in then if isinstance(then, list) else [then]:
            if isinstance(action, Mapping) and "next" in action:
                try:
                    normalise_case_next(action["next"])
                except ValueError as exc:
                    problems.add(f"{path}[{i}].then.next", str(exc))
        rules.append(CaseRule(guarded="when" in rule, when=rule.get("when"), then=then))
    return tuple(rules)


def _routing(value: Any, path: str, problems: _Problems) -> Routing:
    if value is None:
        return Routing(mode="exclusive", arcs=())
    if not isinstance(value, Mapping):
        problems.add(path, "must be an object {mode, arcs}")
        return Routing(mode="exclusive", arcs=())
    mode = value.get("mode", "exclusive")
    if mode not in ROUTING_MODES:
        problems.add(f"{path}.mode", f"must be exclusive or inclusive, got {mode!r}")
        mode = "exclusive"
    raw_arcs = value.get("arcs", [])
    arcs: list[Arc] = []
    if not isinstance(raw_arcs, list):
        problems.add(f"{path}.arcs", "must be a list")
        raw_arcs = []
    for i, arc in enumerate(raw_arcs):
        at = f"{path}.arcs[{i}]"
        if not isinstance(arc, Mapping) or not isinstance(arc.get("step"), str):
            problems.add(at, "needs a string `step`")
            continue
        task_id = arc["task_id"] if "task_id" in arc else arc["step"]
        if task_id is not None and not isinstance(task_id, str):
            problems.add(f"{at}.task_id", "must be a string")
        extra = sorted(map(str, set(arc) - ARC_KEYS))
        if extra:
            problems.add(at, f"has unknown key(s) {', '.join(extra)}")
        tables: dict[str, Mapping[str, Any] | None] = {}
        for key in ("set", "args", "spec"):
            table = arc.get(key)
            if table is not None and not isinstance(table, Mapping):
                problems.add(f"{at}.{key}", "must be an object or null")
                table = None
            tables[key] = table
        group = arc.get("group")
        if group is not None and (not isinstance(group, int) or isinstance(group, bool)):
            problems.add(f"{at}.group", "must be an integer")
            group = None
        arcs.append(
            Arc(
                step=arc["step"],
                task_id=task_id if isinstance(task_id, str) else None,
                guarded="when" in arc,
                when=arc.get("when"),
                set=tables["set"],
                args=tables["args"],
                spec=tables["spec"],
                group=group,
            )
        )
    return Routing(mode="inclusive" if mode == "inclusive" else "exclusive", arcs=tuple(arcs))


def _loop(value: Any, path: str, problems: _Problems) -> Loop | None:
    if not isinstance(value, Mapping):
        problems.add(path, f"must be an object, got {type(value).__name__}")
        return None
    before = len(problems.found)
    iterator, mode = value.get("iterator"), value.get("mode")
    if not isinstance(iterator, str) or not iterator:
        problems.add(f"{path}.iterator", "must be a non-empty string")
    if mode is not None and mode not in LOOP_MODES:
        problems.add(f"{path}.mode", f"must be one of {', '.join(LOOP_MODES)}, got {mode!r}")
    cursor = value.get("cursor")
    if cursor is not None and not isinstance(cursor, Mapping):
        problems.add(f"{path}.cursor", "must be an object")
    limit = value.get("max_in_flight")
    if (
        limit is not None
        and not isinstance(limit, str)
        and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1)
    ):
        problems.add(f"{path}.max_in_flight", "must be a positive integer or a template")
    body: dict[str, Step] | None = None
    raw_body = value.get("body")
    if raw_body is not None:
        members = raw_body.get("steps") if isinstance(raw_body, Mapping) else None
        if not isinstance(members, Mapping) or not members:
            problems.add(f"{path}.body", "must hold the body `steps` of a v1 loop")
        else:
            body = {}
            for member, member_payload in members.items():
                at = f"{path}.body.steps[{member!r}]"
                if not isinstance(member_payload, Mapping):
                    problems.add(at, f"must be a step payload, got {type(member_payload).__name__}")
                    continue
                decoded = _step(member_payload, at + ".", problems)
                if decoded is not None:
                    body[str(member)] = decoded
    end: Step | None = None
    raw_end = value.get("end")
    if raw_end is not None:
        if not isinstance(raw_end, Mapping):
            problems.add(f"{path}.end", "must be a step payload")
        else:
            # ``result``: what the v1 end step makes the loop's result; the rest is a step.
            end = _step(
                {k: v for k, v in raw_end.items() if k != "result"}, f"{path}.end.", problems
            )
    if len(problems.found) > before:
        return None
    return Loop(
        iterator=str(iterator),
        mode=mode,
        has_in="in" in value,
        collection=value.get("in"),
        cursor=cursor,
        max_in_flight=limit,
        body=MappingProxyType(body) if body is not None else None,
        end=end,
    )
