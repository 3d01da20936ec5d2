"""A handled failure on Airflow: the failed step's task is red, its route runs by trigger rules.

A step whose call failed while its routing took the failure (an arc or case rule that addresses
``call.error``, or every arc in the engines that evaluate them after a failure) ends its task
*failed*: red in the grid, its traceback in the task log, Airflow's callbacks applied. It first
pushes its output (``status: error``, the ``error``, its ``next`` and ``routed_to``: the task ids
it chose). The compiler gives the tasks right after such a step ``trigger_rule="none_skipped"``
(a join ``all_done``; ``noetl_compile/lower/outcome.py``), so they are scheduled once the step
has ended, failed or not (after a skipped step the scheduler still skips them without a start);
:func:`upstream_verdict` then decides, before the task does anything, what the rule
it stands in for would have decided, a routed failure counting as the success of the branch it
chose:

* a task the routing did not choose, or whose upstream was skipped, skips itself;
* an upstream that failed without routing (or was upstream-failed) skips it too: Airflow cannot
  make a running task upstream-failed, so the outcome task after the leaves reads the task states
  and fails the run naming that failure (:func:`run_failures`);
* otherwise it runs: every upstream succeeded or routed here (``all_success``), or, for a join,
  at least one did and none failed (``none_failed_min_one_success``).

Airflow decides a run's state from its leaves; the outcome task is the one leaf of such a DAG,
so a red task in the middle fails the run only when NoETL's final status says so
(``routed_failure_fails_run`` of the engine profile: canonical and NoETL 5 end failed, case-v2
and v1 end completed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "FAILURE_TOLERANT_RULES",
    "ROUTED_TO",
    "error_text",
    "handled_failure",
    "routes_by_trigger_rules",
    "run_failures",
    "task_states",
    "upstream_verdict",
]

# The trigger rules the compiler gives a task right after a step that may route a failure: one
# upstream, a join (kept equal to lower/outcome.py's by tests/test_outcome_task.py).
FAILURE_TOLERANT_RULES = frozenset({"none_skipped", "all_done"})
# The output key of a failed step whose routing took the failure: the task ids it chose.
ROUTED_TO = "routed_to"

_FAILED = frozenset({"failed", "upstream_failed"})


def routes_by_trigger_rules(task: Any) -> bool:
    """Were the tasks after ``task`` compiled to start after its failure (each with a tolerant
    rule and the guard of this module)? DAG files compiled before that kept a routed failure's
    task green, so that its branch could run."""
    downstream = list(getattr(task, "downstream_list", None) or [])
    return bool(downstream) and all(
        getattr(t, "trigger_rule", None) in FAILURE_TOLERANT_RULES for t in downstream
    )


def handled_failure(output: Any) -> bool:
    """Does this output belong to a failed step whose routing took the failure?"""
    return (
        isinstance(output, Mapping)
        and output.get("status") == "error"
        and isinstance(output.get(ROUTED_TO), list)
    )


def _base_task_id(key: str, known: Iterable[str]) -> str:
    """``get_task_states`` names a mapped instance ``<task_id>_<map_index>``."""
    if key in known:
        return key
    head, _, index = key.rpartition("_")
    return head if index.isdigit() and head in known else key


def task_states(raw: Mapping[str, Any], task_ids: Iterable[str]) -> dict[str, list[str]]:
    """Task id -> the states of its instances (one, or one per mapped instance), from
    ``get_task_states``' answer for one run; a task with no instance is left out."""
    known = set(task_ids)
    states: dict[str, list[str]] = {}
    for key, state in raw.items():
        states.setdefault(_base_task_id(key, known), []).append(str(state) if state else "none")
    return states


def upstream_verdict(
    me: str,
    upstream: Iterable[str],
    states: Mapping[str, list[str]],
    outputs: Mapping[str, Any],
    *,
    join: bool,
) -> tuple[bool, str]:
    """(run, why) for task ``me`` whose trigger rule let it start once every upstream ended.

    ``states``: upstream task id -> instance states; ``outputs``: the XCom ``return_value`` of
    each failed upstream; ``join``: the task stands in for ``none_failed_min_one_success`` (more
    than one upstream unit), else for ``all_success``."""
    took: list[str] = []
    not_taken: list[str] = []
    for task_id in upstream:
        task_states_ = states.get(task_id) or ["none"]
        if all(state == "success" for state in task_states_):
            took.append(task_id)
            continue
        if any(state in _FAILED for state in task_states_):
            output = outputs.get(task_id)
            if not handled_failure(output):
                return False, f"upstream task {task_id!r} failed and no routing took the failure"
            if me in output[ROUTED_TO]:
                took.append(task_id)
            else:
                not_taken.append(f"{task_id!r} failed and routed elsewhere")
            continue
        not_taken.append(f"{task_id!r} {'/'.join(sorted(set(task_states_)))}")
    if took and (join or not not_taken):
        return True, "routed here by " + ", ".join(repr(t) for t in took)
    return False, "not routed here: " + ", ".join(not_taken or ["no upstream ran"])


def run_failures(
    states: Mapping[str, list[str]], outputs: Mapping[str, Any], names: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """(unhandled, handled) failed tasks of a run, one line each.

    ``states``: task id -> instance states; ``outputs``: the XCom ``return_value`` of each
    failed task; ``names``: task id -> step name, where the compiler knows it. A failed task
    whose output records a routed failure is handled (``Type: message`` of its error); any other
    failed instance is not (an upstream-failed task follows from another failure)."""
    unhandled: list[str] = []
    handled: list[str] = []
    for task_id in sorted(states):
        instance_states = states[task_id]
        failed = sum(1 for state in instance_states if state == "failed")
        if not failed:
            continue
        output = outputs.get(task_id)
        name = names.get(task_id)
        label = f"step {name!r}" if name else f"task {task_id!r}"
        if handled_failure(output) and len(instance_states) == 1:
            handled.append(f"{label}: {error_text(output.get('error'))}")
        else:
            count = f" ({failed} of {len(instance_states)} instances)" if failed > 1 else ""
            unhandled.append(f"{label} failed{count}")
    return unhandled, handled


def error_text(error: Any) -> str:
    """``Type: message`` of an output's ``error``."""
    if isinstance(error, Mapping):
        kind, message = error.get("type") or error.get("kind"), error.get("message")
        if kind and message:
            return f"{kind}: {message}"
        return str(message or kind or "call failed")
    return str(error) if error else "call failed"
