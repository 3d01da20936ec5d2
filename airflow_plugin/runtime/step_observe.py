"""How a step run is observed: its lifecycle events around the body (``observed``), and render
issues (a template kept as text, a guard that could not be evaluated) logged as warnings naming
step, field and expression, reported as ``TemplateWarning`` events, fatal in strict mode.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from ..errors import error_record
from ..events import names
from ..templating.render import RenderIssue, collect_issues, noted_issues
from .step_outcome import StepFailed, StepOutcome

__all__ = ["StepRunView", "observed", "report_issues_quietly", "strict_checkpoint"]

log = logging.getLogger(__name__)


class StepRunView(Protocol):
    """What observation reads of a step run (``step.StepRunView``)."""

    step: str
    step_run_id: str
    strict: bool
    arcs: Any
    failed_steps: dict[str, str]
    phase: str  # "step", or "iteration": one loop iteration, whose routing waits for the loop

    def emit(self, name: str, entity: str, status: str, **fields: Any) -> None: ...


# A name in a template expression; linear (one character class, no nesting).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def with_producer(issue: RenderIssue, failed_steps: dict[str, str]) -> RenderIssue:
    """The issue, its cause naming each step it reads whose call failed: the template could not
    render because that producer has no result, which is what a user must fix first."""
    if not failed_steps:
        return issue
    named = dict.fromkeys(n for n in _NAME.findall(issue.expression) if n in failed_steps)
    if not named:
        return issue
    producers = "; ".join(f"step {name!r} failed ({failed_steps[name]})" for name in named)
    return replace(issue, cause=f"{issue.cause}; its producer {producers}")


def _warn(run: StepRunView, issue: RenderIssue, status: str) -> None:
    """One render issue: a warning in the task log and a ``TemplateWarning`` event."""
    issue = with_producer(issue, getattr(run, "failed_steps", {}))
    log.warning("NoETL %s", issue.describe(run.step))
    run.emit(
        names.TEMPLATE_WARNING,
        "step",
        status,
        entity_id=f"{run.step_run_id}:{issue.field}",
        data={
            "kind": issue.kind,
            "field": issue.field,
            "expression": issue.expression,
            "cause": issue.cause,
        },
    )


def _report_issues(run: StepRunView, issues: list[RenderIssue]) -> list[str]:
    """Log each issue loudly, report it as an event; in strict mode fail the step."""
    messages = []
    for issue in issues:
        message = with_producer(issue, getattr(run, "failed_steps", {})).describe(run.step)
        messages.append(message)
        _warn(run, issue, "error" if run.strict else "success")
    if messages and run.strict:
        raise StepFailed(
            run.step,
            {
                "kind": "template",
                "type": "StrictTemplateError",
                "message": "; ".join(messages) + " (strict mode)",
                "retryable": False,
            },
        )
    return messages


def observed(run: StepRunView, body: Callable[[], StepOutcome]) -> StepOutcome:
    """Run ``body`` between StepStarted and StepFinished, with render issues collected."""
    started = time.monotonic()
    run.emit(names.STEP_STARTED, "step", "in_progress", alias="step.enter")
    try:
        with collect_issues() as issues:
            try:
                outcome = body()
            except StepFailed:
                if run.strict and issues:
                    # The template kept as text is why the call failed (a tool handed
                    # `{{ iter.ordr }}` as a value): strict mode reports that, not the symptom.
                    _report_issues(run, _taken(issues))
                report_issues_quietly(run, issues)
                raise
            except BaseException:
                report_issues_quietly(run, issues)
                raise
            outcome.issues = _report_issues(run, issues)
    except Exception as exc:
        error = exc.error if isinstance(exc, StepFailed) else error_record(exc)
        run.emit(
            names.STEP_FINISHED,
            "step",
            "error",
            alias="step.exit",
            duration=time.monotonic() - started,
            data={"error": error},
        )
        raise
    data = {
        "result": outcome.result,
        "next": outcome.next_steps,
        "status": outcome.status,
        "ctx": outcome.ctx_writes,
        "vars": outcome.vars_writes,
    }
    if outcome.status == "error":
        # The call failed and the routing went on (an arc or a case rule took it): the step
        # still ended in error, as NoETL's call.error says; its task succeeded so the route ran.
        data["error"] = outcome.error
    run.emit(
        names.STEP_FINISHED,
        "step",
        "error" if outcome.status == "error" else "success",
        alias="step.exit",
        attempt=outcome.attempts,
        duration=time.monotonic() - started,
        data=data,
    )
    # Routing is decided where a step run ends, not at each loop iteration (the loop's arcs are
    # evaluated once, at loop.done): an iteration says NextEvaluated only when a case rule of
    # its own chose targets. (It said it, with no targets, for every item: a seventh of a
    # 5,000-item loop's events.)
    if outcome.next_steps or (run.arcs and run.phase == "step"):
        run.emit(
            names.NEXT_EVALUATED,
            "next",
            "success",
            data={"targets": outcome.next_steps, "args": outcome.next_args},
        )
    return outcome


def _taken(issues: list[RenderIssue]) -> list[RenderIssue]:
    taken = list(issues)
    issues.clear()  # reported once: the step's end must not report them again
    return taken


def strict_checkpoint(run: StepRunView) -> None:
    """In strict mode, fail on the render issues noted so far in this step run: called before
    the step calls its tool, so no tool runs with a template's text as a value."""
    if run.strict:
        noted = noted_issues()
        if noted:
            _report_issues(run, _taken(noted))


def report_issues_quietly(run: StepRunView, issues: list[RenderIssue]) -> None:
    # The step fails anyway: still say (log and event) what was swallowed on the way, which is
    # often why it failed, and never raise a second error.
    for issue in issues:
        _warn(run, issue, "error")
