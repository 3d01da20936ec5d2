"""The parts of one step run that its case rules and its call loop share, each declared.

A step run (``step._StepRun``) is built from the typed step (``noetl_compile.step_model.Step``)
and its inputs, and hands each part what it needs:

* :class:`StepEvents`: who the run is (step, run id, loop iteration) and how it reports events;
* :class:`RunState`: what the run changes as it goes (the template context, the ctx/vars it
  writes, the routing chosen, whether a failure was handled, the case rules fired...);
* :class:`SinkRunner`: a rendered ``sink`` block written, its events, its row count kept;
* :func:`render_set`: a ``set`` block rendered into ctx and vars writes.

``step_case.CaseRules`` and ``step_calls.CallLoop`` are objects given these, not mixins reading
attributes of a class they are mixed into.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..events import Event, emit, names, wants
from ..templating.context import apply_ctx_writes, apply_vars_writes
from ..templating.render import RenderError, render_value, to_jsonable
from .pipeline import split_set
from .step_outcome import StepFailed

__all__ = ["Routing", "RunState", "SinkRunner", "StepEvents", "failure_error", "render_set"]


def failure_error(outcome: Any) -> dict[str, Any]:
    """The error record of a failed tool outcome (a generic one when the tool gave none)."""
    return dict(outcome.error or {"type": "ToolError", "message": "tool call failed"})


@dataclass
class Routing:
    """The targets a step run chose, in the order chosen (``args``: what each target gets)."""

    steps: list[str] = field(default_factory=list)
    task_ids: list[str] = field(default_factory=list)
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    targets: list[tuple[str, str | None]] = field(default_factory=list)

    def add(self, step: str, task_id: str | None, args: Mapping[str, Any] | None) -> None:
        if step not in self.steps:
            self.steps.append(step)
            self.targets.append((step, task_id))
            # A target without an Airflow task (task_id None) is routed to but not branched to.
            if task_id is not None and task_id not in self.task_ids:
                self.task_ids.append(task_id)
        if args:
            self.args.setdefault(step, {}).update(args)


@dataclass
class RunState:
    """What a step run changes as it goes; its case rules and call loop share this one object.

    ``context``: what templates see now; ``ctx_writes``/``vars_writes``: what the step writes;
    ``routing``: the targets chosen; ``case_routed``: a case rule chose them; ``handled``: a
    rule or an arc took a failed call; ``fired``: case rules that matched for this call;
    ``deferred``: targets a loop iteration's rule chose (taken at the loop's end); ``sinks``:
    the written sinks' records; ``result_override``: (set, value) of a case ``result``."""

    context: dict[str, Any]
    ctx_writes: dict[str, Any] = field(default_factory=dict)
    vars_writes: dict[str, Any] = field(default_factory=dict)
    routing: Routing = field(default_factory=Routing)
    case_routed: bool = False
    handled: bool = False
    fired: set[int] = field(default_factory=set)
    deferred: list[dict[str, Any]] = field(default_factory=list)
    sinks: list[dict[str, Any]] = field(default_factory=list)
    result_override: tuple[bool, Any] = (False, None)

    def write(
        self, ctx_writes: Mapping[str, Any], vars_writes: Mapping[str, Any] | None = None
    ) -> None:
        if ctx_writes:
            self.ctx_writes.update(ctx_writes)
            self.context = apply_ctx_writes(self.context, ctx_writes)
        if vars_writes:
            self.vars_writes.update(vars_writes)
            self.context = apply_vars_writes(self.context, vars_writes)


@dataclass(frozen=True)
class StepEvents:
    """Who a step run is, as its events say: the step, its run id (``step@run#iteration``), the
    execution, and the loop iteration it runs for (if any)."""

    step: str
    step_run_id: str
    execution_id: str
    loop_id: str | None = None
    iteration: int | None = None

    def emit(self, name: str, entity: str, status: str, **fields: Any) -> None:
        if not wants(name, status):
            return  # events off, or a cursor item's bookkeeping: skip building the payload
        data = fields.pop("data", None)
        emit(
            Event(
                name=name,
                entity=entity,
                entity_id=fields.pop("entity_id", self.step_run_id),
                status=status,
                execution_id=self.execution_id,
                step=self.step,
                step_run_id=self.step_run_id,
                loop_id=self.loop_id,
                iteration=self.iteration,
                data=to_jsonable(data or {}),
                **fields,
            )
        )


@dataclass(frozen=True)
class SinkRunner:
    """Writes a step's sink blocks (the step-level ``sink``, a case rule's, a policy's)."""

    events: StepEvents
    state: RunState

    def run(self, spec: Any, context: Mapping[str, Any], where: str) -> None:
        """Render a sink block against ``context`` and write it; a failed sink fails the step
        (a sink is a side effect the playbook relies on)."""
        from ..tools.sink import run_sink

        step, run_id = self.events.step, self.events.step_run_id
        rendered = render_value(spec, context, strict=False, field=where)
        if not isinstance(rendered, Mapping):
            rendered = {}
        destination = rendered.get("tool")
        table = (destination if isinstance(destination, Mapping) else rendered).get("table")
        self.events.emit(
            names.SINK_STARTED,
            "sink",
            "in_progress",
            entity_id=f"{run_id}:sink",
            data={"table": table},
        )
        started = time.monotonic()
        outcome = run_sink(rendered, step=step, context=context)
        duration = time.monotonic() - started
        if not outcome.ok:
            self.events.emit(
                names.SINK_PROCESSED,
                "sink",
                "error",
                entity_id=f"{run_id}:sink",
                data={"error": outcome.error},
                duration=duration,
            )
            error = failure_error(outcome)
            error["message"] = f"{where}: {error.get('message', 'sink failed')}"
            raise StepFailed(step, error)
        self.state.sinks.append(dict(outcome.data or {}))
        self.events.emit(
            names.SINK_PROCESSED,
            "sink",
            "success",
            entity_id=f"{run_id}:sink",
            data=outcome.data,
            duration=duration,
        )


def render_set(
    values: Any, context: Mapping[str, Any], step: str = "?", field: str = "set"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Render a ``set`` block -> (ctx writes, vars writes); a template that cannot render
    fails the step naming the field."""
    try:
        return _render_set_strict(values, context, field)
    except RenderError as exc:
        raise StepFailed(
            step,
            {
                "kind": "template",
                "type": "TemplateError",
                "message": f"field {exc.field or field}: {exc}",
                "retryable": False,
            },
        ) from exc


def _render_set_strict(
    values: Any, context: Mapping[str, Any], field: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Canonical: ``ctx.x``/``step.x``/``iter.x``/bare ``x`` all write ``x`` into the execution
    variables (NoETL's engine flattens them). case-v2 also has a list of ``{name, value}`` entries
    and ``vars.x``/``{vars: {...}}`` forms, which write ``vars``.
    """
    ctx_writes: dict[str, Any] = {}
    vars_writes: dict[str, Any] = {}
    if isinstance(values, list):  # case-v2: [{name, value}] -> vars
        for entry in values:
            if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
                vars_writes[entry["name"]] = render_value(
                    entry.get("value"), context, strict=True, field=f"{field}.{entry['name']}"
                )
        return ctx_writes, vars_writes
    if not isinstance(values, Mapping):
        return ctx_writes, vars_writes
    rest: dict[str, Any] = {}
    for key, value in values.items():
        if key == "vars" and isinstance(value, Mapping):
            vars_writes.update(render_value(value, context, strict=True, field=f"{field}.vars"))
        elif key.startswith("vars."):
            vars_writes[key[len("vars.") :]] = render_value(
                value, context, strict=True, field=f"{field}.{key}"
            )
        else:
            rest[key] = value
    rendered = render_value(rest, context, strict=True, field=field)
    ctx_part, iter_part = split_set(rendered)
    # At step level there is no iteration scope left to write into: the engine stores iter.* in
    # the execution variables like ctx.*.
    ctx_writes.update(ctx_part)
    ctx_writes.update(iter_part)
    return ctx_writes, vars_writes
