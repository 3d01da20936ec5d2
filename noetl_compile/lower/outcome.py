"""The DAG's outcome task and the trigger rules after a step that may route a failure.

A step whose call failed is a failed task instance on Airflow, even where its routing takes the
failure (an arc or case rule that addresses ``call.error``; in the canonical engine and NoETL 5
every arc, since 138c10ed evaluates a failed step's arcs like a successful one's). Its route then
runs through trigger rules, not by pretending success: every unit right after such a step gets
``trigger_rule="none_skipped"`` on its entry task (``all_done`` for a join), and the runtime's
guard (``airflow_plugin/operators/failure_routes.py``) skips it unless the rule it stands in for
(``all_success``, or a join's ``none_failed_min_one_success``) would have run it, a routed
failure counting as the success of the branch it chose.

Airflow decides a run's state from its leaves, so such a DAG ends with an outcome task after the
leaves, in the pattern Airflow's own system tests call the *watcher*: ``all_done``, the one leaf;
it fails the run when a task failed without a routing that took it, and, where a routing took it,
as the engine's profile says (``routed_failure_fails_run``: the canonical engine marks the
execution failed at the first ``call.error``, 138c10ed engine.py:5996; case-v2 dc55c492 and v1
58c2a16b end it completed). A region whose member may route a failure is such a unit too: the
region finishes its routing, then its task fails (``operators/region.py``). It also watches
the other regions of an engine that fails such runs (DAG files compiled before regions turned
red left the region's task green, with ``status: error`` in its output).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine_profiles import EngineProfile
from .ir import Unit

__all__ = [
    "FAILURE_TOLERANT_JOIN_RULE",
    "FAILURE_TOLERANT_RULE",
    "OUTCOME_TASK_ID",
    "OutcomePlan",
    "call_cannot_fail",
    "outcome_plan",
    "step_routes_failure",
]

OUTCOME_TASK_ID = "noetl_outcome"
# The entry trigger rule of a unit right after a step that may route a failure; the runtime
# guards exactly the tasks that carry one (failure_routes.FAILURE_TOLERANT_RULES, kept equal by
# tests/test_outcome_task.py). `none_skipped` starts the task after a success or a failure, and
# lets the scheduler skip it, without a start, after a skip (a branch not taken stays free, as
# it is with `all_success`); a join waits for all its branches, some skipped: `all_done`.
FAILURE_TOLERANT_RULE = "none_skipped"
FAILURE_TOLERANT_JOIN_RULE = "all_done"


@dataclass
class OutcomePlan:
    """The outcome task (no task when ``watch`` is empty and no step routes a failure)."""

    task_id: str = ""
    watch: dict[str, str] = field(default_factory=dict)  # result task id -> step/region name
    after: list[str] = field(default_factory=list)  # the leaf units it runs after
    fails_run: bool = True  # the profile's routed_failure_fails_run
    tolerant: list[str] = field(default_factory=list)  # units whose entry gets a tolerant rule


def _mentions_error(when: Any) -> bool:
    # Static and generous on purpose: the runtime's `addresses_failure` reads the Jinja AST, and
    # a unit made failure-tolerant here that never sees a routed failure loses nothing (the
    # guard then answers as the plain rule would).
    return when is not None and "error" in str(when)


def routes_failure(unit: Unit, profile: EngineProfile) -> bool:
    """May this unit's step end with a failed call that its routing takes on? A region may
    when one of its members may: its task then fails once the region finished its routing."""
    if unit.kind == "region":
        members = (unit.payload.get("steps") or {}).values()
        return any(step_routes_failure(m, profile) for m in members if isinstance(m, Mapping))
    if unit.kind != "step":
        return False
    return step_routes_failure(unit.payload, profile)


# What a step that only routes carries: its name, dialect, a bare noop tool and its arcs.
_ROUTER_KEYS = frozenset({"step", "dialect", "tool", "routing"})


def call_cannot_fail(payload: Mapping[str, Any]) -> bool:
    """A step whose only call is a bare ``noop`` (or that has no call at all: a v1 router) ends
    every run ``ok``: ``tools/noop.py`` returns its result without a condition, and nothing is
    rendered before it (no input, args, set, loop, guard, policy or tool field to render). Its
    arcs are still evaluated, with ``call.done``; an arc that cannot render fails the task
    itself, a failure no routing takes. So it never routes a failure, whatever the engine:
    the canonical ``start`` of many playbooks needs no outcome task and leaves its targets'
    trigger rules alone."""
    if not _ROUTER_KEYS.issuperset(payload):
        return False
    tool = payload.get("tool")
    return tool is None or (isinstance(tool, Mapping) and dict(tool) == {"kind": "noop"})


def step_routes_failure(payload: Mapping[str, Any], profile: EngineProfile) -> bool:
    if call_cannot_fail(payload):
        return False
    arcs = (payload.get("routing") or {}).get("arcs") or []
    rules = payload.get("case") or []
    if profile.failed_call_takes_every_arc:
        return bool(arcs or rules)
    whens = [a.get("when") for a in arcs if isinstance(a, Mapping)]
    # A case rule takes a failure only where it also says where to go (one that only retries
    # gives the failure back when it gives up).
    whens += [r.get("when") for r in rules if isinstance(r, Mapping) and _routes(r.get("then"))]
    return any(_mentions_error(when) for when in whens)


def _routes(then: Any) -> bool:
    actions = then if isinstance(then, list) else [then]
    return any(isinstance(action, Mapping) and action.get("next") for action in actions)


def outcome_plan(units: Sequence[Unit], profile: EngineProfile) -> OutcomePlan:
    """The outcome task and the tolerant units of this DAG, and sets each tolerant unit's
    entry trigger rule; an empty plan when no failure can route on."""
    watch: dict[str, str] = {}
    routing = set()
    for unit in units:
        if routes_failure(unit, profile):
            watch[unit.result_task] = unit.id if unit.kind == "region" else unit.steps[0]
            routing.add(unit.id)
        elif unit.kind == "region" and profile.routed_failure_fails_run:
            watch[unit.result_task] = unit.id
    if not watch:
        return OutcomePlan()
    tolerant = [u.id for u in units if routing.intersection(u.upstream)]
    for unit in units:
        if unit.id in tolerant:
            join = len(unit.upstream) > 1
            unit.trigger_rule = FAILURE_TOLERANT_JOIN_RULE if join else FAILURE_TOLERANT_RULE
    has_downstream = {up for unit in units for up in unit.upstream}
    leaves = [u.id for u in units if u.id not in has_downstream]
    taken = {u.full_id(t.task_id) for u in units for t in u.tasks} | {u.id for u in units}
    task_id, counter = OUTCOME_TASK_ID, 1
    while task_id in taken:
        counter += 1
        task_id = f"{OUTCOME_TASK_ID}_{counter}"
    return OutcomePlan(task_id, watch, leaves, profile.routed_failure_fails_run, tolerant)
