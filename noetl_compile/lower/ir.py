"""The intermediate representation between the AST and the emitted DAG file.

Two layers, both dialect-free and JSON-serialisable:

* the **step graph** (``IR.graph``, a networkx ``DiGraph``): one node per reachable step with its
  payload, shape (plain, loop, sequential loop, cursor loop, nested call, gate), region and data
  dependencies; one edge per routing relation with the arcs behind it (guards, ``loop.done``,
  exclusive/inclusive mode of the source);
* the **task plan** (``IR.units``): how the step graph lowers onto Airflow — each ``Unit`` is
  one Airflow task or one task group, with the operator that runs it, its upstream units, its
  trigger rule and the payload/reads it receives. ``emit`` only prints units.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

__all__ = ["IR", "JOIN_TRIGGER_RULE", "UNIT_KINDS", "Task", "Unit"]

# A task with several upstreams after routing decisions runs when at least one of them ran.
JOIN_TRIGGER_RULE = "none_failed_min_one_success"

UNIT_KINDS = (
    "step",  # one step -> one NoetlStepOperator
    "loop",  # loop.in -> TaskGroup: head -> mapped body -> tail
    "loop_seq",  # sequential loop whose body writes ctx -> one task iterating inside
    "cursor",  # loop.cursor -> TaskGroup: head -> mapped worker slots -> tail
    "region",  # a strongly connected component of the step graph -> one interpreting task
    "nested",  # tool.kind playbook -> TriggerDagRunOperator subclass
    "gate",  # tool.kind gate -> HITL operator / deferrable sensor subclass
)


@dataclass(slots=True)  # one per step of a playbook: no __dict__ each
class Task:
    """One Airflow task inside a unit."""

    task_id: str  # local id (inside the unit's group when the unit is a group)
    operator: str  # class name, e.g. "NoetlStepOperator"
    module: str  # import path of the class
    kwargs: dict[str, Any] = field(default_factory=dict)  # plain data only
    mapped: dict[str, str] | None = None  # expand kwarg -> local task id whose output is mapped
    trigger_rule: str | None = None
    upstream: list[str] = field(default_factory=list)  # local task ids inside the same group
    outlets: list[str] = field(default_factory=list)  # asset URIs the task writes (lower/assets)
    inlets: list[str] = field(default_factory=list)  # asset URIs the task reads (lower/assets)


@dataclass(slots=True)  # one per step of a playbook: no __dict__ each
class Unit:
    """One step (or group of steps) lowered onto one Airflow task or task group."""

    id: str  # task id, or group id for grouped units
    kind: str
    steps: list[str]  # member steps in workflow order
    payload: dict[str, Any]
    reads: dict[str, Any]
    tasks: list[Task]
    group: bool = False  # the tasks live in a TaskGroup named ``id``
    upstream: list[str] = field(default_factory=list)  # unit ids
    entry_task: str = ""  # full task id routing targets and upstream edges point at
    result_task: str = ""  # full task id whose XCom holds the step result and routing
    trigger_rule: str | None = None  # of the entry task
    note: str = ""  # one line for the generated file: what this unit is
    inner_steps: list[str] = field(default_factory=list)  # results live in XCom "results"[step]
    v1_body: Any = field(default=None, repr=False)  # regions.V1LoopBody of a v1 loop unit
    edge_labels: dict[str, Any] = field(default_factory=dict)  # upstream unit id -> branch label
    # A fused loop (lower/fuse.py loop_folds): the steps its head runs before the loop step
    # and its tail after it; ``steps`` is lead + [loop step] + trail.
    lead: list[str] = field(default_factory=list)
    trail: list[str] = field(default_factory=list)

    def full_id(self, local: str) -> str:
        return f"{self.id}.{local}" if self.group else local


@dataclass
class IR:
    dag_id: str
    source: str  # display path of the playbook (relative to the compile root)
    source_sha256: str
    dialect: str
    # The engine profile the playbook runs under (engine_profiles: its generation, else its
    # dialect), named in the DAG file so a reader knows whose semantics the steps follow.
    profile: str
    name: str | None
    description: str | None
    params: dict[str, Any]  # workload key -> default (plain data)
    tags: list[str]
    graph: nx.DiGraph  # the step graph (reachable steps only)
    units: list[Unit]  # topological order
    regions: list[list[str]]  # cyclic regions (SCCs), each in workflow order
    excluded: list[str]  # steps not compiled because no route reaches them
    entry: str | None
    doc_md: str = ""  # the DAG's Docs panel (presentation.doc_md)
    owner: str | None = None  # metadata.owner, the tasks' Airflow owner
    asset_reads: list[str] = field(default_factory=list)  # table URIs its SQL reads (lower/assets)
    # Params shown masked in the trigger form, and literals under credential keys left out of
    # the file (lower/credentials.py; compile reports each as X602).
    masked_params: frozenset[str] = frozenset()
    withheld: list[Any] = field(default_factory=list)
    # Asset URIs the DAG is scheduled on (`compile --schedule-on-assets`); empty: schedule=None.
    schedule_assets: list[str] = field(default_factory=list)
    # The outcome task (lower/outcome.py): its task id, the result tasks it watches (task id ->
    # step or region name), the leaf units it runs after, and whether a failed call the routing
    # took still fails the run (the profile's routed_failure_fails_run); no task when
    # ``outcome_watch`` is empty.
    outcome_task: str = ""
    outcome_watch: dict[str, str] = field(default_factory=dict)
    outcome_after: list[str] = field(default_factory=list)
    outcome_fails_run: bool = True

    @property
    def asset_writes(self) -> list[str]:
        out: list[str] = []
        for unit in self.units:
            for task in unit.tasks:
                out += [uri for uri in task.outlets if uri not in out]
        return out

    def unit(self, unit_id: str) -> Unit:
        for unit in self.units:
            if unit.id == unit_id:
                return unit
        raise KeyError(unit_id)

    def unit_of_step(self, step: str) -> Unit:
        for unit in self.units:
            if step in unit.steps:
                return unit
        raise KeyError(step)
