"""What a run did, step by step: task instances + XComs + runtime events -> one report.

Airflow knows tasks; a playbook author knows steps. One task may hold several steps (a cyclic
region, a v1 loop body and its ``end_loop``) and one step may span several tasks (a loop's head,
mapped body and tail), so the report is built per step from three sources, each used for what
it is the authority on:

* the compiled DAG's ``PAYLOADS`` (keyed by unit = task or task group id) list the steps;
* XCom ``return_value`` holds what downstream templates see as ``{{ step }}``: ``result`` of a
  step task, ``results[step]`` of a region or loop-tail task, plus the ``ctx``/``vars`` writes;
* the runtime's events (``StepStarted``/``StepFinished``, ``ToolStarted``,
  ``LoopIterationCompleted``, ``TemplateWarning``) say which inner step failed, how many tool
  calls or iterations a step made and how long it took. Older runtimes emit none; then task
  states and try numbers stand in.

Pure Python over plain data (``TaskRow``, dicts, event objects or dicts), so it is unit-tested
without Airflow; ``__main__`` collects the inputs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..events import names
from ..hooks.redact import redact

__all__ = [
    "FINISHED",
    "TaskRow",
    "Unit",
    "build_report",
    "complete_units",
    "progress_line",
    "render_summary",
    "units_of",
]

FINISHED = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
_RAN = frozenset({"success", "failed"})
_STEP_NAMED = re.compile(r"^step '((?:[^'\\]++|\\.)++)'(?: failed)?: ")
RESULT_PREVIEW = 300  # characters of a result shown in the text summary


@dataclass(frozen=True)
class TaskRow:
    """One Airflow task instance, as plain data."""

    task_id: str
    map_index: int = -1
    state: str | None = None
    try_number: int = 0
    duration: float | None = None
    end: float | None = None  # POSIX time the instance ended (orders ctx/vars writes)
    error: str | None = None


@dataclass(frozen=True)
class Unit:
    """One entry of ``PAYLOADS``: a task or task group and the steps it runs."""

    id: str
    payload: Mapping[str, Any]
    own: str | None  # the step the unit is named after (None for a region)
    members: tuple[str, ...]  # steps that run inside the unit's tasks (region, v1 loop body)
    lead: tuple[str, ...] = ()  # steps a fused loop's head runs before its own (lower/fuse.py)

    @property
    def steps(self) -> tuple[str, ...]:
        return self.lead + ((self.own,) if self.own else ()) + self.members

    @property
    def is_loop(self) -> bool:
        return isinstance(self.payload.get("loop"), Mapping)

    def owns_task(self, task_id: str) -> bool:
        return task_id == self.id or task_id.startswith(self.id + ".")


def units_of(payloads: Mapping[str, Mapping[str, Any]]) -> list[Unit]:
    units = []
    for unit_id, payload in payloads.items():
        if "region" in payload:
            units.append(Unit(unit_id, payload, None, tuple(payload.get("steps") or ())))
            continue
        # A fused loop's head runs its lead and its tail its trail (lower/fuse.py).
        lead = tuple(
            str(s.get("step")) for s in payload.get("lead") or [] if isinstance(s, Mapping)
        )
        members: list[str] = []
        trail = payload.get("trail")
        if isinstance(trail, Mapping):
            members += list(trail.get("steps") or ())
        loop = payload.get("loop")
        if isinstance(loop, Mapping):
            body = loop.get("body")
            if isinstance(body, Mapping):
                members += list(body.get("steps") or ())
            end = loop.get("end")
            if isinstance(end, Mapping) and isinstance(end.get("step"), str):
                members.append(end["step"])
        own = str(payload.get("step", unit_id))
        units.append(Unit(unit_id, payload, own, tuple(members), lead))
    return units


def _field(event: Any, name: str) -> Any:
    return event.get(name) if isinstance(event, Mapping) else getattr(event, name, None)


# The frame of a python step's own code in a traceback (tools/python.py compiles it under this
# file name); a negated class, so the search is linear.
# The frame name stops at its quote: a scan from each `File "<noetl python` ends at the next
# quote, not at the end of the line (linear on a line of many unterminated frames).
_CODE_FRAME = re.compile(r'File "<noetl python [^>\n"]*+>", line (\d++)')


def _code_line(error: Mapping[str, Any]) -> int | None:
    """The line of the step's python code an error was raised at (the innermost frame)."""
    if isinstance(error.get("line"), int):
        return error["line"]
    trace = error.get("traceback")
    found = _CODE_FRAME.findall(trace) if isinstance(trace, str) else []
    return int(found[-1]) if found else None


def _error_text(error: Any) -> str | None:
    """One readable line: `Type: message (line N of the code)`."""
    if isinstance(error, Mapping):
        kind, message = error.get("type"), error.get("message")
        text = f"{kind}: {message}" if kind and message else str(message or kind or "failed")
        text = " ".join(text.split())  # one line, whatever the message held
        line = _code_line(error)
        return f"{text} (line {line} of the code)" if line is not None else text
    return None if error is None else " ".join(str(error).split())


def _unit_state(tasks: Sequence[TaskRow]) -> str:
    """success | failed | skipped | not_run for a unit's own step, from its task instances."""
    states = [t.state for t in tasks]
    if not states:
        return "not_run"
    if "failed" in states:
        return "failed"
    result_task = _result_task(tasks)
    if result_task is not None and result_task.state == "success":
        return "success"
    if all(s == "skipped" for s in states) or (
        result_task is not None and result_task.state == "skipped"
    ):
        return "skipped"
    return "not_run"


def _result_task(tasks: Sequence[TaskRow]) -> TaskRow | None:
    """The instance whose XCom holds the unit's result: the task itself, else a group's tail."""
    unmapped = [t for t in tasks if t.map_index < 0]
    for task in unmapped:
        if "." not in task.task_id:
            return task
    for task in unmapped:
        if task.task_id.endswith(".tail"):
            return task
    return unmapped[-1] if unmapped else None


def _task_summary(tasks: Sequence[TaskRow]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for task_id in dict.fromkeys(t.task_id for t in tasks):
        rows = [t for t in tasks if t.task_id == task_id]
        states = {t.state for t in rows}
        state = next((s for s in ("failed", "success", "skipped") if s in states), None)
        entry: dict[str, Any] = {
            "state": state or next(iter(states - {None}), None) or "not_run",
            "attempts": max((t.try_number for t in rows), default=0),
        }
        if any(t.map_index >= 0 for t in rows):
            entry["instances"] = len(rows)
        out[task_id] = entry
    return out


def _named_step(message: str | None) -> str | None:
    match = _STEP_NAMED.match(message or "")
    return match.group(1) if match else None


def _strip_step(message: str, step: str) -> str:
    """The message without a leading ``step 'NAME' failed:`` (the report names the step)."""
    return message.removeprefix(f"step {step!r} failed: ")


@dataclass(frozen=True)
class _Seen:
    """What the sources say about one step: its unit's task instances and XCom, its events."""

    step: str
    unit: Unit
    tasks: Sequence[TaskRow]
    output: Any  # XCom return_value of the unit's result task
    events: Sequence[Any]

    def named(self, name: str) -> list[Any]:
        return [e for e in self.events if _field(e, "name") == name]

    @property
    def own(self) -> bool:
        return self.step == self.unit.own

    @property
    def failed_tasks(self) -> list[TaskRow]:
        return [t for t in self.tasks if t.state == "failed"]

    @property
    def task_error(self) -> str | None:
        failed = self.failed_tasks
        if not failed:
            return None
        return next((t.error for t in failed if t.error), f"task {failed[0].task_id} failed")


def _xcom_result(seen: _Seen) -> tuple[bool, Any]:
    """(found, value): ``result`` for the unit's own step, ``results[step]`` for a member."""
    output = seen.output if isinstance(seen.output, Mapping) else {}
    if seen.own and "result" in output:
        return True, output["result"]
    results = output.get("results")
    if isinstance(results, Mapping) and seen.step in results:
        return True, results[seen.step]
    return False, None


def _state(seen: _Seen, has_result: bool) -> str:
    if seen.own:
        state = _unit_state(seen.tasks)  # the step's own task(s) are the authority
        if state == "success" and _call_failed_on(seen):
            return "failed"
        return state
    if has_result:
        return "failed" if _call_failed_on(seen) else "success"
    finished = seen.named(names.STEP_FINISHED)
    if finished:
        status = _field(finished[-1], "status")
        return {"success": "success", "error": "failed", "skipped": "skipped"}.get(status, "failed")
    if seen.named(names.STEP_STARTED):
        return "failed" if seen.failed_tasks else "not_run"
    # No events (an older runtime): a region task's failure names the step that failed.
    if seen.failed_tasks and _named_step(seen.task_error) == seen.step:
        return "failed"
    if seen.tasks and all(t.state == "skipped" for t in seen.tasks):
        return "skipped"
    return "not_run"


def _call_failed_on(seen: _Seen) -> bool:
    """A step whose call failed and whose routing went on (an arc, or a case rule), in a task
    that succeeded: a region's member (the region's output lists it under ``errors``), or a step
    of a DAG file compiled before such a step's task failed (its output says ``status: error``). The step failed, as its ``StepFinished`` event says;
    whether the run failed is the run's state (canonical: yes, operators/outcome.py)."""
    output = seen.output if isinstance(seen.output, Mapping) else {}
    if seen.own:
        return output.get("status") == "error"
    errors = output.get("errors")
    return isinstance(errors, Mapping) and seen.step in errors


def _error(seen: _Seen) -> str | None:
    errors = [
        _error_text((_field(e, "data") or {}).get("error")) for e in seen.named(names.STEP_FINISHED)
    ]
    if isinstance(seen.output, Mapping):
        members = seen.output.get("errors")
        if seen.own:
            errors.append(_error_text(seen.output.get("error")))
        elif isinstance(members, Mapping):
            errors.append(_error_text(members.get(seen.step)))
    error = next((e for e in reversed(errors) if e), None) or seen.task_error
    return _strip_step(error, seen.step) if error else None


def _iterations(seen: _Seen) -> int | None:
    """Items a loop step ran (None for a step that is no loop): a word of its own, never
    counted as attempts, which are tool calls (an item retried twice is 1 iteration, 3 calls)."""
    if not (seen.own and seen.unit.is_loop):
        return None
    iterations = seen.named(names.LOOP_ITERATION_COMPLETED)
    if iterations:
        return len(iterations)
    return sum(1 for t in seen.tasks if t.map_index >= 0 and t.state in _RAN)


def _attempts(seen: _Seen, state: str) -> int:
    """Tool calls of the step (a loop step without tool events: its iterations); Airflow tries
    when no events."""
    iterations = seen.named(names.LOOP_ITERATION_COMPLETED)
    tools = seen.named(names.TOOL_STARTED)
    if seen.own and seen.unit.is_loop and iterations and not tools:
        return len(iterations)
    if tools:
        return len(tools)
    counted = [int(_field(e, "attempt") or 0) for e in seen.named(names.STEP_FINISHED)]
    if any(counted):
        return sum(counted)
    if seen.own and seen.unit.is_loop:
        return sum(1 for t in seen.tasks if t.map_index >= 0 and t.state in _RAN)
    if seen.own:
        ran = _result_task(seen.tasks)
        return ran.try_number if ran is not None and ran.state in _RAN else 0
    return 1 if state in _RAN else 0


def _duration(seen: _Seen, state: str) -> float | None:
    if seen.own and seen.unit.is_loop:
        # Iterations may run side by side (a parallel loop): the loop's span, not their sum.
        span = _span(seen.named(names.STEP_STARTED), seen.named(names.STEP_FINISHED))
        if span is not None:
            return span
    durations = [_field(e, "duration") for e in seen.named(names.STEP_FINISHED)]
    known = [float(d) for d in durations if d is not None]
    if not known and seen.own and state in _RAN:
        known = [t.duration for t in seen.tasks if t.duration is not None]
    return round(sum(known), 3) if known else None


def _span(started: list[Any], finished: list[Any]) -> float | None:
    """Seconds from the first StepStarted to the last StepFinished (each stamped when it
    happened); None without timestamps."""
    starts = [_field(e, "timestamp") for e in started]
    ends = [_field(e, "timestamp") for e in finished]
    starts = [t for t in starts if hasattr(t, "timestamp")]
    ends = [t for t in ends if hasattr(t, "timestamp")]
    if not starts or not ends:
        return None
    return round(max(0.0, max(ends).timestamp() - min(starts).timestamp()), 3)


def _step_report(seen: _Seen) -> dict[str, Any]:
    has_result, result = _xcom_result(seen)
    state = _state(seen, has_result)
    if not has_result and state == "success":
        # A member of a task that failed later: its result is only in its event.
        successes = [e for e in seen.named(names.STEP_FINISHED) if _field(e, "status") == "success"]
        data = (_field(successes[-1], "data") or {}) if successes else {}
        result = data.get("result")
    report = {
        "state": state,
        "result": result if state == "success" or has_result else None,
        "attempts": _attempts(seen, state),
        "tasks": _task_summary(seen.tasks),
        "duration": _duration(seen, state),
        "error": _error(seen) if state == "failed" else None,
    }
    output = seen.output if seen.own and isinstance(seen.output, Mapping) else {}
    if state == "failed" and output.get("status") == "error" and output.get("next"):
        # The routing took the failure (its task is red all the same): where the run went on.
        report["routed_to"] = list(output["next"])
    iterations = _iterations(seen)
    if iterations is not None:
        report["iterations"] = iterations
    pipeline = _pipeline(seen)
    if pipeline:
        report["pipeline"] = pipeline
    return report


def _step_payload(seen: _Seen) -> Mapping[str, Any]:
    if seen.own:
        return seen.unit.payload
    members = seen.unit.payload.get("steps")
    found = members.get(seen.step) if isinstance(members, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _pipeline(seen: _Seen) -> dict[str, dict[str, int]]:
    """A tool pipeline's tasks with their attempts (tool calls, every iteration of a loop
    counted): ``{task: {"attempts": n}}`` in pipeline order, tasks that never ran at 0. A single
    tool with policy rules runs as a one-task pipeline (``<step>_task``) and is listed too."""
    from ..runtime.pipeline import single_tool_pipeline, task_label
    from ..runtime.step_calls import has_rules

    payload = _step_payload(seen)
    tasks, tool = payload.get("pipeline"), payload.get("tool")
    if not isinstance(tasks, list) and isinstance(tool, Mapping) and has_rules(tool):
        tasks = single_tool_pipeline(seen.step, tool)
    if not isinstance(tasks, list):
        return {}
    attempts = {task_label(task, i): 0 for i, task in enumerate(tasks) if isinstance(task, Mapping)}
    for event in seen.named(names.TOOL_STARTED):
        run_id = _field(event, "tool_run_id") or _field(event, "entity_id") or ""
        label = str(run_id).rpartition(":")[2]
        if label in attempts:
            attempts[label] += 1
    return {label: {"attempts": count} for label, count in attempts.items()}


def _for_run(
    events: Iterable[Any], dag_id: str | None, run_id: str | None, execution_id: int | None
) -> list[Any]:
    """Events of this run. An event without coordinates is taken to belong to it; one with
    another execution id does not (a nested playbook run inline by one of its tasks)."""
    out = []
    for event in events:
        if dag_id and _field(event, "dag_id") not in (None, dag_id):
            continue
        if run_id and _field(event, "run_id") not in (None, run_id):
            continue
        if execution_id is not None and _field(event, "execution_id") not in (
            None,
            "",
            str(execution_id),
        ):
            continue
        out.append(event)
    return out


def build_report(
    *,
    payloads: Mapping[str, Mapping[str, Any]],
    tasks: Sequence[TaskRow],
    xcoms: Mapping[str, Any],
    events: Iterable[Any] = (),
    dag_id: str | None = None,
    run_id: str | None = None,
    execution_id: int | None = None,
    state: str | None = None,
    only_units: Iterable[str] | None = None,
    variables: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The run report: ``{dag_id, run_id, execution_id, state, steps, ctx, vars, errors,
    warnings}``; ``xcoms`` maps task id -> XCom ``return_value`` of unmapped instances.
    ``only_units`` limits ``steps`` to those units (progress lines). ``ctx`` is NoETL's
    execution variables: ``variables`` (the workload with the request payload on top; values
    under secret-looking keys redacted), then every ctx write in the order the tasks finished."""
    run_events = _for_run(events, dag_id, run_id, execution_id)
    by_step: dict[str, list[Any]] = {}
    for event in run_events:
        step = _field(event, "step")
        if isinstance(step, str):
            by_step.setdefault(step, []).append(event)
    wanted = None if only_units is None else set(only_units)
    steps: dict[str, dict[str, Any]] = {}
    claimed: set[str] = set()
    errors: list[dict[str, str]] = []
    for unit in units_of(payloads):
        if wanted is not None and unit.id not in wanted:
            continue
        unit_tasks = [t for t in tasks if unit.owns_task(t.task_id)]
        result_task = _result_task(unit_tasks)
        output = xcoms.get(result_task.task_id) if result_task is not None else None
        for step in unit.steps:
            report = _step_report(_Seen(step, unit, unit_tasks, output, by_step.get(step, [])))
            steps[step] = report
            if report["state"] == "failed":
                claimed.update(t.task_id for t in unit_tasks if t.state == "failed")
        for task in unit_tasks:
            if task.state == "failed" and task.task_id not in claimed:
                errors.append({"task": task.task_id, "error": task.error or "failed"})
                claimed.add(task.task_id)

    if wanted is None:
        # A task of no step (the outcome task, operators/outcome.py) that failed says why.
        owned = {t.task_id for u in units_of(payloads) for t in tasks if u.owns_task(t.task_id)}
        for task in tasks:
            if task.state == "failed" and task.task_id not in owned | claimed:
                errors.append({"task": task.task_id, "error": task.error or "failed"})
                claimed.add(task.task_id)
    writes, case_vars = _merged_writes(tasks, xcoms)
    ctx = {**redact(dict(variables or {})), **writes}
    # A loop repeats the same template problem per iteration: say it once.
    warnings = list(
        dict.fromkeys(
            _warning_text(e)
            for e in run_events
            if _field(e, "name") == names.TEMPLATE_WARNING and _field(e, "status") != "error"
        )
    )
    if state is None:
        state = "failed" if any(s["state"] == "failed" for s in steps.values()) else "success"
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "execution_id": execution_id,
        "state": state,
        "steps": steps,
        "ctx": ctx,
        "vars": case_vars,
        "errors": errors,
        "warnings": warnings,
    }


def _merged_writes(
    tasks: Sequence[TaskRow], xcoms: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """ctx and vars writes of the tasks that succeeded, merged in the order they finished."""
    ctx: dict[str, Any] = {}
    variables: dict[str, Any] = {}
    ordered = sorted(
        (t for t in tasks if t.map_index < 0 and t.state == "success" and t.task_id in xcoms),
        key=lambda t: t.end or 0.0,
    )
    for task in ordered:
        output = xcoms[task.task_id]
        if isinstance(output, Mapping):
            if isinstance(output.get("ctx"), Mapping):
                ctx.update(output["ctx"])
            if isinstance(output.get("vars"), Mapping):
                variables.update(output["vars"])
    return ctx, variables


def _warning_text(event: Any) -> str:
    data = _field(event, "data") or {}
    where = data.get("field") or "?"
    cause = data.get("cause") or data.get("kind") or "template problem"
    expression = data.get("expression")
    text = f"step {_field(event, 'step')}: {where}: {cause}"
    return text + (f" in {expression}" if expression else "")


def complete_units(payloads: Mapping[str, Any], tasks: Sequence[TaskRow]) -> list[str]:
    """Units whose task instances have all finished (their steps' lines can be printed)."""
    done = []
    for unit in units_of(payloads):
        unit_tasks = [t for t in tasks if unit.owns_task(t.task_id)]
        if unit_tasks and all(t.state in FINISHED for t in unit_tasks):
            done.append(unit.id)
    return done


def _seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.2f}s" if seconds < 60 else f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def progress_line(step: str, report: Mapping[str, Any], width: int, prefix: str = "") -> str:
    attempts = report.get("attempts", 0)
    iterations = report.get("iterations")
    if iterations is not None:
        count = f"{iterations} {'iteration' if iterations == 1 else 'iterations'}"
        if attempts > iterations:  # retried items
            count += f", {attempts} attempts"
    else:
        count = f"{attempts} {'attempt' if attempts == 1 else 'attempts'}"
    return (
        f"  {prefix}{step:<{width}}  {report['state']:<8} {_seconds(report.get('duration')):>8}"
        f"  {count}"
    )


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=False)
    if len(text) > RESULT_PREVIEW:
        text = text[:RESULT_PREVIEW] + f"... ({len(text)} characters; --json shows all)"
    return text


def render_summary(report: Mapping[str, Any], elapsed: float, log_path: str | None) -> str:
    """The end of the text output: outcome, each step's result, failures, log on failure."""
    steps: Mapping[str, Mapping[str, Any]] = report["steps"]
    lines = []
    not_run = [name for name, step in steps.items() if step["state"] == "not_run"]
    if not_run:
        lines.append(f"not run: {', '.join(not_run)}")
    for warning in report.get("warnings") or ():
        lines.append(f"warning: {warning}")
    lines.append(f"{report['state']} in {elapsed:.1f}s")
    ran = {name: step for name, step in steps.items() if step["state"] == "success"}
    if ran:
        width = max(len(name) for name in ran)
        lines.append("results:")
        lines += [f"  {name:<{width}}  {_preview(step['result'])}" for name, step in ran.items()]
    for name, step in steps.items():
        if step["state"] == "failed":
            routed = step.get("routed_to")
            went_on = f"; the routing took it to {', '.join(routed)}" if routed else ""
            lines.append(f"step {name} failed: {step.get('error') or 'failed'}{went_on}")
    for error in report.get("errors") or ():
        lines.append(f"task {error['task']} failed: {error['error']}")
    for child in report.get("children") or ():
        if child.get("state") == "failed":
            for name, step in child["steps"].items():
                if step["state"] == "failed":
                    lines.append(
                        f"step {child['dag_id']}/{name} failed: {step.get('error') or 'failed'}"
                    )
    if report["state"] != "success" and log_path:
        lines.append(f"Airflow log: {log_path}")
    return "\n".join(lines) + "\n"
