"""`noetlc resume EXECUTION [--from STEP]`: run a failed execution again from what failed.

After a fix, a run should not start over: the steps that succeeded keep their results (their
XComs), and only the failed step and everything downstream of it run again. This clears exactly
that through Airflow's REST API (``clearTaskInstances`` with the run's ``dag_run_id``, so runs
without a logical date, as ``AirflowClient.trigger`` and the UI's trigger start them, are found;
``airflow tasks clear -s/-e`` matches none of them). Airflow then runs the cleared task
instances as new tries of the same run, and the event log records the run's next attempt.

What is cleared (the roots, each with its downstream):

* ``--from STEP``: the tasks that run STEP (found in the run's events, else by the compiler's
  task ids: the step's own task and its loop body ``STEP.*``);
* otherwise the failed step: every task instance in state ``failed``, and every task whose step
  the event log says ended in error (a step that failed inside a task that still succeeded).

The execution is found in the event log (``NOETL_EVENTS_URL`` or ``--events-url``), or named
by ``--dag`` and ``--run``. Called lazily by the CLI (through ``noetl_compile.plugin_seam``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import IO, Any

import httpx

from ..events.projection import project
from ..templating.ids import execution_id_for
from .hitl import GateCommandError, connect
from .rest import AirflowApiError, AirflowClient

__all__ = ["ResumeError", "resume_roots", "run_resume"]

EXIT_OK, EXIT_FAILED = 0, 1
# Task states of a run that has not ended: clearing under it would race the scheduler.
_GOING = frozenset({"running", "queued", "scheduled", "up_for_retry", "deferred", "restarting"})


class ResumeError(RuntimeError):
    """What `noetlc resume` cannot do, in words for the user (one line, with what to do)."""


def _step_tasks(
    step: str, task_ids: Iterable[str], events: Iterable[Mapping[str, Any]]
) -> set[str]:
    """The task ids that run ``step``: the ones its events came from, else the compiler's
    naming (the step's task, its loop body ``step.body``)."""
    known = set(task_ids)
    told = {
        str(e["task_id"])
        for e in events
        if e.get("step") == step and e.get("task_id") and str(e["task_id"]) in known
    }
    return told or {t for t in known if t == step or t.startswith(step + ".")}


def resume_roots(
    task_instances: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]] = (),
    from_step: str | None = None,
) -> list[str]:
    """The task ids to clear, each with its downstream (see the module docstring)."""
    tis = list(task_instances)
    rows = list(events)
    task_ids = {str(ti["task_id"]) for ti in tis}
    if from_step is not None:
        roots = _step_tasks(from_step, task_ids, rows)
        if not roots:
            raise ResumeError(
                f"no task of this run runs step {from_step!r}; "
                f"its tasks: {', '.join(sorted(task_ids)) or 'none'}"
            )
        return sorted(roots)
    roots = {str(ti["task_id"]) for ti in tis if ti.get("state") == "failed"}
    for step, entry in project(rows)["steps"].items() if rows else ():
        if entry.get("status") == "error":
            roots |= _step_tasks(step, task_ids, rows)
    if not roots:
        raise ResumeError(
            "nothing failed in this run (no failed task instance, no step in error); "
            "name where to start with --from STEP"
        )
    return sorted(roots)


def _run_of(args: argparse.Namespace, err: IO[str]) -> tuple[str, str, list[dict[str, Any]]]:
    """(dag_id, run_id, the execution's events) from --dag/--run or the event log."""
    from ..events.cli import resolve
    from ..events.store import StoreUnavailable

    execution, named = getattr(args, "execution", None), bool(args.dag and args.run)
    if execution is None and not named:
        raise ResumeError("name the execution (noetlc resume EXECUTION) or --dag D --run R")
    if execution is not None and not str(execution).isdigit():
        raise ResumeError(f"not an execution id: {execution!r}")
    store, _ = resolve(getattr(args, "events_url", None))
    where = store.describe()
    try:
        if named:
            # The run's own execution: an inline child's events carry the run's ids too.
            rows = store.events(execution_id_for(args.dag, args.run))
        else:
            rows = store.events(int(str(execution)))
    except StoreUnavailable as exc:
        if not named:
            raise ResumeError(
                f"the event log is unreachable ({exc}); name the run with --dag and --run"
            ) from None
        err.write(f"noetlc: the event log is unreachable, Airflow's states only: {exc}\n")
        rows = []
    finally:
        store.dispose()
    if named:
        return args.dag, args.run, rows
    first = next((r for r in rows if r.get("dag_id") and r.get("run_id")), None)
    if first is None:
        raise ResumeError(
            f"execution {execution} is not in the event log {where}; set NOETL_EVENTS_URL (or "
            "--events-url) to the deployment's log, or name the run with --dag and --run"
        )
    return str(first["dag_id"]), str(first["run_id"]), rows


def resume(
    client: AirflowClient,
    dag_id: str,
    run_id: str,
    events: list[dict[str, Any]],
    *,
    from_step: str | None = None,
    dry_run: bool = False,
) -> tuple[list[str], list[dict[str, Any]]]:
    """Clear the roots and their downstream; (roots, the task instances cleared)."""
    state = client.get_run(dag_id, run_id).get("state")
    if state == "success" and from_step is None:
        # A step may have failed and been handled (an error arc): the run needs no fix.
        raise ResumeError(
            f"{dag_id} / {run_id} succeeded; to run it again from a step, name it with --from"
        )
    tis = client.task_instances(dag_id, run_id)
    if not tis:
        raise ResumeError(f"Airflow has no task instances for {dag_id} / {run_id}")
    busy = sorted({str(ti["task_id"]) for ti in tis if ti.get("state") in _GOING})
    if busy:
        raise ResumeError(
            f"the run is still going ({', '.join(busy)} not finished); resume it once it ended"
        )
    roots = resume_roots(tis, events, from_step)
    cleared = client.clear_task_instances(dag_id, run_id, roots, dry_run=dry_run)
    return roots, cleared


def run_resume(
    args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        dag_id, run_id, events = _run_of(args, err)
        client = connect(args.url, args.user, args.password)
        try:
            roots, cleared = resume(
                client,
                dag_id,
                run_id,
                events,
                from_step=getattr(args, "from_step", None),
                dry_run=bool(getattr(args, "dry_run", False)),
            )
        finally:
            client.close()
    except (ResumeError, GateCommandError, AirflowApiError) as exc:
        err.write(f"noetlc: error: {exc}\n")
        return EXIT_FAILED
    except httpx.HTTPError as exc:
        err.write(f"noetlc: error: cannot reach Airflow: {type(exc).__name__}: {exc}\n")
        return EXIT_FAILED
    names = sorted({_instance(ti) for ti in cleared})
    verb = "would clear" if getattr(args, "dry_run", False) else "cleared"
    out.write(
        f"{dag_id} / {run_id}: {verb} {len(cleared)} task instance(s) from "
        f"{', '.join(roots)}: {', '.join(names) or 'none'}\n"
    )
    if not getattr(args, "dry_run", False):
        out.write("Airflow runs them again as new tries of the same run (noetlc status follows)\n")
    return EXIT_OK


def _instance(ti: Mapping[str, Any]) -> str:
    index = ti.get("map_index")
    return (
        f"{ti['task_id']}[{index}]" if isinstance(index, int) and index >= 0 else str(ti["task_id"])
    )
