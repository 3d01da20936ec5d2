"""The step payload contract between the compiler and the runtime, as the runtime checks it.

The types and key tables are the compiler's ``noetl_compile.step_contract`` (one table for both
sides). A payload is validated ONCE, where it enters the plugin: each operator calls
:func:`validate_payload` in its constructor, so a malformed payload is a DAG import error
naming the step, not a task failure at 3 a.m. The runtime below the operators (``runtime.step``,
``runtime.loop``, the interpreter) trusts what it is handed: a region's, a loop body's and an
inline child's steps reach it through an operator's constructor too. Unknown top-level keys are
rejected on purpose: a key the runtime does not know is a feature it would otherwise silently skip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from noetl_compile.step_contract import (
    ARC_KEYS,
    DIALECTS,
    EXTENSION_KEYS,
    PAYLOAD_KEYS,
    ROUTING_MODES,
    STEP_DEFAULTS,
    StepPayload,
)

__all__ = [
    "DIALECTS",
    "PAYLOAD_DEFAULTS",
    "PAYLOAD_EXTENSIONS",
    "PAYLOAD_KEYS",
    "ROUTING_MODES",
    "arc_task_id",
    "normalise_case_next",
    "validate_payload",
    "with_defaults",
]

PAYLOAD_EXTENSIONS = EXTENSION_KEYS
# What an absent key means (the table the compiler compacts with). An absent arc ``when`` is an
# unguarded arc, an absent arc ``task_id`` is the step name (``arc_task_id``), an absent routing
# ``mode`` exclusive.
PAYLOAD_DEFAULTS: Mapping[str, Any] = STEP_DEFAULTS


def with_defaults(payload: Mapping[str, Any]) -> StepPayload:
    """``payload`` with every absent contract key set to its default (fresh containers)."""
    full: dict[str, Any] = {key: _fresh(value) for key, value in PAYLOAD_DEFAULTS.items()}
    full.update(payload)
    routing = full.get("routing")
    if isinstance(routing, Mapping):
        full["routing"] = {**_fresh(STEP_DEFAULTS["routing"]), **routing}
    return full  # type: ignore[return-value]


def _fresh(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


def normalise_case_next(value: Any) -> list[dict[str, Any]]:
    """``then.next`` as a list of ``{step, args?, task_id?}``.

    case-v2 playbooks write it as a step name, one ``{step, args}`` dict, or a list of either.
    """
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    targets: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            targets.append({"step": item})
        elif isinstance(item, Mapping) and isinstance(item.get("step"), str):
            target = {"step": item["step"]}
            args = item.get("args", item.get("with"))
            if isinstance(args, Mapping):
                target["args"] = dict(args)
            if "task_id" in item:
                target["task_id"] = item["task_id"]
            targets.append(target)
        else:
            raise ValueError(f"case next entry must be a step name or {{step, args}}, got {item!r}")  # noqa: TRY004
    return targets


def arc_task_id(arc: Mapping[str, Any]) -> str | None:
    """Airflow task id of a routing target: ``task_id`` if given (``None`` = the target has no task
    in this DAG, e.g. an implicit ``end``), else the step name."""
    return arc["task_id"] if "task_id" in arc else arc["step"]


def _check_tool(tool: Any, where: str, problems: list[str]) -> None:
    if not isinstance(tool, Mapping):
        problems.append(f"{where} must be an object with `kind`, got {type(tool).__name__}")
    elif not isinstance(tool.get("kind"), str) or not tool.get("kind"):
        problems.append(f"{where} needs a string `kind`")


def validate_payload(payload: Any) -> None:
    """Raise ValueError listing every problem of a step payload."""
    if not isinstance(payload, Mapping):
        raise ValueError(f"NoETL step payload must be a dict, got {type(payload).__name__}")  # noqa: TRY004
    step = payload.get("step")
    problems: list[str] = []
    if not isinstance(step, str) or not step:
        problems.append("`step` must be a non-empty string")
    unknown = sorted(set(payload) - PAYLOAD_KEYS - EXTENSION_KEYS)
    if unknown:
        problems.append(
            f"unknown key(s) {', '.join(unknown)} (this runtime knows {', '.join(sorted(PAYLOAD_KEYS))})"
        )
    dialect = payload.get("dialect", "canonical")
    if dialect not in DIALECTS:
        problems.append(f"`dialect` must be one of {', '.join(DIALECTS)}, got {dialect!r}")
    for key in ("input", "vars"):
        if payload.get(key) is not None and not isinstance(payload[key], Mapping):
            problems.append(f"`{key}` must be an object or null")
    if payload.get("set") is not None and not isinstance(payload["set"], (Mapping, list)):
        problems.append("`set` must be an object (or a case-v2 list of {name, value})")

    tool, pipeline = payload.get("tool"), payload.get("pipeline")
    if tool is not None and pipeline is not None:
        problems.append("`tool` and `pipeline` are exclusive")
    if tool is not None:
        _check_tool(tool, "`tool`", problems)
    if pipeline is not None:
        if not isinstance(pipeline, list) or not pipeline:
            problems.append("`pipeline` must be a non-empty list of tasks")
        else:
            labels: list[str] = []
            for i, task in enumerate(pipeline):
                _check_tool(task, f"`pipeline[{i}]`", problems)
                if isinstance(task, Mapping):
                    name = task.get("name")
                    labels.append(name if isinstance(name, str) and name else f"task_{i}")
            dupes = sorted({label for label in labels if labels.count(label) > 1})
            if dupes:
                problems.append(f"duplicate pipeline task label(s): {', '.join(dupes)}")

    case = payload.get("case")
    if case is not None:
        if not isinstance(case, list):
            problems.append("`case` must be a list of {when, then}")
        else:
            for i, rule in enumerate(case):
                if not isinstance(rule, Mapping) or "then" not in rule:
                    problems.append(f"`case[{i}]` must be an object with `then`")
                    continue
                actions = rule["then"] if isinstance(rule["then"], list) else [rule["then"]]
                for action in actions:
                    if isinstance(action, Mapping) and "next" in action:
                        try:
                            normalise_case_next(action["next"])
                        except ValueError as exc:
                            problems.append(f"`case[{i}].then.next`: {exc}")

    routing = payload.get("routing")
    if routing is not None:
        if not isinstance(routing, Mapping):
            problems.append("`routing` must be an object {mode, arcs}")
        else:
            mode = routing.get("mode", "exclusive")
            if mode not in ROUTING_MODES:
                problems.append(f"`routing.mode` must be exclusive or inclusive, got {mode!r}")
            arcs = routing.get("arcs", [])
            if not isinstance(arcs, list):
                problems.append("`routing.arcs` must be a list")
            else:
                for i, arc in enumerate(arcs):
                    if not isinstance(arc, Mapping) or not isinstance(arc.get("step"), str):
                        problems.append(f"`routing.arcs[{i}]` needs a string `step`")
                        continue
                    if arc.get("task_id") is not None and not isinstance(arc["task_id"], str):
                        problems.append(f"`routing.arcs[{i}].task_id` must be a string")
                    extra = sorted(set(arc) - ARC_KEYS)
                    if extra:
                        problems.append(
                            f"`routing.arcs[{i}]` has unknown key(s) {', '.join(extra)}"
                        )
                    for key in ("set", "args"):
                        if arc.get(key) is not None and not isinstance(arc[key], Mapping):
                            problems.append(f"`routing.arcs[{i}].{key}` must be an object or null")

    if problems:
        name = step if isinstance(step, str) and step else "?"
        raise ValueError(f"invalid NoETL step payload for step {name!r}: " + "; ".join(problems))
