"""The task plan of each kind of unit: which operators, which payload, which note.

``build._Lowering`` decides the units (``plan``) and hands each here (:func:`fill_unit`); what a
unit of each kind lowers to (design brief §3, ARCHITECTURE.md's lowering table) is written once,
here: a step's one task, a loop's head -> mapped body -> tail (fused: with its lead and trail), a
cursor loop's claim -> worker slots -> tail, a nested call, a gate, a region's interpreted steps.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from ..ast import Playbook, Step
from ..check import read_file
from ..check.references import by_file, child_file
from ..step_contract import RegionPayload
from .ir import Task, Unit
from .names import dag_id_for_path
from .payload import compact_step, compact_unit, plain
from .regions import V1LoopBody

__all__ = ["Lowering", "dag_id_for", "fill_unit"]

STEP_MODULE = "airflow_plugin.operators.step"
LOOP_MODULE = "airflow_plugin.operators.loop"
FUSED_LOOP_MODULE = "airflow_plugin.operators.loop_fused"
REGION_MODULE = "airflow_plugin.operators.region"
CURSOR_MODULE = "airflow_plugin.operators.cursor"
NESTED_MODULE = "airflow_plugin.operators.nested"
GATES_MODULE = "airflow_plugin.operators.gates"
# Trigger rule of loop tails: run after an empty fan-out (body skipped), not after a skipped head.
TAIL_TRIGGER_RULE = "none_failed_min_one_success"
# The largest limit a task may carry into the scheduler's SQL (a signed 32-bit column).
_MAX_SQL_INT = 2**31 - 1


class Lowering(Protocol):
    """What a unit's plan reads of the lowering (``build._Lowering``)."""

    playbook: Playbook
    graph: Any
    fused_ids: set[str]

    def payload(self, name: str) -> dict[str, Any]: ...

    def task_id(self, step: str) -> str | None: ...


def _child_dag_id(playbook: Playbook, path: str) -> str | None:
    """The DAG id of a nested call's child: by catalog path, or, where NoETL names the child by
    file (its local runtime; `./`, `../` in NoETL 5), the id of the playbook in that file."""
    if not by_file(playbook, path):
        return dag_id_for_path(path)
    target = child_file(playbook.file, path)
    child = read_file(target).playbook if os.path.isfile(target) else None
    if child is None:
        return None  # R204 said so; the operator fails with the path it was given
    return dag_id_for(child, os.path.splitext(os.path.basename(target))[0])


def dag_id_for(playbook: Playbook, fallback: str) -> str:
    """The DAG id of the playbook's catalog key (``Playbook.catalog_key``), else of the file name
    (a playbook without one has S101 errors and is not compiled)."""
    return dag_id_for_path(playbook.catalog_key or fallback)


def _static_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def fill_unit(low: Lowering, unit: Unit) -> None:
    """The tasks, payload and note of ``unit``, as its kind lowers."""
    kind = unit.kind
    # A fused loop's steps are its lead, the loop step, its trail.
    step = low.playbook.step(unit.steps[len(unit.lead)])
    assert step is not None
    if kind == "region":
        _fill_region(low, unit)
    elif unit.v1_body is not None:
        _fill_v1_loop(low, unit, unit.v1_body)
    else:
        unit.payload = low.payload(step.name)
    if kind == "step":
        unit.tasks = [Task(unit.id, "NoetlStepOperator", STEP_MODULE)]
        unit.note = "step"
    elif kind == "nested":
        _fill_nested(low, unit)
    elif kind == "gate":
        _fill_gate(low, unit)
    elif kind == "loop_seq":
        unit.tasks = [Task(unit.id, "NoetlSequentialLoopOperator", LOOP_MODULE)]
        unit.note = "sequential loop writing ctx (iterates inside one task)"
    elif kind == "region":
        unit.tasks = [Task(unit.id, "NoetlRegionOperator", REGION_MODULE)]
        unit.note = f"cyclic region of {len(unit.steps)} step(s) (one task interprets it)"
        if unit.id in low.fused_ids:
            unit.note = f"fused run of {len(unit.steps)} step(s) (one task runs them in order)"
    elif kind == "loop":
        _fill_loop(low, unit, step)
    elif kind == "cursor":
        _fill_cursor(low, unit, step)


def _fill_loop(low: Lowering, unit: Unit, step: Step) -> None:
    loop = step.loop
    assert loop is not None
    body_kwargs: dict[str, Any] = {}
    limit = 1 if loop.mode == "sequential" else _static_int(loop.max_in_flight)
    if limit is not None:
        # Past a 32-bit integer no run has that many instances anyway, and the scheduler
        # binds the limit into SQL, where a larger number overflows the column type.
        body_kwargs["max_active_tis_per_dagrun"] = min(limit, _MAX_SQL_INT)
    unit.tasks = [
        Task("head", "NoetlLoopHeadOperator", LOOP_MODULE),
        Task(
            "body",
            "NoetlLoopBodyOperator",
            LOOP_MODULE,
            kwargs=body_kwargs,
            mapped={"chunk": "head"},
            upstream=["head"],
        ),
        Task(
            "tail",
            "NoetlLoopTailOperator",
            LOOP_MODULE,
            trigger_rule=TAIL_TRIGGER_RULE,
            upstream=["head", "body"],
        ),
    ]
    unit.note = f"{loop.mode} loop (head -> mapped body -> tail)"
    if unit.lead or unit.trail:
        _fold_loop(low, unit, step)


def _fold_loop(low: Lowering, unit: Unit, step: Step) -> None:
    """A fused loop: its head runs the lead first, its tail the trail after the loop (an
    interpreted chain, as a fused run is), and the tail's XCom holds the loop step's and
    the trail's results by name (``inner_steps``). The unit's payload, which every task of
    the group is handed, carries both (``step_model.FUSED_LOOP_KEYS``)."""
    head, _, tail = unit.tasks
    if unit.lead:
        head.operator, head.module = "NoetlFusedLoopHeadOperator", FUSED_LOOP_MODULE
        unit.payload["lead"] = [compact_step(low.payload(name)) for name in unit.lead]
    if unit.trail:
        trail = _region_payload(low, f"{unit.id}.tail", unit.trail, [unit.trail[0]])
        tail.operator, tail.module = "NoetlFusedLoopTailOperator", FUSED_LOOP_MODULE
        unit.payload["trail"] = compact_unit(trail)
        unit.inner_steps = [step.name, *unit.trail]
    # `parallel loop (start, head -> mapped body -> tail, total)`: what each task runs.
    lead = "".join(f"{name}, " for name in unit.lead)
    trail = "".join(f", {name}" for name in unit.trail)
    loop = step.loop
    assert loop is not None
    unit.note = f"{loop.mode} loop ({lead}head -> mapped body -> tail{trail})"


def _fill_cursor(low: Lowering, unit: Unit, step: Step) -> None:
    unit.tasks = [
        Task("head", "NoetlCursorHeadOperator", CURSOR_MODULE),
        Task(
            "worker",
            "NoetlCursorWorkerOperator",
            CURSOR_MODULE,
            mapped={"slot": "head"},
            upstream=["head"],
        ),
        Task(
            "tail",
            "NoetlLoopTailOperator",
            LOOP_MODULE,
            trigger_rule=TAIL_TRIGGER_RULE,
            upstream=["head", "worker"],
        ),
    ]
    unit.note = "cursor loop (head -> mapped worker slots draining the claim -> tail)"


def _fill_nested(low: Lowering, unit: Unit) -> None:
    tool = unit.payload.get("tool") or {}
    path = tool.get("path")
    child = (
        _child_dag_id(low.playbook, path)
        if isinstance(path, str) and path and "{" not in path
        else None
    )
    unit.payload["playbook"] = {"path": path, "dag_id": child}
    kwargs: dict[str, Any] = {}
    if child:
        kwargs["trigger_dag_id"] = child
    kwargs["wait_for_completion"] = True
    kwargs["deferrable"] = True
    unit.tasks = [Task(unit.id, "NoetlPlaybookOperator", NESTED_MODULE, kwargs=kwargs)]
    unit.note = "nested playbook (TriggerDagRunOperator)"


def _fill_gate(low: Lowering, unit: Unit) -> None:
    tool = unit.payload.get("tool") or {}
    gate = tool.get("gate")
    if gate == "approve":
        operator = "NoetlApprovalOperator"
    elif gate == "input":
        operator = "NoetlInputOperator"
    elif "until" in tool:
        operator = "NoetlWaitUntilSensor"
    else:
        operator = "NoetlSleepSensor"
    unit.tasks = [Task(unit.id, operator, GATES_MODULE)]
    unit.note = f"{gate if gate in ('approve', 'input', 'sleep') else 'unknown'} gate"


def _fill_region(low: Lowering, unit: Unit) -> None:
    members = set(unit.steps)
    entry = [
        m
        for m in unit.steps
        if m == low.playbook.entry or any(p not in members for p in low.graph.predecessors(m))
    ]
    region: RegionPayload = _region_payload(low, unit.id, unit.steps, entry)
    unit.payload = region


def _region_payload(
    low: Lowering, name: str, members: list[str], entry: list[str]
) -> RegionPayload:
    """Steps one task interprets (a cyclic region, a fused run, a fused loop's trail): their
    payloads, where they start, and the tasks outside them their arcs and case rules route to
    (the exits the task skips when no step chose them)."""
    inside = set(members)
    steps = {m: low.payload(m) for m in members}
    exits: list[str] = []
    for payload in steps.values():
        targets = [a["step"] for a in payload["routing"]["arcs"]]
        for rule in payload["case"]:
            targets += [t["step"] for t in rule["then"].get("next", [])]
        for target in targets:
            task_id = low.task_id(target)
            if target not in inside and task_id and task_id not in exits:
                exits.append(task_id)
    return {
        "region": name,
        "dialect": low.playbook.dialect,
        "entry": entry,
        "steps": steps,
        "exits": exits,
    }


def _fill_v1_loop(low: Lowering, unit: Unit, body: V1LoopBody) -> None:
    payload = low.payload(body.loop_step)
    end = low.payload(body.end_step) if body.end_step else None
    end_step = low.playbook.step(body.end_step) if body.end_step else None
    payload["loop"]["body"] = {
        "routing": payload["routing"],
        "steps": {name: low.payload(name) for name in body.body},
    }
    if end is not None and end_step is not None:
        end["result"] = plain(end_step.loop_result)
        payload["loop"]["end"] = end
        payload["routing"] = end["routing"]
    else:
        arcs = [
            a
            for name in body.body
            for a in payload["loop"]["body"]["steps"][name]["routing"]["arcs"]
            if a["step"] not in unit.steps
        ]
        payload["routing"] = {"mode": "inclusive", "arcs": arcs}
    unit.payload = payload


# -- dependencies -------------------------------------------------------------------------------
