"""Step payloads: the AST of one step as the plain, JSON-serialisable data the runtime receives.

The payload is the compiler -> runtime contract (``step_contract``: its types and key tables): templates
stay unrendered, key order is source order, and ``Y*`` values become plain ``dict``/``list``/
``str``. Dialect differences that the compiler resolves statically are resolved here: v1 inline
tool keys become a tool mapping, workbook calls are replaced by the workbook task's tool, and
case ``next`` targets carry the Airflow task id they route to.
"""

from __future__ import annotations

import base64
import datetime
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any, cast

from ..ast import SKIPS_UNKNOWN_TARGETS, Playbook, Step, Task
from ..read.base import is_template
from ..read.v1 import INLINE_TOOL_KEYS
from ..step_contract import (
    STEP_DEFAULTS,
    Arc,
    CaseRule,
    LoopSpec,
    Routing,
    StepPayload,
    ToolMapping,
)

__all__ = ["is_gate", "is_nested", "plain", "step_payload", "tool_payload"]

NESTED_KINDS = ("playbook", "playbooks")
_V1_INPUT_KEYS = ("with", "args", "data", "input")


def _key(key: Any) -> str:
    if isinstance(key, str):
        # A payload repeats the same few keys per step (`step`, `tool`, `kind`...): one copy each.
        return sys.intern(str(key))
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def plain(value: Any) -> Any:
    """``Y*`` (and YAML's other scalar types) -> plain JSON-compatible data, order kept."""
    if isinstance(value, Mapping):
        return {_key(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=repr)
    return str(value)


def is_finite_json(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(is_finite_json(v) for v in value.values())
    if isinstance(value, list):
        return all(is_finite_json(v) for v in value)
    return True


def is_nested(step: Step) -> bool:
    return step.tool is not None and step.pipeline is None and step.tool.kind in NESTED_KINDS


def is_gate(step: Step) -> bool:
    return step.tool is not None and step.pipeline is None and step.tool.kind == "gate"


# -- tools --------------------------------------------------------------------------------------


def _v1_tool(mapping: Mapping[str, Any], kind: str | None, *, own_args: bool) -> ToolMapping:
    """A v1 step or workbook task carries its tool settings inline; collect them.

    ``own_args``: the mapping is a workbook/iterator task, whose `with`/`data` bindings are the
    tool's default arguments (on a step they are the step input instead).
    """
    tool: dict[str, Any] = {"kind": kind}  # a v1 task may leave `kind` to its `tool` mapping
    nested = mapping.get("tool")
    if isinstance(nested, Mapping):  # `tool: {kind: ...}` spelled as a mapping
        tool.update(plain(nested))
        tool["kind"] = kind or tool.get("kind")
    for key, value in mapping.items():
        # `mode` of a step or task is a tool setting (a transfer's `append`: NoETL 96458eef's
        # snowflake executor reads `task_config.get('mode', 'append')`); an iterator's mode is
        # on the iterator step, whose tool is its `task` mapping, so it never reaches here.
        if key in INLINE_TOOL_KEYS or key == "mode":
            tool[str(key)] = plain(value)
    for key in _V1_INPUT_KEYS if own_args else ():
        if isinstance(mapping.get(key), Mapping) and "args" not in tool:
            tool["args"] = plain(mapping[key])
            break
    return tool  # type: ignore[return-value]


def _workbook_tool(
    playbook: Playbook, name: Any, overrides: Mapping[str, Any]
) -> ToolMapping | None:
    task = playbook.workbook.get(name) if isinstance(name, str) else None
    if task is None:
        return None
    base = tool_payload(playbook, task, resolve_workbook=False)
    if base is None:
        return None
    merged: dict[str, Any] = dict(base)
    for key, value in overrides.items():
        if key not in ("kind", "name"):
            merged[key] = value
    merged["workbook"] = str(name)
    return cast(ToolMapping, merged)


def tool_payload(
    playbook: Playbook, task: Task, *, step: Step | None = None, resolve_workbook: bool = True
) -> ToolMapping | None:
    """The tool mapping of one task, as the runtime receives it."""
    config = task.config if isinstance(task.config, Mapping) else {}
    if playbook.dialect == "v1":
        if task.kind == "workbook" and resolve_workbook:
            name = task.name if task.name is not None else config.get("name", config.get("task"))
            resolved = _workbook_tool(playbook, name, {})
            if resolved is not None:
                return resolved
        return _v1_tool(config, task.kind, own_args=step is None or config is not step.raw)
    tool = plain(config)
    if task.kind == "workbook" and resolve_workbook:
        resolved = _workbook_tool(playbook, tool.get("name"), tool)
        if resolved is not None:
            return resolved
    return cast(ToolMapping, tool)


# -- routing ------------------------------------------------------------------------------------


def _arc(arc: Any, task_id: Callable[[str], str | None], *, grouped: bool) -> Arc:
    entry: Arc = {
        "step": arc.target,
        "task_id": task_id(arc.target),
        "when": plain(arc.when),
    }
    if arc.set is not None:
        entry["set"] = plain(arc.set)
    if arc.args is not None:
        entry["args"] = plain(arc.args)
    if grouped:
        entry["group"] = arc.group
    return entry


def routing_payload(
    step: Step, task_id: Callable[[str], str | None], known: Callable[[str], bool] | None = None
) -> Routing:
    # An arc to a step that does not exist (R201, a warning where the engine skips it) never
    # matches: NoETL's engine goes on to the next arc, so the arc is left out here.
    arcs = [
        a
        for a in step.router.arcs
        if a.origin != "case"
        and (
            known is None
            or not isinstance(a.target, str)
            or known(a.target)
            or is_template(a.target)
        )
    ]
    groups = [a.group for a in arcs]
    # v1 `when: ... then: [a, b]` fires a group of arcs together; only then is `group` needed.
    grouped = step.router.mode == "exclusive" and len(groups) != len(set(groups))
    return {"mode": step.router.mode, "arcs": [_arc(a, task_id, grouped=grouped) for a in arcs]}


def _case_next(value: Any, task_id: Callable[[str], str | None]) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    targets = []
    for item in items:
        if isinstance(item, (str, int, float)) and not isinstance(item, bool):
            targets.append({"step": str(item), "task_id": task_id(str(item))})
        elif isinstance(item, Mapping) and "step" in item:
            target = {"step": str(item["step"]), "task_id": task_id(str(item["step"]))}
            args = item.get("args", item.get("with"))
            if args is not None:
                target["args"] = plain(args)
            targets.append(target)
    return targets


def case_payload(step: Step, task_id: Callable[[str], str | None]) -> list[CaseRule]:
    rules: list[CaseRule] = []
    for rule in step.case:
        then = plain(rule.then) if isinstance(rule.then, Mapping) else {}
        if "next" in then:
            then["next"] = _case_next(then["next"], task_id)
        rules.append({"when": plain(rule.when), "then": then})
    return rules


# -- the step -----------------------------------------------------------------------------------


def step_payload(
    playbook: Playbook, step: Step, task_id: Callable[[str], str | None]
) -> StepPayload:
    """The contract payload of one step, with the ``sink``/``retry`` extensions it needs (the
    lowering adds ``loop``/``playbook``)."""
    payload: StepPayload = {"step": step.name, "dialect": playbook.dialect}
    if playbook.generation is not None:
        # NoETL 5 semantics the runtime decides per playbook (python calling convention...);
        # absent for the older generations, so their DAG files do not change.
        payload["generation"] = playbook.generation
    if step.guard is not None:
        payload["guard"] = plain(step.guard)
        if step.guard_walks_on:
            payload["guard_walks_on"] = True
    if step.desc:
        payload["desc"] = str(step.desc)
    payload["input"] = plain(step.input) if isinstance(step.input, Mapping) else {}
    if step.pipeline is not None:
        payload["tool"] = None
        payload["pipeline"] = [tool_payload(playbook, task, step=step) for task in step.pipeline]
    else:
        payload["tool"] = (
            tool_payload(playbook, step.tool, step=step) if step.tool is not None else None
        )
        payload["pipeline"] = None
    payload["set"] = plain(step.set) if step.set is not None else {}
    payload["vars"] = plain(step.vars) if step.vars is not None else {}
    payload["case"] = case_payload(step, task_id)
    payload["routing"] = routing_payload(
        step,
        task_id,
        (lambda name: playbook.step(name) is not None)
        if playbook.dialect in SKIPS_UNKNOWN_TARGETS
        else None,
    )
    # Extensions (documented in docs/lowering.md): features the contract does not name yet.
    if step.sink is not None:
        payload["sink"] = plain(step.sink)
    if step.retry is not None:
        payload["retry"] = plain(step.retry)
    return payload


def loop_payload(step: Step) -> LoopSpec:
    loop = step.loop
    assert loop is not None
    entry: LoopSpec = {
        "iterator": loop.iterator,
        "mode": "cursor" if loop.cursor is not None else loop.mode,
    }
    if loop.cursor is not None:
        entry["cursor"] = plain(loop.cursor)
    else:
        entry["in"] = plain(loop.collection)
    entry["max_in_flight"] = plain(loop.max_in_flight)
    if loop.filter is not None:
        entry["filter"] = plain(loop.filter)
    if loop.order_by is not None:
        entry["order_by"] = plain(loop.order_by)
    if loop.limit is not None:
        entry["limit"] = plain(loop.limit)
    return entry


# -- what the DAG file carries ------------------------------------------------------------------


def _compact_routing(routing: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if routing.get("mode", "exclusive") != "exclusive":
        out["mode"] = routing["mode"]
    arcs = []
    for arc in routing.get("arcs") or []:
        # `when: None` is an unguarded arc; a task id equal to the step name is the default
        # (`task_id: None`, a target without a task, is kept: it means something).
        arcs.append(
            {
                k: v
                for k, v in arc.items()
                if not (k == "when" and v is None) and not (k == "task_id" and v == arc["step"])
            }
        )
    if arcs:
        out["arcs"] = arcs
    return out


def compact_step(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A step payload without the keys that hold only their default."""
    out: dict[str, Any] = {}
    for key, value in payload.items():
        if key == "routing":
            value = _compact_routing(value)
            if not value:
                continue
        elif key in STEP_DEFAULTS and value == STEP_DEFAULTS[key]:
            continue
        elif key == "case":
            value = [
                {k: v for k, v in rule.items() if k != "when" or v is not None} for rule in value
            ]
        elif key == "loop":
            value = _compact_loop(value)
        out[key] = value
    return out


def _compact_loop(loop: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in loop.items() if not (k == "max_in_flight" and v is None)}
    body = loop.get("body")
    if isinstance(body, Mapping):
        out["body"] = {
            "routing": _compact_routing(body.get("routing") or {}),
            "steps": {name: compact_step(step) for name, step in body["steps"].items()},
        }
    if isinstance(loop.get("end"), Mapping):
        out["end"] = compact_step(loop["end"])
    return out


def compact_unit(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payload of one unit as the DAG file prints it: a region's member steps, a loop's body
    and end step and a plain step all without default-valued keys."""
    if "region" in payload:
        return {
            **payload,
            "steps": {name: compact_step(step) for name, step in payload["steps"].items()},
        }
    return compact_step(payload)
