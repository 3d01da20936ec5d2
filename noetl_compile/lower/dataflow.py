"""Data dependencies: which step results, ctx writes and vars writes each step reads.

The analyze stage says where the templates are (``analyze.sites``), what each one references
(``analyze.expressions.scan_template``) and which steps write which ctx variable
(``analyze.dataflow.ctx_writes``). Here that becomes reaching definitions over the step graph:
a write of ``x`` at step W reaches step S when a route W -> ... -> S exists that passes no other
writer of ``x``. Lowering turns the reaching writers into the task ids a task pulls from.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from ..analyze.dataflow import ctx_writes, vars_writes
from ..analyze.expressions import scan_template
from ..analyze.flowgraph import StepGraph
from ..analyze.names import JINJA_GLOBALS, RUNTIME_NAMES
from ..analyze.sites import template_sites
from ..ast import Playbook
from ..engine_profiles import profile_of

__all__ = ["StepReads", "data_dependencies", "reaching_definitions", "vars_writes"]


@dataclass
class StepReads:
    """What one step's templates read, before reaching definitions are applied."""

    results: set[str] = field(default_factory=set)  # step names
    ctx: set[str] = field(default_factory=set)  # ctx variable names
    vars: set[str] = field(default_factory=set)
    all_ctx: bool = False  # `ctx[name]` with a computed name: every ctx write may matter
    all_vars: bool = False
    # `{{ ctx }}` / `{{ workload }}` whole where step results are execution variables: every
    # earlier step's result may be read
    all_results: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.results
            or self.ctx
            or self.vars
            or self.all_ctx
            or self.all_vars
            or self.all_results
        )


def results_in_ctx(playbook: Playbook) -> bool:
    """Whether a step's result is an execution variable (``{{ ctx.<step> }}``): NoETL's
    canonical engine (138c10ed ExecutionState.mark_step_completed: ``variables[step] = result``;
    recorded: tests/differential/cases/ctx/): ``step_results_in_variables`` of its profile."""
    return profile_of(playbook.dialect, playbook.generation).step_results_in_variables


def step_ctx_writes(playbook: Playbook) -> dict[str, set[str]]:
    """step name -> ctx variables it writes (pipeline-local `iter.*` excluded)."""
    out: dict[str, set[str]] = {}
    for name, writes in ctx_writes(playbook).items():
        for write in writes:
            if write.step is not None and not write.pipeline_local:
                out.setdefault(write.step, set()).add(name)
    return out


def loop_variables(playbook: Playbook) -> dict[str, set[str]]:
    """loop step -> the execution variables its iterations leave behind: NoETL's canonical engine
    writes the iterator and ``loop_index`` into the variables as it issues each item (138c10ed
    ``state.variables[step.loop.iterator] = item``; recorded: ctx/ctx_after_loop), so after the
    loop ``{{ ctx.<iterator> }}`` holds the last item."""
    if not results_in_ctx(playbook):
        return {}
    return {
        step.name: {step.loop.iterator, "loop_index"}
        for step in playbook.steps
        if step.loop is not None
        and step.loop.iterator
        and step.loop.cursor is None
        and not step.loop.body_via_next
    }


def _workbook_name(step: Any) -> str | None:
    for task in step.tasks:
        if task.kind == "workbook":
            config = task.config if isinstance(task.config, Mapping) else {}
            name = task.name if task.name else config.get("name", config.get("task"))
            if isinstance(name, str):
                return name
    return None


def template_reads(
    playbook: Playbook, ctx_names: set[str], vars_names: Iterable[str] = ()
) -> dict[str, StepReads]:
    """Per step, the names its templates reference (its own and its workbook task's); steps
    whose templates read nothing are left out. ``vars_names``: case-v2 ``vars`` written
    anywhere, read by bare name too (dc55c492 stores them in the execution variables, which its
    render context spreads to the top level: recorded case_v2/vars_bare_in_args)."""
    steps = set(playbook.step_names)
    step_vars = results_in_ctx(playbook)
    profile = profile_of(playbook.dialect, playbook.generation)
    bare_vars = set(vars_names) if profile.vars_flattened else set()
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
                        if step_vars and head in steps and head != step.name:
                            found.results.add(head)
                    else:
                        found.all_ctx = found.all_ctx or root == "ctx"
                        found.all_results = found.all_results or step_vars
                elif root == "results" and profile.results_namespace:
                    # v1 `results.<step>` (58c2a16b build_rendering_context): that step's result;
                    # `results` whole or by a computed name: every earlier step's.
                    if head in steps:
                        if head != step.name:
                            found.results.add(head)
                    else:
                        found.all_results = True
                elif root == "vars":
                    if head is not None:
                        found.vars.add(head)
                    else:
                        found.all_vars = True
                elif root not in RUNTIME_NAMES and root not in JINJA_GLOBALS:
                    if root in ctx_names:
                        found.ctx.add(root)
                    if root in bare_vars:
                        found.vars.add(root)
        if found:
            reads[step.name] = found
    return reads


def reaching_definitions(
    graph: nx.DiGraph, writes: Mapping[str, set[str]], wanted: Mapping[str, Iterable[str]]
) -> dict[str, dict[str, set[str]]]:
    """For each step and variable in ``wanted``: the writer steps whose write of the variable can
    reach the step's start (a route of at least one edge through no other writer of it). Pairs
    no write reaches are left out.

    Demand-driven, one variable at a time: only the steps between a reader and the writers that
    reach it are visited, never the whole graph with every variable. A dense analysis holds every
    variable at every step; a chain whose steps each write a variable the next one reads made it
    quadratic in the playbook's size.
    """
    writers_of: dict[str, set[str]] = {}
    for node, names in writes.items():
        if node in graph:
            for var in names:
                writers_of.setdefault(var, set()).add(node)
    readers_of: dict[str, list[str]] = {}
    for node, names in wanted.items():
        if node in graph:
            for var in names:
                if var in writers_of:
                    readers_of.setdefault(var, []).append(node)
    result: dict[str, dict[str, set[str]]] = {}
    for var in sorted(readers_of):
        readers = readers_of[var]
        reaching = _reaching_writers(graph, writers_of[var], readers)
        for node in readers:
            if reaching.get(node):
                result.setdefault(node, {})[var] = reaching[node]
    return result


def _reaching_writers(
    graph: nx.DiGraph, writers: set[str], readers: list[str]
) -> dict[str, set[str]]:
    """IN sets of one variable over the region that matters: the readers and every step a
    reader's start depends on (walking back from the readers through steps that do not write
    the variable; a writer's OUT is itself, so the walk stops there)."""
    region: set[str] = set(readers)
    frontier = list(readers)
    while frontier:
        node = frontier.pop()
        for predecessor in graph.predecessors(node):
            if predecessor not in writers and predecessor not in region:
                region.add(predecessor)
                frontier.append(predecessor)
    # A work list of what is new inside the region: IN(n) is the union over predecessors p of
    # {p} for a writer, IN(p) otherwise; the sets only grow, so a step passes on only what it
    # has not passed on before.
    incoming: dict[str, set[str]] = {}
    queue: deque[str] = deque()
    pending: dict[str, set[str]] = {}

    def arrive(node: str, found: set[str]) -> None:
        waiting = pending.get(node)
        if waiting is None:
            pending[node] = set(found)
            queue.append(node)
        else:
            waiting |= found

    for writer in writers:
        for successor in graph.successors(writer):
            if successor in region:
                arrive(successor, {writer})
    while queue:
        node = queue.popleft()
        arrived = pending.pop(node)
        known = incoming.setdefault(node, set())
        fresh = arrived - known
        if not fresh:
            continue
        known |= fresh
        if node not in writers:
            for successor in graph.successors(node):
                if successor in region:
                    arrive(successor, fresh)
    return incoming


@dataclass
class DataDependencies:
    """Step-level data dependencies (before steps are grouped into tasks)."""

    # Steps without an entry read nothing of that kind.
    results: dict[str, list[str]]  # step -> upstream steps whose result it reads
    ctx: dict[str, dict[str, list[str]]]  # step -> ctx var -> writer steps reaching it
    vars: dict[str, dict[str, list[str]]]  # step -> vars name -> writer steps reaching it
    ctx_writes: dict[str, set[str]]
    vars_writes: dict[str, set[str]]


def data_dependencies(playbook: Playbook, graph: nx.DiGraph) -> DataDependencies:
    """Reads of every step in ``graph`` resolved to the steps that produce them."""
    cwrites = {k: v for k, v in step_ctx_writes(playbook).items() if k in graph}
    vwrites = {k: v for k, v in vars_writes(playbook).items() if k in graph}
    # What reaches a reader also counts the variables a loop leaves behind (its iterator and
    # `loop_index`); `cwrites` itself stays the steps' own writes (it picks loop operators).
    reaching_writes = {k: set(v) for k, v in cwrites.items()}
    left_behind = loop_variables(playbook)
    for name, names in left_behind.items():
        if name in graph:
            reaching_writes.setdefault(name, set()).update(names)
    ctx_names = set().union(*reaching_writes.values()) if reaching_writes else set()
    vars_names = set().union(*vwrites.values()) if vwrites else set()
    reads = template_reads(playbook, ctx_names, vars_names)
    for name, names in left_behind.items():
        if name in reads:  # a loop's own iterator is its item, never an earlier loop's last
            reads[name].ctx -= names
    ctx_in = reaching_definitions(
        graph, reaching_writes, {n: ctx_names if f.all_ctx else f.ctx for n, f in reads.items()}
    )
    vars_in = reaching_definitions(
        graph, vwrites, {n: vars_names if f.all_vars else f.vars for n, f in reads.items()}
    )
    position = {name: index for index, name in enumerate(playbook.step_names)}

    def ordered(names: set[str]) -> list[str]:
        return sorted(names, key=lambda n: position.get(n, 0))

    # The routes check has walked already. ``graph`` holds the steps reachable from the entry,
    # and every route from one of them stays among them, so a route in the whole step graph
    # between two of its steps is a route in ``graph``.
    flow = StepGraph.of(playbook)
    results: dict[str, list[str]] = {}
    ctx: dict[str, dict[str, list[str]]] = {}
    vars_: dict[str, dict[str, list[str]]] = {}
    for node, found in reads.items():  # steps that read nothing get no entry
        if node not in graph:
            continue
        wanted_results = set(playbook.step_names) - {node} if found.all_results else found.results
        producers = {r for r in wanted_results if r in graph and flow.is_ancestor(r, node)}
        if producers:
            results[node] = ordered(producers)
        for reaching, wanted, every, out in (
            (ctx_in.get(node, {}), found.ctx, found.all_ctx, ctx),
            (vars_in.get(node, {}), found.vars, found.all_vars, vars_),
        ):
            table = {
                var: ordered(reaching[var])
                for var in sorted(set(reaching) if every else wanted)
                if reaching.get(var)
            }
            if table:
                out[node] = table
    return DataDependencies(results, ctx, vars_, cwrites, vwrites)
