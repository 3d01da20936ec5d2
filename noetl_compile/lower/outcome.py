"""The DAG's outcome task: a run ends failed when a step's call failed, as NoETL ends it.

NoETL's canonical engine (138c10ed) follows a failed step's arcs like a successful step's (an arc
without ``when`` matches; a condition sees ``event.name == 'call.error'``) and marks the
execution failed at the error all the same. On Airflow the step's task then succeeds (its output
says ``status: error``) so that Airflow's branching takes the route, and the run's final state
comes from an outcome task after the leaves, in the pattern Airflow's own system tests call the
*watcher*: trigger rule ``none_failed`` (a failed or upstream-failed leaf fails it without a run,
so a step that failed outright still fails the run), and when it runs it fails if one of the
watched steps' outputs records a failed call, naming the step and the error. Recovery steps
still run to their end: the outcome task waits for every leaf.

Only canonical DAGs get one, and only where a failed call can route on (a step with arcs, or a
region of steps): the older engines end such a run successful (case-v2 at dc55c492 reports
``completed`` after a ``call.error`` case rule routed; case_v2/case_error_route).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..engine_profiles import EngineProfile
from .ir import Unit

__all__ = ["OUTCOME_TASK_ID", "outcome_plan"]

OUTCOME_TASK_ID = "noetl_outcome"


def outcome_plan(
    units: Sequence[Unit], profile: EngineProfile
) -> tuple[str, dict[str, str], list[str]]:
    """(task id, watched result task id -> step or region name, leaf unit ids); an empty watch
    when the DAG needs no outcome task: only where a failed call goes on along the arcs
    (``profile.failed_call_takes_every_arc``) can a run whose leaves succeeded have failed."""
    if not profile.failed_call_takes_every_arc:
        return "", {}, []
    watch: dict[str, str] = {}
    for unit in units:
        arcs = ((unit.payload.get("routing") or {}).get("arcs")) if unit.kind == "step" else None
        if arcs or unit.kind == "region":
            watch[unit.result_task] = unit.steps[0] if unit.kind == "step" else unit.id
    if not watch:
        return "", {}, []
    has_downstream = {up for unit in units for up in unit.upstream}
    leaves = [u.id for u in units if u.id not in has_downstream]
    taken = {u.full_id(t.task_id) for u in units for t in u.tasks} | {u.id for u in units}
    task_id, counter = OUTCOME_TASK_ID, 1
    while task_id in taken:
        counter += 1
        task_id = f"{OUTCOME_TASK_ID}_{counter}"
    return task_id, watch, leaves
