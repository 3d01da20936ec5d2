"""C505-C510: the gate tool (docs/gates.md).

A gate pauses its branch until a signal or a timer; a config the runtime cannot use is found
here rather than when an execution has already been waiting for days.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from ..airflow_versions import has_hitl, version_label
from ..read.base import ROUTING_KEYS, did_you_mean, is_template, type_name
from .context import CheckContext

GATE_TYPES = ("approve", "input", "sleep")
COMMON_KEYS = {"kind", "name", "spec", "output", "input", "gate"}
KEYS_BY_GATE = {
    "approve": {"subject", "body", "timeout", "on_timeout", "default", "assignees"},
    "input": {"subject", "body", "params", "timeout", "on_timeout", "assignees"},
    "sleep": {"duration", "until"},
}
ALL_GATE_KEYS = set().union(*KEYS_BY_GATE.values())
PARAM_TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}
PARSE_TIME_KEYS = ("assignees", "on_timeout", "default", "params")
PARAM_KEYS = {"type", "default", "description", "enum", "minimum", "maximum"}

# `30s`, `5m`, `1h30m`, `2d12h` ... (each unit once, largest first, as the runtime parses them)
# or ISO-8601 `PT2H`, `P10D`, `P1DT2H30M`, `PT0.5S`.
_SHORT = re.compile(
    r"(?=\d)(?:\d++(?:\.\d++)?+d)?+(?:\d++(?:\.\d++)?+h)?+(?:\d++(?:\.\d++)?+m)?+(?:\d++(?:\.\d++)?+s)?+"
)
# The longest duration a Python timedelta (what the operators build when the DAG is parsed) holds.
MAX_DURATION_SECONDS = timedelta.max.total_seconds()
_ISO = re.compile(
    r"P(?:(\d++(?:\.\d++)?+)W)?+(?:(\d++(?:\.\d++)?+)D)?+"
    r"(?:T(?:(\d++(?:\.\d++)?+)H)?+(?:(\d++(?:\.\d++)?+)M)?+(?:(\d++(?:\.\d++)?+)S)?+)?+"
)
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def duration_seconds(text: str) -> float | None:
    """Seconds of a duration string, or None when it is not one of the accepted spellings."""
    text = text.strip()
    if _SHORT.fullmatch(text):
        return sum(
            float(n) * _UNIT_SECONDS[u]
            for n, u in re.findall(r"(?<![\d.])(\d++(?:\.\d++)?+)([dhms])", text)
        )
    match = _ISO.fullmatch(text.upper())
    if match and text.upper() not in ("P", "PT") and not text.upper().endswith("T"):
        weeks, days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
        return (weeks * 7 + days) * 86400 + hours * 3600 + minutes * 60 + seconds
    return None


def check_gate(ctx: CheckContext, tool: Any, label: str) -> None:
    if not isinstance(tool, dict):
        return
    gate = tool.get("gate")
    if "gate" not in tool:
        ctx.report(
            "C510", ctx.pos(tool), f"the gate {label} needs `gate` ({', '.join(GATE_TYPES)})"
        )
        return
    if is_template(gate):
        # The operator class is chosen from `gate` when the DAG file is parsed, before anything
        # is rendered: a template there cannot work.
        ctx.report(
            "C510",
            ctx.pos(tool, "gate"),
            f"`gate` of {label} must be written out ({', '.join(GATE_TYPES)}), not a template: "
            "the DAG picks the gate's operator when it is parsed",
        )
        return
    if gate not in GATE_TYPES:
        ctx.report(
            "C510",
            ctx.pos(tool, "gate"),
            f"`gate` of {label} must be one of {', '.join(GATE_TYPES)}, not {gate!r}"
            + did_you_mean(str(gate), GATE_TYPES),
        )
        return
    _check_keys(ctx, tool, gate, label)
    if gate != "sleep" and not has_hitl(ctx.project.airflow):
        ctx.report(
            "C518",
            ctx.pos(tool, "gate"),
            f"the {gate} gate {label} cannot run on Airflow {version_label(ctx.project.airflow)}: "
            "approve/input gates need Airflow's human-in-the-loop operators (Airflow 3.1 or later)",
            hint="compile for the Airflow 3.1+ that will run it (`--airflow-version`), or replace "
            "the gate (a sleep gate, a step that polls for the decision)",
        )
    if gate == "sleep":
        _check_sleep(ctx, tool, label)
        return
    if "subject" not in tool or tool["subject"] in (None, ""):
        ctx.report(
            "C510",
            ctx.pos(tool, "gate"),
            f"the {gate} gate {label} needs a `subject` (the question to ask)",
        )
    elif not isinstance(tool["subject"], str):
        ctx.report("C510", ctx.pos(tool, "subject"), f"`subject` of {label} must be a string")
    if "timeout" not in tool or tool["timeout"] is None:
        ctx.report(
            "C505",
            ctx.pos(tool, "gate"),
            f"the {gate} gate {label} has no `timeout`; a forgotten execution would wait forever",
            hint="add e.g. `timeout: 2d` (and `on_timeout: fail` or `default`)",
        )
    else:
        _check_duration(ctx, tool, "timeout", label, positive=True)
    # The operators read these when the DAG file is parsed, before anything is rendered (the
    # reviewers, the form, the timeout answer): a template there would be kept as text, or fail
    # the DAG's import. Reported here with the operator's rule; the fields are then not read on.
    for key in PARSE_TIME_KEYS:
        if key in tool and _parse_time_template(ctx, tool, key, label):
            return
    _check_assignees(ctx, tool, label)
    on_timeout = tool.get("on_timeout", "fail")
    if (
        "on_timeout" in tool
        and not is_template(on_timeout)
        and on_timeout not in ("fail", "default")
    ):
        ctx.report(
            "C510",
            ctx.pos(tool, "on_timeout"),
            f"`on_timeout` of {label} must be `fail` or `default`, not {on_timeout!r}",
        )
    if gate == "approve":
        _check_approve_default(ctx, tool, label, on_timeout)
    else:
        _check_params(ctx, tool, label, on_timeout)


def _check_keys(ctx: CheckContext, tool: dict, gate: str, label: str) -> None:
    allowed = COMMON_KEYS | KEYS_BY_GATE[gate]
    for key in tool:
        if key in allowed or key in ROUTING_KEYS:
            continue  # routing keys: S118 (check/tool_fields.py)
        if key in ALL_GATE_KEYS:
            message = f"`{key}` does not apply to a {gate} gate ({label})"
        else:
            message = f"unknown key {str(key)!r} in the gate {label}" + did_you_mean(
                str(key), allowed
            )
        ctx.report("C510", ctx.key_pos(tool, key), message)


def _check_sleep(ctx: CheckContext, tool: dict, label: str) -> None:
    has_duration, has_until = tool.get("duration") is not None, tool.get("until") is not None
    if has_duration == has_until:
        what = "both `duration` and `until`" if has_duration else "neither `duration` nor `until`"
        where = ctx.key_pos(tool, "until") if has_duration else ctx.pos(tool, "gate")
        ctx.report("C508", where, f"the sleep gate {label} has {what}; give exactly one")
    if has_duration:
        _check_duration(ctx, tool, "duration", label, positive=False)
    if has_until:
        until = tool["until"]
        if isinstance(until, datetime) or is_template(until):
            return  # YAML already parsed it as a timestamp, or it is rendered at run time
        if not isinstance(until, str) or not _is_rfc3339(until):
            ctx.report(
                "C510",
                ctx.pos(tool, "until"),
                f"`until` of {label} must be an RFC 3339 timestamp (e.g. 2026-05-01T09:00:00Z) "
                f"or a template, not {until!r}",
            )


def _is_rfc3339(text: str) -> bool:
    try:
        datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return "T" in text.upper() or " " in text.strip()


def _check_duration(ctx: CheckContext, tool: dict, key: str, label: str, *, positive: bool) -> None:
    value = tool[key]
    if is_template(value):
        # The operator turns it into a timedelta when the DAG file is parsed, before rendering.
        ctx.report(
            "C510",
            ctx.pos(tool, key),
            f"`{key}` of {label} must be written out (e.g. 30s, 2d), not a template: "
            "the DAG reads it when it is parsed",
        )
        return
    seconds = duration_seconds(value) if isinstance(value, str) else None
    if seconds is None:
        ctx.report(
            "C510",
            ctx.pos(tool, key),
            f"`{key}` of {label} is not a duration: {value!r} "
            "(use e.g. 30s, 5m, 2h, 10d, 1h30m or ISO-8601 PT2H)",
        )
    elif positive and seconds <= 0:
        ctx.report("C510", ctx.pos(tool, key), f"`{key}` of {label} must be longer than zero")
    elif seconds >= MAX_DURATION_SECONDS:
        ctx.report(
            "C510",
            ctx.pos(tool, key),
            f"`{key}` of {label} is longer than a Python timedelta can hold (about 2.7 million "
            "years); the DAG would fail to import",
        )


def _parse_time_template(ctx: CheckContext, parent: Any, key: Any, label: str) -> bool:
    """Report every template in ``parent[key]`` (a value, or inside lists and mappings, keys
    too); True if there was one."""
    value = parent[key]
    found = False
    if is_template(value):
        ctx.report(
            "C510",
            ctx.pos(parent, key),
            f"`{key}` of {label} must be written out, not a template: the gate reads it when "
            "the DAG file is parsed, before anything is rendered",
        )
        return True
    if isinstance(value, dict):
        for inner in list(value):
            if is_template(inner):
                ctx.report(
                    "C510",
                    ctx.key_pos(value, inner),
                    f"a key of `{key}` in {label} must be written out, not a template: the gate "
                    "reads it when the DAG file is parsed, before anything is rendered",
                )
                found = True
            found = _parse_time_template(ctx, value, inner, label) or found
    elif isinstance(value, list):
        for index in range(len(value)):
            found = _parse_time_template(ctx, value, index, label) or found
    return found


def _check_assignees(ctx: CheckContext, tool: dict, label: str) -> None:
    assignees = tool.get("assignees")
    if assignees is None or is_template(assignees):
        return
    if not isinstance(assignees, list) or not all(isinstance(a, str) for a in assignees):
        ctx.report(
            "C510", ctx.pos(tool, "assignees"), f"`assignees` of {label} must be a list of user ids"
        )


def _check_approve_default(ctx: CheckContext, tool: dict, label: str, on_timeout: Any) -> None:
    default = tool.get("default")
    if default is not None and not is_template(default) and default not in ("approve", "reject"):
        ctx.report(
            "C510",
            ctx.pos(tool, "default"),
            f"`default` of {label} must be `approve` or `reject`, not {default!r}",
        )
        return
    if on_timeout == "default" and default is None:
        ctx.report(
            "C507",
            ctx.pos(tool, "on_timeout"),
            f"`on_timeout: default` in {label} needs `default: approve` or `default: reject`",
        )


def _check_params(ctx: CheckContext, tool: dict, label: str, on_timeout: Any) -> None:
    params = tool.get("params")
    if is_template(params):
        return
    if not isinstance(params, dict) or not params:
        position = ctx.pos(tool, "params") if "params" in tool else ctx.pos(tool, "gate")
        ctx.report(
            "C506",
            position,
            f"the input gate {label} needs a non-empty `params` mapping "
            "(name -> {type, default?})",
        )
        return
    for name, spec in params.items():
        where = f"param {name!r} of {label}"
        if not isinstance(spec, dict):
            ctx.report("C510", ctx.pos(params, name), f"{where} must be a mapping with `type`")
            continue
        _check_param(ctx, spec, where)
        if on_timeout == "default" and "default" not in spec:
            ctx.report(
                "C507",
                ctx.key_pos(params, name),
                f"{where} has no `default`, but `on_timeout: default` uses every param's default",
            )


def _check_param(ctx: CheckContext, spec: dict, where: str) -> None:
    for key in spec:
        if key not in PARAM_KEYS:
            ctx.report(
                "C510",
                ctx.key_pos(spec, key),
                f"unknown key {str(key)!r} in {where}" + did_you_mean(str(key), PARAM_KEYS),
            )
    kind = spec.get("type")
    if "type" not in spec:
        ctx.report("C510", ctx.pos(spec), f"{where} needs `type` ({', '.join(PARAM_TYPES)})")
        return
    if not isinstance(kind, str) or kind not in PARAM_TYPES:
        ctx.report(
            "C510",
            ctx.pos(spec, "type"),
            f"`type` of {where} must be one of {', '.join(PARAM_TYPES)}, not {kind!r}"
            + did_you_mean(str(kind), PARAM_TYPES),
        )
        return
    default = spec.get("default")
    if default is not None and not is_template(default) and not _has_type(default, kind):
        ctx.report(
            "C510",
            ctx.pos(spec, "default"),
            f"`default` of {where} must be {kind}, not {type_name(default)}",
        )
    enum = spec.get("enum")
    if "enum" in spec and not is_template(enum):  # `enum: null` too: the form's schema refuses it
        if not isinstance(enum, list) or not enum:
            ctx.report("C510", ctx.pos(spec, "enum"), f"`enum` of {where} must be a non-empty list")
        elif default is not None and not is_template(default) and default not in enum:
            ctx.report(
                "C510",
                ctx.pos(spec, "default"),
                f"`default` of {where} is not one of its `enum` values",
            )
    for bound in ("minimum", "maximum"):
        if bound in spec and kind not in ("integer", "number"):
            ctx.report(
                "C510", ctx.key_pos(spec, bound), f"`{bound}` of {where} only applies to numbers"
            )
        elif (
            bound in spec and not _has_type(spec[bound], "number") and not is_template(spec[bound])
        ):
            ctx.report("C510", ctx.pos(spec, bound), f"`{bound}` of {where} must be a number")


def _has_type(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "boolean"
    return isinstance(value, PARAM_TYPES[kind])
