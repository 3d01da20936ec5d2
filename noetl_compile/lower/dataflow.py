"""Data dependencies: which step results, ctx writes and vars writes each step reads.

The analyze stage says where the templates are (``analyze.sites``), what each one references
(``analyze.expressions.scan_template``) and which steps write which ctx variable
(``analyze.dataflow.ctx_writes``). Here that becomes reaching definitions over the step graph:
a write of ``x`` at step W reaches step S when a route W -> ... -> S exists that passes no other
writer of ``x``. Lowering turns the reaching writers into the task ids a task pulls from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ..analyze.dataflow import ctx_writes, vars_writes
from ..analyze.expressions import scan_template
from ..analyze.names import JINJA_GLOBALS, RUNTIME_NAMES
from ..analyze.reach import Reachability
from ..analyze.sites import template_sites
from ..ast import Playbook

__all__ = ["StepReads", "data_dependencies", "reaching_definitions", "vars_writes"]


@dataclass
class StepReads:
    """What one step's templates read, before reaching definitions are applied."""

    results: set[str] = field(default_factory=set)  # step names
    ctx: set[str] = field(default_factory=set)  # ctx variable names
    vars: set[str] = field(default_factory=set)
    all_ctx: bool = False  # `ctx[name]` with a computed name: every ctx write may matter
    all_vars: bool = False


def step_ctx_writes(playbook: Playbook) -> dict[str, set[str]]:
    """step name -> ctx variables it writes (pipeline-local `iter.*` excluded)."""
    out: dict[str, set[str]] = {}
    for name, writes in ctx_writes(playbook).items():
        for write in writes:
            if write.step is not None and not write.pipeline_local:
                out.setdefault(write.step, set()).add(name)
    return out


def _workbook_name(step: Any) -> str | None:
    for task in step.tasks:
        if task.kind == "workbook":
            config = task.config if isinstance(task.config, Mapping) else {}
            name = task.name if task.name else config.get("name", config.get("task"))
            if isinstance(name, str):
                return name
    return None


def template_reads(playbook: Playbook, ctx_names: set[str]) -> dict[str, StepReads]:
    """Per step, the names its templates reference (its own and its workbook task's)."""
    steps = set(playbook.step_names)
    by_step: dict[str, list[Any]] = {name: [] for name in playbook.step_names}
    by_workbook: dict[str, list[Any]] = {}
    for site in template_sites(playbook):
        if site.step is not None:
            by_step.setdefault(site.step, []).append(site.value)
        elif site.workbook_task is not None:
            by_workbook.setdefault(site.workbook_task, []).append(site.value)
    reads: dict[str, StepReads] = {}
    for step in playbook.steps:
        found = StepReads()
        values = list(by_step.get(step.name, []))
        workbook = _workbook_name(step)
        if workbook:
            values += by_workbook.get(workbook, [])
        for value in values:
            for ref in scan_template(value).references:
                root, path = ref.root, tuple(ref.path or ())
                head = path[0] if path and isinstance(path[0], str) else None
                if root in steps:
                    if root != step.name:
                        found.results.add(root)
                elif root in ("ctx", "workload"):
                    if head is not None:
                        if root == "ctx" or head in ctx_names:
                            found.ctx.add(head)
                    elif root == "ctx":
                        found.all_ctx = True
                elif root == "vars":
                    if head is not None:
                        found.vars.add(head)
                    else:
                        found.all_vars = True
                elif root in ctx_names and root not in RUNTIME_NAMES and root not in JINJA_GLOBALS:
                    found.ctx.add(root)
        reads[step.name] = found
    return reads


def reaching_definitions(
    graph: nx.DiGraph, writes: Mapping[str, set[str]]
) -> dict[str, dict[str, set[str]]]:
    """IN sets: step -> variable -> the writer steps whose write can reach the step's start."""
    gen = {node: {(var, node) for var in writes.get(node, ())} for node in graph}
    killed = {node: set(writes.get(node, ())) for node in graph}
    incoming: dict[str, set[tuple[str, str]]] = {node: set() for node in graph}
    outgoing: dict[str, set[tuple[str, str]]] = {node: set(gen[node]) for node in graph}
    order = list(nx.dfs_preorder_nodes(graph)) if graph else []
    visited = set(order)
    order += [n for n in graph if n not in visited]
    changed = True
    while changed:
        changed = False
        for node in order:
            new_in: set[tuple[str, str]] = set()
            for pred in graph.predecessors(node):
                new_in |= outgoing[pred]
            if new_in != incoming[node]:
                incoming[node] = new_in
                new_out = gen[node] | {d for d in new_in if d[0] not in killed[node]}
                if new_out != outgoing[node]:
                    outgoing[node] = new_out
                changed = True
    result: dict[str, dict[str, set[str]]] = {}
    for node, defs in incoming.items():
        table: dict[str, set[str]] = {}
        for var, writer in defs:
            table.setdefault(var, set()).add(writer)
        result[node] = table
    return result


@dataclass
class DataDependencies:
    """Step-level data dependencies (before steps are grouped into tasks)."""

    results: dict[str, list[str]]  # step -> upstream steps whose result it reads
    ctx: dict[str, dict[str, list[str]]]  # step -> ctx var -> writer steps reaching it
    vars: dict[str, dict[str, list[str]]]  # step -> vars name -> writer steps reaching it
    ctx_writes: dict[str, set[str]]
    vars_writes: dict[str, set[str]]


def data_dependencies(playbook: Playbook, graph: nx.DiGraph) -> DataDependencies:
    """Reads of every step in ``graph`` resolved to the steps that produce them."""
    cwrites = {k: v for k, v in step_ctx_writes(playbook).items() if k in graph}
    vwrites = {k: v for k, v in vars_writes(playbook).items() if k in graph}
    ctx_names = set().union(*cwrites.values()) if cwrites else set()
    reads = template_reads(playbook, ctx_names)
    ctx_in = reaching_definitions(graph, cwrites)
    vars_in = reaching_definitions(graph, vwrites)
    position = {name: index for index, name in enumerate(playbook.step_names)}

    def ordered(names: set[str]) -> list[str]:
        return sorted(names, key=lambda n: position.get(n, 0))

    upstream = Reachability(graph, graph.predecessors, graph.successors)
    results, ctx, vars_ = {}, {}, {}
    for node in graph:
        found = reads.get(node, StepReads())
        results[node] = ordered({r for r in found.results if upstream.reaches(r, node)})
        wanted_ctx = set(ctx_in[node]) if found.all_ctx else found.ctx
        ctx[node] = {
            var: ordered(ctx_in[node][var]) for var in sorted(wanted_ctx) if ctx_in[node].get(var)
        }
        wanted_vars = set(vars_in[node]) if found.all_vars else found.vars
        vars_[node] = {
            var: ordered(vars_in[node][var])
            for var in sorted(wanted_vars)
            if vars_in[node].get(var)
        }
    return DataDependencies(results, ctx, vars_, cwrites, vwrites)
