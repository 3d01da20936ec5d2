"""AST -> IR: the step graph, its regions and loop shapes, and the task plan (design brief §3).

``lower(playbook, ...)`` is the stage's one public verb. It decides, for every reachable step,
which lowering row of the table applies, and records the result as ``Unit``s that ``emit``
prints without further decisions.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

import networkx as nx

from ..analyze.flowgraph import StepGraph
from ..ast import Playbook, Step
from ..engine_profiles import profile_of
from ..step_contract import Reads
from .assets import unit_assets
from .credentials import credential_params
from .dataflow import data_dependencies
from .fuse import FUSED_PREFIX, fused_runs, loop_folds
from .ir import IR, JOIN_TRIGGER_RULE, Unit
from .names import IdAllocator
from .outcome import call_cannot_fail, outcome_plan, step_routes_failure
from .payload import (
    compact_step,
    compact_unit,
    is_gate,
    is_nested,
    loop_payload,
    plain,
    step_payload,
)
from .presentation import decorate_units, doc_md, edge_labels, tags
from .regions import V1LoopBody, cyclic_regions, v1_loop_bodies
from .unit_tasks import dag_id_for, fill_unit

__all__ = ["dag_id_for", "lower", "step_graph"]


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
        taken = taken | set(in_body) | set(bodies)
        folds = self._loop_folds(taken) if self.fuse else {}
        folded = {m for lead, trail in folds.values() for m in [*lead, *trail]}
        fused = self._fused_runs(taken | folded) if self.fuse else []
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
            elif name in in_body or name in folded:
                continue  # lowered with its loop step
            elif name in folds:
                lead, trail = folds[name]
                seen.update(lead, trail, [name])
                self._unit("loop", [*lead, name, *trail], name)
                self.units[-1].lead, self.units[-1].trail = list(lead), list(trail)
            else:
                seen.add(name)
                self._unit(self._shape(step), [name], name)

    def _fused_runs(self, taken: set[str]) -> list[list[str]]:
        def fusable(name: str) -> bool:
            step = self.playbook.step(name)
            return name not in taken and step is not None and self._shape(step) == "step"

        names = self.playbook.step_names
        return fused_runs(self.graph, names, fusable=fusable, entry=self.playbook.entry)

    def _loop_folds(self, taken: set[str]) -> dict[str, tuple[list[str], list[str]]]:
        """Under fusion, the bare entry step a loop's head runs and the plain chain its tail
        runs (lower/fuse.py ``loop_folds``)."""
        profile = profile_of(self.playbook.dialect, self.playbook.generation)
        results_read = {name for reads in self.deps.results.values() for name in reads}

        def step_of(name: str) -> Step | None:
            return self.playbook.step(name) if name not in taken else None

        def loops(name: str) -> bool:
            step = step_of(name)
            return step is not None and self._shape(step) == "loop"

        def fusable(name: str) -> bool:
            step = step_of(name)
            return step is not None and self._shape(step) == "step"

        def lead_ok(name: str, loop: str) -> bool:
            # What the head runs of it is its events: a bare noop (it cannot fail and renders
            # nothing), whose result nobody reads and whose arc hands the loop nothing.
            payload = compact_step(self.payload(name))  # the keys it says, defaults left out
            arcs = (payload.get("routing") or {}).get("arcs") or []
            return (
                call_cannot_fail(payload)
                and name not in results_read
                and all(set(arc) <= {"step", "task_id"} for arc in arcs)
                and [arc["step"] for arc in arcs] == [loop]
            )

        def trail_ok(name: str) -> bool:
            return not step_routes_failure(self.payload(name), profile)

        return loop_folds(
            self.graph,
            self.playbook.step_names,
            loops=loops,
            fusable=fusable,
            lead_ok=lead_ok,
            trail_ok=trail_ok,
            entry=self.playbook.entry,
        )

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
        fill_unit(self, unit)

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
            # A fused loop's trail runs in its tail, not where routing into the unit lands.
            node["task_id"] = unit.result_task if member in unit.trail else lowering.task_id(member)
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
