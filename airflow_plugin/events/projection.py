"""The execution state rebuilt from its events alone (formal spec 9.4: replay).

``project(events)`` folds an execution's events, in ``seq`` order, into what ``noetlc status``
shows and what a replay test compares with the run's real outcome:

* ``status``: the terminal status (PlaybookProcessed) of the run's latest attempt, else
  ``running``; a run cleared in Airflow and started again is ``running`` until that attempt
  ends (an attempt's events carry ``data.run_attempt``, Airflow's ``clear_number``);
* ``attempts``: the history of the run: each attempt that finished, in order, with its status;
* ``steps``: per step, its last status, how many times it ran, and the error of its last run
  when that run failed (a run that succeeded after a failed one clears it);
* ``results``: per step, the result of its last finished run outside any loop iteration (a loop
  step's aggregate, a region member's last visit);
* ``ctx`` / ``vars``: every write, in order;
* ``loops``: per loop, items, iterations finished, failed, done;
* ``retries``: per step, retries started; ``tasks``: per Airflow task instance, its last try
  and status (a task killed before its step could report still shows its failure; an earlier
  try told after a later one, as the run's end tells archived tries, changes neither), and
  ``tries``, every try's end in try order (the failed try before a successful re-run stays);
* ``gates``: gates paused and not yet answered; ``children``: nested executions started here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from . import names

__all__ = ["in_flight_peak", "project"]


def project(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    state: dict[str, Any] = {
        "execution_id": None,
        "dag_id": None,
        "run_id": None,
        "playbook": None,
        "status": "unknown",
        "attempts": [],
        "steps": {},
        "results": {},
        "ctx": {},
        "vars": {},
        "loops": {},
        "retries": {},
        "tasks": {},
        "gates": {},
        "children": [],
        "events": 0,
    }
    for event in events:
        state["events"] += 1
        _apply(state, event)
    state["gates"] = sorted(state["gates"].values(), key=lambda g: g["since"] or "")
    state.pop("_attempt", None)
    return state


def _apply(state: dict[str, Any], event: Mapping[str, Any]) -> None:
    name = event.get("name")
    data = event.get("data") or {}
    step = event.get("step")
    if state["execution_id"] is None:
        state["execution_id"] = event.get("execution_id")
    if name == names.PLAYBOOK_EXECUTION_REQUESTED:
        state["dag_id"] = state["dag_id"] or event.get("entity_id")
        state["run_id"] = state["run_id"] or event.get("run_id")
        state["playbook"] = event.get("playbook_path")
        state["workload"] = data.get("workload")
        if state["status"] == "unknown":
            state["status"] = "running"
    elif name == names.WORKFLOW_STARTED:
        _run_attempt_started(state, data)
    elif name == names.PLAYBOOK_PROCESSED:
        _run_attempt_finished(state, event, data)
    elif name == names.STEP_STARTED and step:
        entry = _step(state, step)
        if event.get("iteration") is None:
            entry["status"] = "running"
    elif name == names.STEP_FINISHED and step:
        _step_finished(state, step, event, data)
    elif name == names.TASK_STARTED:
        task = state["tasks"].setdefault(event["entity_id"], {"try_number": None, "tries": []})
        tried, latest = event.get("try_number"), task.get("try_number")
        if tried is None or latest is None or tried >= latest:
            task.update(step=step, status="running", try_number=tried, error=None)
        if isinstance(data.get("map_label"), str):
            task["label"] = data["map_label"]  # the mapped instance's name in Airflow's UI
    elif name == names.TASK_FINISHED:
        _task_finished(state, event, data)
    elif name == names.RETRY_STARTED and step:
        state["retries"][step] = state["retries"].get(step, 0) + 1
    elif name in (names.LOOP_STARTED, names.LOOP_ITERATION_COMPLETED, names.LOOP_FINISHED):
        _loop(state, name, event, data)
    elif name == names.TOOL_STARTED and data.get("child_execution_id"):
        state["children"].append(str(data["child_execution_id"]))
    elif name == names.PLAYBOOK_PAUSED:
        state["gates"][event.get("entity_id")] = {
            "gate": event.get("entity_id"),
            "step": step,
            "since": event.get("timestamp"),
            "data": data,
        }
    elif name == names.SIGNAL_RECEIVED:
        state["gates"].pop(event.get("entity_id"), None)


def _run_attempt_started(state: dict[str, Any], data: Mapping[str, Any]) -> None:
    attempt = data.get("run_attempt") or 0
    finished = state.get("_attempt")
    if state["status"] == "unknown" or (finished is not None and attempt > finished):
        state["status"] = "running"  # a cleared run started again: its last end is history


def _run_attempt_finished(
    state: dict[str, Any], event: Mapping[str, Any], data: Mapping[str, Any]
) -> None:
    attempt = data.get("run_attempt") or 0
    finished = state.get("_attempt")
    if finished is not None and attempt < finished:
        return  # an earlier attempt's end told late: history only, never the run's state
    state["_attempt"] = attempt
    state["status"] = event.get("status")
    state["attempts"] = [a for a in state["attempts"] if a["attempt"] != attempt]
    state["attempts"].append(
        {"attempt": attempt, "status": event.get("status"), "finished": event.get("timestamp")}
    )


def _step(state: dict[str, Any], step: str) -> dict[str, Any]:
    return state["steps"].setdefault(step, {"status": "pending", "runs": 0, "error": None})


def _step_finished(
    state: dict[str, Any], step: str, event: Mapping[str, Any], data: Mapping[str, Any]
) -> None:
    entry = _step(state, step)
    if event.get("status") == "error":
        entry["error"] = data.get("error")
    # Writes count wherever they happen (a sequential loop's iterations write ctx).
    state["ctx"].update(data.get("ctx") or {})
    state["vars"].update(data.get("vars") or {})
    if event.get("iteration") is not None:
        # One iteration of a loop body: counted apart, so a 50-item loop is one run of its
        # step with 50 iterations (not 51 runs); the loop step reports the aggregate.
        entry["iterations"] = entry.get("iterations", 0) + 1
        return
    entry["runs"] += 1
    entry["status"] = event.get("status")
    if event.get("status") != "error":
        entry["error"] = None  # a later run of the step (a retry, a region's next visit) succeeded
    if "result" in data:
        state["results"][step] = data["result"]


def _task_finished(
    state: dict[str, Any], event: Mapping[str, Any], data: Mapping[str, Any]
) -> None:
    key = event["entity_id"]
    task = state["tasks"].setdefault(key, {"step": event.get("step"), "try_number": None})
    if isinstance(data.get("map_label"), str):
        task["label"] = data["map_label"]
    _try_ended(task, event, data)
    tried, latest = event.get("try_number"), task.get("try_number")
    if tried is not None and latest is not None and tried < latest:
        # An earlier attempt told late (the run's end reports archived attempts): history, not
        # the task's state, and no longer the step's (a later try ran it again).
        return
    task["status"] = data.get("state") or event.get("status")
    task["try_number"] = event.get("try_number")
    step = task.get("step") or _step_of_task(key)
    if task["status"] == "skipped" and step and step not in state["steps"]:
        # A branch not taken: the step never started, and says so (status shows it).
        state["steps"][step] = {"status": "skipped", "runs": 0, "error": None}
    task["error"] = data.get("error") if event.get("status") == "error" else None
    if event.get("status") == "error":
        step = task.get("step")
        # A task that died without its step saying so (killed, timed out): the step failed.
        if step and state["steps"].get(step, {}).get("status") in (None, "pending", "running"):
            entry = _step(state, step)
            entry["status"] = "error"
            entry["error"] = entry["error"] or data.get("error")


def _step_of_task(task_id: str) -> str | None:
    """The step a task runs, from its id alone: a skipped task is told at the run's end by a
    process that has no operator at hand, so its event names no step. `s`, `s.head`,
    `s.body[3]` run step `s`; the run's outcome watcher (noetl_outcome) runs none."""
    if task_id.startswith("noetl_outcome"):
        return None
    return task_id.split(".", 1)[0].split("[", 1)[0] or None


def _try_ended(task: dict[str, Any], event: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    """Keep the end of every try of the task, in try order, one entry per try (a try told twice
    by different processes has one id and is stored once, but an older log may hold both)."""
    tries = task.setdefault("tries", [])
    entry = {
        "try_number": event.get("try_number"),
        "status": data.get("state") or event.get("status"),
        "error": data.get("error") if event.get("status") == "error" else None,
    }
    tries[:] = [t for t in tries if t["try_number"] != entry["try_number"]] + [entry]
    tries.sort(key=lambda t: (t["try_number"] is None, t["try_number"] or 0))


def _loop(state: dict[str, Any], name: str, event: Mapping[str, Any], data: Mapping[str, Any]):
    loop_id = event.get("loop_id") or event.get("step")
    loop = state["loops"].setdefault(
        loop_id, {"total": None, "finished": 0, "failed": 0, "done": False}
    )
    if name == names.LOOP_STARTED:
        loop["total"] = data.get("total")
    elif name == names.LOOP_ITERATION_COMPLETED:
        loop["finished"] += 1
        if event.get("status") == "error":
            loop["failed"] += 1
    else:
        loop["done"] = True
        loop["stats"] = data.get("stats")


def in_flight_peak(events: Iterable[Mapping[str, Any]], loop_id: str) -> int:
    """The most iterations of loop ``loop_id`` running at one instant, from the timestamps of
    their LoopIterationStarted / LoopIterationCompleted events (an iteration that ends at the
    instant another starts does not overlap it). What ``max_in_flight`` bounds, as measured."""
    edges = []
    for event in events:
        if (event.get("loop_id") or event.get("step")) != loop_id:
            continue
        name = event.get("name")
        if name in (names.LOOP_ITERATION_STARTED, names.LOOP_ITERATION_COMPLETED):
            stamp = event.get("timestamp")
            if isinstance(stamp, str):
                stamp = datetime.fromisoformat(stamp)
            edges.append((stamp, 0 if name == names.LOOP_ITERATION_COMPLETED else 1))
    peak = running = 0
    for _, starts in sorted(edges):
        running += 1 if starts else -1
        peak = max(peak, running)
    return peak
