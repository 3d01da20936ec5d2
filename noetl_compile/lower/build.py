"""AST -> IR: the step graph, its regions and loop shapes, and the task plan (design brief §3).

``lower(playbook, ...)`` is the stage's one public verb. It decides, for every reachable step,
which lowering row of the table applies, and records the result as ``Unit``s that ``emit``
prints without further decisions.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Mapping
from typing import Any

import networkx as nx

from ..analyze.flowgraph import StepGraph
from ..ast import Playbook, Step
from ..check import read_file
from ..check.references import by_file, child_file
from ..engine_profiles import profile_of
from ..step_contract import Reads, RegionPayload
from .assets import unit_assets
from .credentials import credential_params
from .dataflow import data_dependencies
from .fuse import FUSED_PREFIX, fused_runs
from .ir import IR, JOIN_TRIGGER_RULE, Task, Unit
from .names import IdAllocator, dag_id_for_path
from .outcome import outcome_plan
from .payload import compact_unit, is_gate, is_nested, loop_payload, plain, step_payload
from .presentation import decorate_units, doc_md, edge_labels, tags
from .regions import V1LoopBody, cyclic_regions, v1_loop_bodies

__all__ = ["dag_id_for", "lower", "step_graph"]

STEP_MODULE = "airflow_plugin.operators.step"
LOOP_MODULE = "airflow_plugin.operators.loop"
REGION_MODULE = "airflow_plugin.operators.region"
CURSOR_MODULE = "airflow_plugin.operators.cursor"
NESTED_MODULE = "airflow_plugin.operators.nested"
GATES_MODULE = "airflow_plugin.operators.gates"
# Trigger rule of loop tails: run after an empty fan-out (body skipped), not after a skipped head.
TAIL_TRIGGER_RULE = "none_failed_min_one_success"
# The largest limit a task may carry into the scheduler's SQL (a signed 32-bit column).
_MAX_SQL_INT = 2**31 - 1


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


def step_graph(playbook: Playbook) -> tuple[nx.DiGraph, list[str]]:
    """The routing graph over the steps a route from the entry reaches, and the steps left out."""
    reachable = StepGraph.of(playbook).reachable
    # Arcs are gathered per (source, target) first and the graph is built in two bulk calls:
    # networkx's per-edge lookups (has_edge, the edges view) dominated this on wide fan-outs.
    arcs_of: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for step in playbook.steps:
        if step.name not in reachable:
            continue
        mode = step.router.mode
        for arc in step.router.arcs:
            if arc.target not in reachable:
                continue
            arcs_of.setdefault((step.name, arc.target), []).append(
                {
                    "when": plain(arc.when),
                    "event": arc.event,
                    "origin": arc.origin,
                    "mode": mode,
                    "group": arc.group,
                }
            )
    graph = nx.DiGraph()
    graph.add_nodes_from(step.name for step in playbook.steps if step.name in reachable)
    graph.add_edges_from(
        (source, target, {"arcs": arcs}) for (source, target), arcs in arcs_of.items()
    )
    excluded = [name for name in playbook.step_names if name not in reachable]
    return graph, excluded


def _writes_ctx(step: Step, ctx_writes: Mapping[str, set[str]]) -> bool:
    return bool(ctx_writes.get(step.name))


def _static_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


class _Lowering:
    def __init__(self, playbook: Playbook, fuse: bool = False) -> None:
        self.playbook = playbook
        self.fuse = fuse  # lower chains of plain steps onto one task (lower/fuse.py)
        self.fused_ids: set[str] = set()
        self.order = {name: i for i, name in enumerate(playbook.step_names)}
        self.graph, self.excluded = step_graph(playbook)
        self.deps = data_dependencies(playbook, self.graph)
        self.ids = IdAllocator()
        self.units: list[Unit] = []
        self.unit_of: dict[str, Unit] = {}
        self._unit_position: dict[str, int] = {}

    # -- shapes -----------------------------------------------------------------------------------
    def plan(self) -> None:
        regions = cyclic_regions(self.playbook, self.graph)
        taken = {name for members in regions for name in members}
        bodies = {
            b.loop_step: b for b in v1_loop_bodies(self.playbook, self.graph, taken, self.order)
        }
        in_body = {
            name: b
            for b in bodies.values()
            for name in [*b.body, *([b.end_step] if b.end_step else [])]
        }
        region_of = {name: members for members in regions for name in members}
        fused = self._fused_runs(taken | set(in_body) | set(bodies)) if self.fuse else []
        region_of.update({name: members for members in fused for name in members})
        seen: set[str] = set()
        for step in self.playbook.steps:
            name = step.name
            if name not in self.graph or name in seen:
                continue
            if name in region_of:
                members = region_of[name]
                seen |= set(members)
                prefix = FUSED_PREFIX if members in fused else "region"
                self._unit("region", members, f"{prefix}_{members[0]}")
                if members in fused:
                    self.fused_ids.add(self.units[-1].id)
            elif name in bodies:
                body = bodies[name]
                members = [name, *body.body, *([body.end_step] if body.end_step else [])]
                seen |= set(members)
                self._unit("loop", sorted(members, key=self.order.__getitem__), name, v1=body)
            elif name in in_body:
                continue  # lowered with its loop step
            else:
                seen.add(name)
                self._unit(self._shape(step), [name], name)

    def _fused_runs(self, taken: set[str]) -> list[list[str]]:
        def fusable(name: str) -> bool:
            step = self.playbook.step(name)
            return name not in taken and step is not None and self._shape(step) == "step"

        names = self.playbook.step_names
        return fused_runs(self.graph, names, fusable=fusable, entry=self.playbook.entry)

    def _shape(self, step: Step) -> str:
        if step.loop is not None:
            if step.loop.cursor is not None or step.loop.mode == "cursor":
                return "cursor"
            if step.loop.mode == "sequential" and _writes_ctx(step, self.deps.ctx_writes):
                return "loop_seq"
            return "loop"
        if is_nested(step):
            return "nested"
        if is_gate(step):
            return "gate"
        return "step"

    def _unit(self, kind: str, members: list[str], name: str, v1: V1LoopBody | None = None) -> None:
        unit_id = self.ids.allocate(name)
        grouped = kind in ("loop", "cursor")
        unit = Unit(
            id=unit_id,
            kind=kind,
            steps=list(members),
            payload={},
            reads={},
            tasks=[],
            group=grouped,
        )
        unit.entry_task = unit.full_id("head") if grouped else unit_id
        unit.result_task = unit.full_id("tail") if grouped else unit_id
        unit.v1_body = v1
        if kind == "region":
            unit.inner_steps = list(members)
        elif v1 is not None:
            unit.inner_steps = list(v1.body)
        self.units.append(unit)
        for member in members:
            self.unit_of[member] = unit

    # -- payloads and tasks -------------------------------------------------------------------------
    def task_id(self, step: str) -> str | None:
        unit = self.unit_of.get(step)
        return unit.entry_task if unit else None

    def payload(self, name: str) -> dict[str, Any]:
        step = self.playbook.step(name)
        assert step is not None
        unit = self.unit_of.get(name)

        def task_id(target: str) -> str | None:
            # Arcs inside one unit (a region, a v1 loop body) are followed by that unit's task.
            return (
                None
                if unit is not None and self.unit_of.get(target) is unit
                else self.task_id(target)
            )

        payload = step_payload(self.playbook, step, task_id)
        if step.loop is not None:
            payload["loop"] = loop_payload(step)
        return payload

    def fill(self, unit: Unit) -> None:
        kind = unit.kind
        step = self.playbook.step(unit.steps[0])
        assert step is not None
        if kind == "region":
            self._fill_region(unit)
        elif unit.v1_body is not None:
            self._fill_v1_loop(unit, unit.v1_body)
        else:
            unit.payload = self.payload(step.name)
        if kind == "step":
            unit.tasks = [Task(unit.id, "NoetlStepOperator", STEP_MODULE)]
            unit.note = "step"
        elif kind == "nested":
            self._fill_nested(unit)
        elif kind == "gate":
            self._fill_gate(unit)
        elif kind == "loop_seq":
            unit.tasks = [Task(unit.id, "NoetlSequentialLoopOperator", LOOP_MODULE)]
            unit.note = "sequential loop writing ctx (iterates inside one task)"
        elif kind == "region":
            unit.tasks = [Task(unit.id, "NoetlRegionOperator", REGION_MODULE)]
            unit.note = f"cyclic region of {len(unit.steps)} step(s) (one task interprets it)"
            if unit.id in self.fused_ids:
                unit.note = f"fused run of {len(unit.steps)} step(s) (one task runs them in order)"
        elif kind == "loop":
            self._fill_loop(unit, step)
        elif kind == "cursor":
            self._fill_cursor(unit, step)

    def _fill_loop(self, unit: Unit, step: Step) -> None:
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

    def _fill_cursor(self, unit: Unit, step: Step) -> None:
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

    def _fill_nested(self, unit: Unit) -> None:
        tool = unit.payload.get("tool") or {}
        path = tool.get("path")
        child = (
            _child_dag_id(self.playbook, path)
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

    def _fill_gate(self, unit: Unit) -> None:
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

    def _fill_region(self, unit: Unit) -> None:
        members = set(unit.steps)
        entry = [
            m
            for m in unit.steps
            if m == self.playbook.entry or any(p not in members for p in self.graph.predecessors(m))
        ]
        steps = {m: self.payload(m) for m in unit.steps}
        exits = []
        for payload in steps.values():
            targets = [a["step"] for a in payload["routing"]["arcs"]]
            for rule in payload["case"]:
                targets += [t["step"] for t in rule["then"].get("next", [])]
            for target in targets:
                if (
                    target not in members
                    and self.task_id(target)
                    and self.task_id(target) not in exits
                ):
                    exits.append(self.task_id(target))
        region: RegionPayload = {
            "region": unit.id,
            "dialect": self.playbook.dialect,
            "entry": entry,
            "steps": steps,
            "exits": exits,
        }
        unit.payload = region

    def _fill_v1_loop(self, unit: Unit, body: V1LoopBody) -> None:
        payload = self.payload(body.loop_step)
        end = self.payload(body.end_step) if body.end_step else None
        end_step = self.playbook.step(body.end_step) if body.end_step else None
        payload["loop"]["body"] = {
            "routing": payload["routing"],
            "steps": {name: self.payload(name) for name in body.body},
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
    def wire(self) -> None:
        position = {u.id: i for i, u in enumerate(self.units)}
        predecessors = self.graph.pred
        for unit in self.units:
            # A set per unit: the join of a wide fan-out has thousands of arcs in.
            upstream = {self.unit_of[p].id for m in unit.steps for p in predecessors[m]}
            upstream.discard(unit.id)  # arcs inside a region or a loop body
            unit.upstream = sorted(upstream, key=position.__getitem__)
            if len(unit.upstream) > 1:
                unit.trigger_rule = JOIN_TRIGGER_RULE
        self.units = [self.units[i] for i in _topological_by_position(self.units, position)]

    def reads(self, unit: Unit) -> Reads:
        members = set(unit.steps)
        position = self._unit_position
        results: dict[str, str] = {}
        region_results: dict[str, str] = {}
        ctx: dict[str, list[str]] = {}
        vars_: dict[str, list[str]] = {}
        for member in unit.steps:
            for name in self.deps.results.get(member, []):
                if name in members:
                    continue
                producer = self.unit_of[name]
                inner = name in producer.inner_steps
                (region_results if inner else results)[name] = producer.result_task
            for table, out in ((self.deps.ctx, ctx), (self.deps.vars, vars_)):
                for var, writers in table.get(member, {}).items():
                    tasks = [self.unit_of[w] for w in writers if w not in members]
                    out.setdefault(var, [])
                    for producer in sorted(tasks, key=lambda u: position[u.id]):
                        if producer.result_task not in out[var]:
                            out[var].append(producer.result_task)
        # Empty tables are left out like default payload keys: the runtime reads an absent table
        # as empty (`reads.get(...) or {}`), and the DAG file shows only real dependencies.
        tables = {
            "results": dict(sorted(results.items(), key=lambda kv: self.order[kv[0]])),
            "ctx": {k: v for k, v in sorted(ctx.items()) if v},
            "vars": {k: v for k, v in sorted(vars_.items()) if v},
        }
        reads: Reads = {key: table for key, table in tables.items() if table}  # type: ignore[misc]
        if region_results:
            reads["region_results"] = dict(
                sorted(region_results.items(), key=lambda kv: self.order[kv[0]])
            )
        return reads

    def run(self) -> list[Unit]:
        self.plan()
        for unit in self.units:
            self.fill(unit)
        self.wire()
        self._unit_position = {u.id: i for i, u in enumerate(self.units)}
        for unit in self.units:
            unit.reads = self.reads(unit)
        return self.units


def _topological_by_position(units: list[Unit], position: dict[str, int]) -> list[int]:
    """Unit indexes in dependency order, the earliest unit in workflow order first whenever
    several are ready (Kahn's algorithm over a heap of positions: n log n, plain ints)."""
    downstream: list[list[int]] = [[] for _ in units]
    waiting = [0] * len(units)
    for index, unit in enumerate(units):
        for upstream in unit.upstream:
            downstream[position[upstream]].append(index)
        waiting[index] = len(unit.upstream)
    ready = [index for index, count in enumerate(waiting) if count == 0]  # ascending: a heap
    order: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for later in downstream[index]:
            waiting[later] -= 1
            if waiting[later] == 0:
                heapq.heappush(ready, later)
    if len(order) != len(units):
        # Cycles are regions by now (plan); a cycle left among units is a lowering bug.
        raise ValueError("task dependencies form a cycle")
    return order


def _workload_params(playbook: Playbook) -> dict[str, Any]:
    workload = playbook.workload if isinstance(playbook.workload, Mapping) else {}
    return {str(k): plain(v) for k, v in workload.items()}


def lower(
    playbook: Playbook,
    *,
    source: str,
    source_sha256: str,
    dag_id: str | None = None,
    fuse: bool = False,
) -> IR:
    """Lower one checked playbook. ``source`` is the display path written into the DAG file;
    ``fuse``: chains of plain steps become one task each (lower/fuse.py)."""
    lowering = _Lowering(playbook, fuse)
    units = lowering.run()
    graph = lowering.graph
    for unit in units:
        for member in unit.steps:
            node = graph.nodes[member]
            node["unit"] = unit.id
            node["shape"] = unit.kind
            node["task_id"] = lowering.task_id(member)
            node["payload"] = unit.payload if len(unit.steps) == 1 else lowering.payload(member)
            node["reads"] = {
                "results": lowering.deps.results.get(member, []),
                "ctx": lowering.deps.ctx.get(member, {}),
                "vars": lowering.deps.vars.get(member, {}),
            }
    # What the DAG file carries: each unit's payload without default-valued keys, so a reviewer
    # sees what the playbook says (graph nodes keep the full payloads for drawing).
    for unit in units:
        unit.payload = compact_unit(unit.payload)
    metadata = playbook.raw.get("metadata") if isinstance(playbook.raw, Mapping) else None
    description = metadata.get("description") if isinstance(metadata, Mapping) else None
    if not isinstance(description, str):
        description = playbook.raw.get("description") if isinstance(playbook.raw, Mapping) else None
    regions = [u.steps for u in units if u.kind == "region"]
    edge_labels(graph, lowering.unit_of)
    decorate_units(units)
    # Literals under credential-named keys never reach the DAG file (lower/credentials.py).
    secured = credential_params(_workload_params(playbook))
    params = secured.params
    payloads = {name: graph.nodes[name]["payload"] for u in units for name in u.steps}
    asset_reads = unit_assets(units, payloads, params, playbook.dialect)
    catalog = playbook.catalog_key
    owner = metadata.get("owner") if isinstance(metadata, Mapping) else None
    owner = " ".join(owner.split()) if isinstance(owner, str) and owner.strip() else None
    # Before emission: the plan sets the entry trigger rule of the units after a step that may
    # route a failure (lower/outcome.py).
    profile = profile_of(playbook.dialect, playbook.generation)
    outcome = outcome_plan(units, profile)
    return IR(
        dag_id=dag_id or dag_id_for(playbook, source.rsplit("/", 1)[-1].rsplit(".", 1)[0]),
        source=source,
        source_sha256=source_sha256,
        dialect=playbook.dialect,
        profile=profile.name,
        name=playbook.name,
        description=str(description) if isinstance(description, str) else None,
        params=params,
        masked_params=secured.masked,
        withheld=secured.withheld,
        tags=tags(playbook.dialect, catalog),
        graph=graph,
        units=units,
        regions=regions,
        excluded=lowering.excluded,
        entry=playbook.entry,
        doc_md=doc_md(
            name=playbook.name,
            description=description if isinstance(description, str) else None,
            catalog=catalog,
            source=source,
            dialect=playbook.dialect,
            profile=profile.name,
            sha256=source_sha256,
        ),
        owner=owner,
        asset_reads=asset_reads,
        outcome_task=outcome.task_id,
        outcome_watch=outcome.watch,
        outcome_after=outcome.after,
        outcome_fails_run=outcome.fails_run,
    )
