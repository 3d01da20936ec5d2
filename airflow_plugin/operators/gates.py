"""Gate steps (``tool.kind: gate``, spec-extensions §1) on Airflow's native waiting constructs.

| gate | operator | base class |
|---|---|---|
| ``approve`` | ``NoetlApprovalOperator`` | ``HITLOperator`` with options Approve/Reject (a rejection is routed by the step's arcs, so it must not skip downstream tasks the way ``ApprovalOperator`` does) |
| ``input`` | ``NoetlInputOperator`` | ``HITLEntryOperator`` with the gate's params as a form |
| ``sleep`` + ``duration`` | ``NoetlSleepSensor`` | ``WaitSensor(timedelta, deferrable=True)`` |
| ``sleep`` + ``until`` | ``NoetlWaitUntilSensor`` | ``DateTimeSensorAsync`` (target rendered by the NoETL runtime) |

``template_fields = ()`` everywhere: subject, body and target time are DSL templates that the
NoETL runtime renders, never Airflow's Jinja. Durations (``30s``, ``1h30m``, ``PT2H``, ``P10D``)
are parsed at DAG import, so a bad one is an import error naming the step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import HITLEntryOperator, HITLOperator
from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync
from airflow.providers.standard.sensors.time_delta import WaitSensor

from .loop import not_built, validate_reads, validate_step_payload

__all__ = [
    "NoetlApprovalOperator",
    "NoetlInputOperator",
    "NoetlSleepSensor",
    "NoetlWaitUntilSensor",
    "parse_duration",
]

_SIMPLE = re.compile(
    r"(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?\Z"
)
_ISO = re.compile(
    r"P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?\Z"
)
APPROVE, REJECT = "Approve", "Reject"


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


def _gate(payload: Any, *kinds: str) -> Mapping[str, Any]:
    validate_step_payload(payload)
    tool = payload.get("tool")
    step = payload.get("step")
    if not isinstance(tool, Mapping) or tool.get("kind") != "gate" or tool.get("gate") not in kinds:
        raise ValueError(f"step {step!r}: expected a `{'/'.join(kinds)}` gate tool")
    return tool


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


class NoetlApprovalOperator(HITLOperator):
    template_fields = ()

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        tool = _gate(payload, "approve")
        step = payload["step"]
        validate_reads(reads, f"gate {step!r}")
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

    def execute(self, context: Any) -> Any:
        raise not_built(self, "rendering the approval request and routing on the answer")


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


class NoetlInputOperator(HITLEntryOperator):
    template_fields = ()

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        tool = _gate(payload, "input")
        step = payload["step"]
        validate_reads(reads, f"gate {step!r}")
        use_defaults = tool.get("on_timeout", "fail") == "default"
        kwargs.pop("params", None)  # DAG-level params (apply_defaults); the form has its own
        super().__init__(
            subject=str(tool.get("subject", step)),
            body=tool.get("body"),
            params=_form(tool.get("params"), step, use_defaults),
            options=[HITLEntryOperator.OK],
            defaults=[HITLEntryOperator.OK] if use_defaults else None,
            response_timeout=_timeout(tool, step),
            assigned_users=_users(tool),
            **kwargs,
        )
        self.payload = payload
        self.reads = reads

    def execute(self, context: Any) -> Any:
        raise not_built(self, "rendering the input form and returning the values")


class NoetlSleepSensor(WaitSensor):
    template_fields = ()

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        tool = _gate(payload, "sleep")
        step = payload["step"]
        validate_reads(reads, f"gate {step!r}")
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
        raise not_built(self, "a sleep gate with its result and routing")


class NoetlWaitUntilSensor(DateTimeSensorAsync):
    template_fields = ()

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        tool = _gate(payload, "sleep")
        step = payload["step"]
        validate_reads(reads, f"gate {step!r}")
        if "until" not in tool or "duration" in tool or not isinstance(tool["until"], str):
            raise ValueError(
                f"step {step!r}: NoetlWaitUntilSensor needs a string `until` (and no `duration`)"
            )
        super().__init__(target_time=tool["until"], **kwargs)
        self.payload = payload
        self.reads = reads

    def execute(self, context: Any) -> Any:
        raise not_built(self, "rendering `until` and waiting for it")
