"""Gate steps (``tool.kind: gate``, spec-extensions §1) on Airflow's native waiting constructs.

| gate | operator | base class |
|---|---|---|
| ``approve`` | ``NoetlApprovalOperator`` | ``HITLOperator`` with options Approve/Reject (a rejection is routed by the step's arcs, so it must not skip downstream tasks the way ``ApprovalOperator`` does) |
| ``input`` | ``NoetlInputOperator`` | ``HITLEntryOperator`` with the gate's params as a form |
| ``sleep`` + ``duration`` | ``NoetlSleepSensor`` | ``WaitSensor(timedelta, deferrable=True)``, deferring to a ``DateTimeTrigger`` that resumes the task (WaitSensor's own trigger ends it in the triggerer) |
| ``sleep`` + ``until`` | ``NoetlWaitUntilSensor`` | ``DateTimeSensorAsync`` (target rendered by the NoETL runtime) |

``template_fields = ()`` everywhere: subject, body and target time are DSL templates that the
NoETL runtime renders, never Airflow's Jinja. Durations (``30s``, ``1h30m``, ``PT2H``, ``P10D``)
are parsed at DAG import, so a bad one is an import error naming the step.

At run time every gate renders its texts with the NoETL context (strictly: a person is never
shown template text), emits ``ToolStarted`` and ``PlaybookPaused`` and waits: approve/input in
Airflow's ``awaiting_input`` (answered in the UI, through ``PATCH .../hitlDetails`` or by
`noetlc signal`; Airflow's scheduler applies the timeout and defaults), sleeps deferred to the
triggerer. On release (``execute_complete``) the step result is built as spec-extensions §1
says (``runtime.gates``), ``SignalReceived`` and ``ToolCompleted`` are emitted, and the step
ends like any other (``runtime.step.complete_step``: ``set``, case rules, arcs; the targets not
taken are skipped): a rejection goes where the arcs say, e.g. ``cancel``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync
from airflow.providers.standard.sensors.time_delta import WaitSensor

from noetl_compile.step_decode import decode_reads, decode_step
from noetl_compile.step_model import Step

from ..compat import hitl_operators
from ..errors import NoetlRuntimeError
from ..events import names
from ..runtime.gates import APPROVE, INPUT_OK, REJECT
from .base import NoetlTaskMixin, fail_task, step_output

# On Airflow 3.0 (no HITL operators) stand-ins that refuse construction naming the version.
HITLOperator, HITLEntryOperator = hitl_operators()

__all__ = [
    "APPROVE",
    "REJECT",
    "NoetlApprovalOperator",
    "NoetlInputOperator",
    "NoetlSleepSensor",
    "NoetlWaitUntilSensor",
    "parse_duration",
]

_SIMPLE = re.compile(
    r"(?:(\d++(?:\.\d++)?+)d)?+(?:(\d++(?:\.\d++)?+)h)?+(?:(\d++(?:\.\d++)?+)m)?+(?:(\d++(?:\.\d++)?+)s)?+\Z"
)
_ISO = re.compile(
    r"P(?:(\d++(?:\.\d++)?+)W)?+(?:(\d++(?:\.\d++)?+)D)?+"
    r"(?:T(?:(\d++(?:\.\d++)?+)H)?+(?:(\d++(?:\.\d++)?+)M)?+(?:(\d++(?:\.\d++)?+)S)?+)?+\Z"
)


def parse_duration(value: Any) -> timedelta:
    """``30s``, ``5m``, ``2h``, ``10d``, ``1h30m``, ISO-8601 ``PT2H``/``P10D``, or seconds as a number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"a duration cannot be negative: {value!r}")
        return timedelta(seconds=value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"not a duration: {value!r}")
    text = value.strip()
    simple = _SIMPLE.match(text)
    if simple and any(simple.groups()):
        d, h, m, s = (float(g) if g else 0.0 for g in simple.groups())
        return timedelta(days=d, hours=h, minutes=m, seconds=s)
    iso = _ISO.match(text.upper())
    if iso and any(iso.groups()):
        w, d, h, m, s = (float(g) if g else 0.0 for g in iso.groups())
        return timedelta(weeks=w, days=d, hours=h, minutes=m, seconds=s)
    raise ValueError(f"not a duration: {value!r} (use 30s, 5m, 1h30m, 10d or ISO-8601 like PT2H)")


def _gate(payload: Any, reads: Any, *kinds: str) -> tuple[Step, Mapping[str, Any], dict[str, Any]]:
    """A gate operator's payload and ``reads`` decoded (``step_model``): the step, its gate
    tool's settings and the plain ``reads`` table."""
    spec = decode_step(payload)
    tool = spec.tool
    if tool is None or tool.kind != "gate" or tool.settings.get("gate") not in kinds:
        raise ValueError(f"step {spec.name!r}: expected a `{'/'.join(kinds)}` gate tool")
    table = decode_reads(reads, f"gate {spec.name!r}", args=False).mapping
    return spec, tool.settings, dict(table)


def _users(tool: Mapping[str, Any]) -> list[dict[str, str]] | None:
    assignees = tool.get("assignees")
    if not assignees:
        return None
    if not isinstance(assignees, list) or not all(isinstance(a, str) for a in assignees):
        raise ValueError("`assignees` must be a list of user ids")
    return [{"id": a, "name": a} for a in assignees]


def _timeout(tool: Mapping[str, Any], step: Any) -> timedelta:
    if "timeout" not in tool:
        raise ValueError(f"step {step!r}: an approve/input gate needs `timeout`")
    try:
        return parse_duration(tool["timeout"])
    except ValueError as exc:
        raise ValueError(f"step {step!r}: `timeout`: {exc}") from None


class _GateRuntime(NoetlTaskMixin):
    """What every gate does around Airflow's wait: render its texts with the NoETL context, say
    it pauses (``PlaybookPaused``), and on release say who answered (``SignalReceived``), build
    the step result and finish the step like any other (``complete_step``: set, case rules,
    arcs; Airflow's branch skips the targets not taken)."""

    template_fields = ()
    inherits_from_skipmixin = True

    payload: Step
    reads: dict[str, Any]

    @property
    def step(self) -> str:
        return self.payload["step"]

    @property
    def tool(self) -> Mapping[str, Any]:
        return self.payload["tool"]

    def render_texts(self, context: Any, fields: tuple[str, ...]) -> dict[str, Any]:
        """The gate's templated texts, rendered strictly: a person must never be shown template
        text, so a template that cannot render fails the task naming step, field and template."""
        from ..templating.context import step_context
        from ..templating.render import RenderError, render_value

        scope = step_context(self.payload, self.pull_inputs(context, self.step))
        rendered: dict[str, Any] = {}
        for name in fields:
            if self.tool.get(name) is None:
                continue
            try:
                rendered[name] = render_value(
                    self.tool[name], scope, strict=True, field=f"tool.{name}"
                )
            except RenderError as exc:
                raise fail_task(self.step, ValueError(f"`tool.{name}` {exc}")) from exc
        return rendered

    def _gate_event(self, name: str, status: str, execution_id: int, data: dict[str, Any]):
        from ..events import Event, emit
        from ..templating.render import to_jsonable

        emit(
            Event(
                name=name,
                entity="gate",
                entity_id=self.step,
                status=status,
                execution_id=str(execution_id),
                step=self.step,
                step_run_id=self.step,
                data=to_jsonable({"gate": self.tool.get("gate"), **data}),
            )
        )

    def paused(self, context: Any, data: dict[str, Any]) -> None:
        """``ToolStarted`` (the gate's call is the wait) and ``PlaybookPaused``."""
        from .tool_events import ToolCallEvents

        execution_id = self.execution_id(context)
        with self.recording(context):
            ToolCallEvents(self.step, execution_id, "gate", {"gate": self.tool.get("gate")})
            self._gate_event(names.PLAYBOOK_PAUSED, "paused", execution_id, data)
        self.log.info("NoETL gate %s waits: %s", self.step, data)

    def released(
        self, context: Any, result: dict[str, Any], signal: dict[str, Any] | None
    ) -> dict[str, Any]:
        """``SignalReceived`` (when a signal or timer released the gate), ``ToolCompleted``,
        then the step's own end: set, case rules, arcs, and the XCom downstream steps read."""
        from ..runtime.step import complete_step, routing_targets
        from .tool_events import ToolCallEvents

        execution_id = self.execution_id(context)
        inputs = self.pull_inputs(context, self.step)
        with self.recording(context):
            if signal is not None:
                self._gate_event(names.SIGNAL_RECEIVED, "success", execution_id, signal)
            ToolCallEvents(
                self.step, execution_id, "gate", {"gate": self.tool.get("gate")}, announce=False
            ).completed(result)
            try:
                outcome = complete_step(self.payload, inputs, result, event="call.done")
            except NoetlRuntimeError as exc:
                raise fail_task(self.step, exc) from exc
        output = step_output(outcome)
        self.log.info("NoETL gate %s released: %s; next: %s", self.step, result, outcome.next_steps)
        targets = outcome.next_task_ids if routing_targets(self.payload) else None
        return self.push_and_route(context, output, targets)

    def timed_out(self, context: Any, error: Any) -> Exception:
        """No answer before the deadline and ``on_timeout: fail``: the failure, told as such."""
        from .tool_events import ToolCallEvents

        execution_id = self.execution_id(context)
        message = (
            f"the {self.tool.get('gate')} gate got no answer within {self.tool.get('timeout')} "
            "(on_timeout: fail)"
        )
        with self.recording(context):
            self._gate_event(
                names.SIGNAL_RECEIVED, "error", execution_id, {"timed_out": True, "error": message}
            )
            ToolCallEvents(
                self.step, execution_id, "gate", {"gate": self.tool.get("gate")}, announce=False
            ).errored(message)
        self.log.info("NoETL gate %s timed out: %s", self.step, error)
        return fail_task(self.step, RuntimeError(message))


class _HumanGate(_GateRuntime):
    """approve/input: Airflow's HITL request with the subject and body NoETL rendered."""

    def ask(self, context: Any) -> Any:
        texts = self.render_texts(context, ("subject", "body"))
        # HITLOperator.execute writes these to the hitl_detail row the UI and API show.
        self.subject = str(texts.get("subject", self.step))
        self.body = None if texts.get("body") is None else str(texts["body"])
        from ..compat import timezone

        deadline = timezone.utcnow() + self.response_timeout if self.response_timeout else None
        self.paused(
            context,
            {
                "subject": self.subject,
                "body": self.body,
                "assignees": self.tool.get("assignees") or [],
                "timeout": self.tool.get("timeout"),
                "timeout_at": deadline.isoformat() if deadline else None,
                "on_timeout": self.tool.get("on_timeout", "fail"),
                "options": list(self.options),
            },
        )
        return HITLOperator.execute(self, context)  # raises TaskAwaitingInput

    def answer(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        """Airflow's checks of the answer (options, params), with failures told as NoETL's."""
        from airflow.providers.standard.exceptions import HITLTimeoutError

        try:
            return HITLOperator.execute_complete(self, context, event)
        except HITLTimeoutError as exc:
            raise self.timed_out(context, exc) from exc
        except (ValueError, TypeError) as exc:
            raise fail_task(self.step, ValueError(f"the answer does not fit the gate: {exc}"))


class NoetlApprovalOperator(HITLOperator, _HumanGate):
    template_fields = ()
    pre_execute = NoetlTaskMixin.route_guard  # base.py: before BaseOperator's
    inherits_from_skipmixin = True

    def __init__(self, *, payload: Any, reads: Any, **kwargs: Any) -> None:
        payload, tool, reads = _gate(payload, reads, "approve")
        step = payload.name
        defaults = None
        if tool.get("on_timeout", "fail") == "default":
            default = tool.get("default")
            if default not in ("approve", "reject"):
                raise ValueError(
                    f"step {step!r}: `on_timeout: default` needs `default: approve|reject`"
                )
            defaults = APPROVE if default == "approve" else REJECT
        super().__init__(
            subject=str(tool.get("subject", step)),
            body=tool.get("body"),
            options=[APPROVE, REJECT],
            defaults=defaults,
            response_timeout=_timeout(tool, step),
            assigned_users=_users(tool),
            **kwargs,
        )
        self.payload = payload
        self.reads = reads

    @property
    def serialized_params(self) -> dict[str, Any]:
        """An approval asks for a choice, never a form: its request (the HITL detail row, the
        trigger's kwargs, the check of an answer) holds no params on any Airflow. Airflow 3.1's
        ``HITLOperator`` keeps the DAG's params as its own (3.2 filters them by source), so the
        request of an approval looked like a form of the workload's values there, and `noetlc
        signal --approve` was refused as an answer to an input gate. ``self.params`` stays as
        Airflow made it: the task's context reads the DAG's params from it."""
        return {}

    def execute(self, context: Any) -> Any:
        return self.ask(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        from ..runtime.gates import approval_result

        answer = self.answer(context, event)
        timed_out = bool(event.get("timedout"))
        result = approval_result(
            answer["chosen_options"],
            answer["responded_by_user"],
            answer["responded_at"],
            timed_out,
        )
        signal = {k: result[k] for k in ("choice", "responded_by", "timed_out")}
        return self.released(context, result, signal)


def _form(params: Any, step: Any, need_defaults: bool) -> dict[str, Any]:
    from airflow.sdk import Param

    if not isinstance(params, Mapping) or not params:
        raise ValueError(f"step {step!r}: an input gate needs a non-empty `params` mapping")
    form = {}
    for name, spec in params.items():
        if not isinstance(spec, Mapping):
            raise ValueError(f"step {step!r}: param {name!r} must be a mapping with `type`")  # noqa: TRY004
        schema = {
            k: spec[k] for k in ("type", "description", "enum", "minimum", "maximum") if k in spec
        }
        if need_defaults and "default" not in spec:
            raise ValueError(
                f"step {step!r}: `on_timeout: default` needs a default for param {name!r}"
            )
        form[str(name)] = Param(spec["default"], **schema) if "default" in spec else Param(**schema)
    return form


class NoetlInputOperator(HITLEntryOperator, _HumanGate):
    template_fields = ()
    pre_execute = NoetlTaskMixin.route_guard  # base.py: before BaseOperator's
    inherits_from_skipmixin = True

    def __init__(self, *, payload: Any, reads: Any, **kwargs: Any) -> None:
        payload, tool, reads = _gate(payload, reads, "input")
        step = payload.name
        use_defaults = tool.get("on_timeout", "fail") == "default"
        kwargs.pop("params", None)  # DAG-level params (apply_defaults); the form has its own
        super().__init__(
            subject=str(tool.get("subject", step)),
            body=tool.get("body"),
            params=_form(tool.get("params"), step, use_defaults),
            options=[INPUT_OK],
            defaults=[INPUT_OK] if use_defaults else None,
            response_timeout=_timeout(tool, step),
            assigned_users=_users(tool),
            **kwargs,
        )
        self.payload = payload
        self.reads = reads

    def execute(self, context: Any) -> Any:
        return self.ask(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        from ..runtime.gates import GateAnswerError, input_result, typed_values

        own = self.tool["params"]
        if "error" not in event:
            # Typed before Airflow validates against the form's schema: an API client (or a
            # form) may send "0.2" for a number, which is 0.2 downstream, never a string.
            given = dict(event.get("params_input") or {})
            # Airflow 3.1's request holds the DAG's params beside the gate's own (its operator
            # params include them, and it checks the answer has every one): they pass through.
            dag_level = {k: v for k, v in given.items() if k not in own and k in self.params}
            try:
                typed = typed_values(own, {k: v for k, v in given.items() if k not in dag_level})
            except GateAnswerError as exc:
                raise fail_task(self.step, ValueError(f"the answer does not fit: {exc}")) from exc
            event = {**event, "params_input": {**dag_level, **typed}}
        answer = self.answer(context, event)
        values = {k: v for k, v in (answer["params_input"] or {}).items() if k in own}
        timed_out = bool(event.get("timedout"))
        result = input_result(
            values, answer["responded_by_user"], answer["responded_at"], timed_out
        )
        signal = {
            "responded_by": result["responded_by"],
            "values": values,
            "timed_out": timed_out,
        }
        return self.released(context, result, signal)


def _moment(event: Any, fallback: Any) -> Any:
    """The time a timer fired for (the trigger's event), else ``fallback``."""
    from ..compat import timezone

    if isinstance(event, datetime):
        return event
    if isinstance(event, str):
        try:
            return timezone.parse(event)
        except (ValueError, TypeError):
            pass
    return fallback


# Shorter sleeps stay in the worker. Deferring costs a task restart, and on Airflow 3.3.2 a task
# whose trigger fires before the scheduler has seen the deferring attempt's process exit (that
# took up to ~6 s on a loaded machine: the supervisor lingers 5 s after the task process ends)
# is marked failed. Past this, the triggerer holds the wait and the worker slot is free.
MIN_DEFERRED_SLEEP = timedelta(seconds=15)


class NoetlSleepSensor(WaitSensor, _GateRuntime):
    template_fields = ()
    pre_execute = NoetlTaskMixin.route_guard  # base.py: before BaseOperator's
    inherits_from_skipmixin = True

    def __init__(self, *, payload: Any, reads: Any, **kwargs: Any) -> None:
        payload, tool, reads = _gate(payload, reads, "sleep")
        step = payload.name
        if "duration" not in tool or "until" in tool:
            raise ValueError(f"step {step!r}: NoetlSleepSensor needs `duration` (and no `until`)")
        try:
            wait = parse_duration(tool["duration"])
        except ValueError as exc:
            raise ValueError(f"step {step!r}: `duration`: {exc}") from None
        kwargs.setdefault("deferrable", True)
        super().__init__(time_to_wait=wait, **kwargs)
        self.payload = payload
        self.reads = reads

    def execute(self, context: Any) -> Any:
        from ..compat import timezone

        until = timezone.utcnow() + self.time_to_wait
        self.paused(context, {"duration": self.tool["duration"], "until": until.isoformat()})
        if self.deferrable and self.time_to_wait >= MIN_DEFERRED_SLEEP:
            from airflow.providers.standard.triggers.temporal import DateTimeTrigger

            # Not WaitSensor's own deferral: its trigger ends the task in the triggerer
            # (end_from_trigger=True), so execute_complete (the step's result, its events and
            # its routing) would never run. This trigger hands the moment back to a worker.
            self.defer(
                trigger=DateTimeTrigger(moment=until, end_from_trigger=False),
                method_name="execute_complete",
            )
        # In the worker (not WaitSensor.execute: with deferrable set it would defer to its own
        # trigger, which ends the task in the triggerer).
        time.sleep(max(0.0, (until - timezone.utcnow()).total_seconds()))
        return self.execute_complete(context, until)

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        from ..compat import timezone
        from ..runtime.gates import sleep_result

        result = sleep_result(_moment(event, timezone.utcnow()))
        return self.released(context, result, {"timer": True, **result, "timed_out": False})


class NoetlWaitUntilSensor(DateTimeSensorAsync, _GateRuntime):
    template_fields = ()
    pre_execute = NoetlTaskMixin.route_guard  # base.py: before BaseOperator's
    inherits_from_skipmixin = True

    def __init__(self, *, payload: Any, reads: Any, **kwargs: Any) -> None:
        payload, tool, reads = _gate(payload, reads, "sleep")
        step = payload.name
        if "until" not in tool or "duration" in tool or not isinstance(tool["until"], str):
            raise ValueError(
                f"step {step!r}: NoetlWaitUntilSensor needs a string `until` (and no `duration`)"
            )
        super().__init__(target_time=tool["until"], **kwargs)
        self.payload = payload
        self.reads = reads

    def execute(self, context: Any) -> Any:
        from ..compat import timezone

        until = self.render_texts(context, ("until",)).get("until")
        try:
            moment = until if isinstance(until, datetime) else timezone.parse(str(until))
        except (ValueError, TypeError) as exc:
            raise fail_task(
                self.step, ValueError(f"`until` rendered to {until!r}, not an RFC 3339 time")
            ) from exc
        self.target_time = moment.isoformat()
        self.paused(context, {"until": self.target_time})
        return DateTimeSensorAsync.execute(self, context)  # defers (TaskDeferred)

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        from ..runtime.gates import sleep_result

        result = sleep_result(_moment(event, self.target_time))
        return self.released(context, result, {"timer": True, **result, "timed_out": False})
