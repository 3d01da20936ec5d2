"""Interpret a set of steps by following their routing: cyclic regions, v1 loop bodies, inline
child playbooks (and the differential test's "whole playbook as one region").

Routing cycles (pagination, queues, retry arcs) cannot be static Airflow edges, so the compiler
gives each such region one task, and that task runs the region's steps here with the same step
runtime as every other task: start at the entry steps, run each routed-to member in arrival order
(FIFO; a join reached by two arcs runs twice, as NoETL's engine dispatches it per arc), hand the
later steps the results and ctx/vars writes of the earlier ones, and stop when no member is pending.
Targets outside the member set are the region's exits.

A loop step inside the set runs in-process (``loop.run_loop``); a ``playbook`` tool runs its child
through this interpreter too (``runtime/nested``, which gets ``interpret`` handed in; the kind is
registered at the end of this module). ``max_runs`` bounds a cycle whose guards never
stop: a visible failure instead of a task that never ends.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..tools.registry import register_tool
from .interpretation import Interpretation
from .loop import run_loop
from .nested import run_playbook
from .step import StepFailed, StepOutcome, execute_step

__all__ = ["DEFAULT_MAX_RUNS", "Interpretation", "interpret", "run_step_payload"]

DEFAULT_MAX_RUNS = 100_000


def run_step_payload(
    payload: Mapping[str, Any], inputs: Mapping[str, Any], *, sleep: Callable[[float], None]
) -> StepOutcome:
    """One step of any shape, in this process: a loop step iterates here, others run once."""
    if payload.get("loop"):
        return run_loop(payload, inputs, sleep=sleep, run_body=interpret)
    return execute_step(payload, inputs, sleep=sleep)


def interpret(
    steps: Mapping[str, Mapping[str, Any]],
    entries: Iterable[tuple[str, Mapping[str, Any]]],
    base: Mapping[str, Any],
    *,
    sleep: Callable[[float], None] = time.sleep,
    max_runs: int = DEFAULT_MAX_RUNS,
    state: Interpretation | None = None,
) -> Interpretation:
    """Run ``steps`` from ``entries`` ((step, incoming args)) until none is pending.

    ``base``: the inputs every step starts from (workload, upstream results, ctx, vars,
    execution_id, strict, loop binding...); results and writes of the steps run here are laid
    over it. Raises :class:`StepFailed` for the first unhandled failure; ``state`` (handed in
    by a caller that reports on a failed run: runtime/nested.py) then holds what ran before it.
    """
    state = Interpretation() if state is None else state
    queue: deque[tuple[str, dict[str, Any]]] = deque((s, dict(a or {})) for s, a in entries)
    names = tuple(steps)
    runs: dict[str, int] = {}
    exit_seen: dict[str, int] = {}
    total = 0
    while queue:
        name, args = queue.popleft()
        total += 1
        if total > max_runs:
            raise StepFailed(
                name,
                {
                    "kind": "region",
                    "type": "RegionRunaway",
                    "message": f"{max_runs} step runs without the region finishing; do its guards ever stop the cycle?",
                    "retryable": False,
                },
            )
        runs[name] = runs.get(name, 0) + 1
        inputs = {
            **base,
            "results": {**(base.get("results") or {}), **state.results},
            "ctx": {**(base.get("ctx") or {}), **state.ctx},
            "vars": {**(base.get("vars") or {}), **state.vars},
            "args": args,
            "run_index": runs[name] - 1,
            "step_names": names,
        }
        outcome = run_step_payload(steps[name], inputs, sleep=sleep)
        state.results.update(outcome.extra_results)
        state.results[name] = outcome.result
        state.ctx.update(outcome.ctx_writes)
        state.vars.update(outcome.vars_writes)
        state.order.append(name)
        state.attempts[name] = state.attempts.get(name, 0) + outcome.attempts
        if outcome.status == "error":
            state.errors[name] = outcome.error
        for target, task_id in outcome.next_targets:
            target_args = dict(outcome.next_args.get(target) or {})
            if target in steps:
                queue.append((target, target_args))
            elif target not in exit_seen:
                exit_seen[target] = len(state.exits)
                state.exits.append((target, task_id, target_args))
            else:
                state.exits[exit_seen[target]][2].update(target_args)
    return state


# A `playbook` tool runs its child through this interpreter: the kind is registered here, where
# the nested runner and the interpreter meet (the tools floor cannot name either).
_run_playbook = functools.partial(run_playbook, interpret=interpret)
register_tool("playbook", _run_playbook)
register_tool("playbooks", _run_playbook)
