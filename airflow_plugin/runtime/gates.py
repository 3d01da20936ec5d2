"""Gate answers and results (spec-extensions §1), pure Python: shared by the gate operators, the
local driver (`noetlc run --signal`) and the HITL client (`noetlc signal`).

* the step results: approve ``{approved, choice, responded_by, responded_at, timed_out}``,
  input ``{values, responded_by, responded_at, timed_out}``, sleep ``{slept_until}``;
* typed values: an input gate's values follow its params' ``type`` (``"0.2"`` for a
  ``number`` is 0.2, never a string downstream); a value that cannot be typed is an error;
* answers: ``approve``/``reject`` for an approve gate, ``k=v`` pairs or one JSON object for an
  input gate, turned into what Airflow's HITL response holds (``chosen_options``,
  ``params_input``).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import NoetlConfigError

__all__ = [
    "APPROVE",
    "INPUT_OK",
    "REJECT",
    "GateAnswerError",
    "answer_syntax",
    "approval_result",
    "input_result",
    "param_defaults",
    "param_schemas",
    "parse_answer",
    "responder",
    "sleep_result",
    "typed_value",
    "typed_values",
]

# The option labels of the Airflow HITL request (what the UI shows and the API takes).
APPROVE, REJECT = "Approve", "Reject"
INPUT_OK = "OK"
_APPROVE_WORDS = {"approve": APPROVE, "approved": APPROVE, "reject": REJECT, "rejected": REJECT}


class GateAnswerError(NoetlConfigError):
    """An answer that does not fit the gate (unknown param, wrong type, bad syntax)."""


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    return str(value)


def responder(user: Any) -> str | None:
    """The id of who answered (Airflow's ``{"id", "name"}``); None for a timeout default."""
    if isinstance(user, Mapping):
        found = user.get("id") or user.get("name")
        return None if found is None else str(found)
    return None if user is None else str(user)


def approval_result(
    chosen_options: Sequence[str], user: Any, responded_at: Any, timed_out: bool
) -> dict[str, Any]:
    approved = list(chosen_options) == [APPROVE]
    return {
        "approved": approved,
        "choice": "approve" if approved else "reject",
        "responded_by": responder(user),
        "responded_at": _iso(responded_at),
        "timed_out": bool(timed_out),
    }


def input_result(
    values: Mapping[str, Any], user: Any, responded_at: Any, timed_out: bool
) -> dict[str, Any]:
    return {
        "values": dict(values),
        "responded_by": responder(user),
        "responded_at": _iso(responded_at),
        "timed_out": bool(timed_out),
    }


def sleep_result(until: Any) -> dict[str, Any]:
    return {"slept_until": _iso(until)}


def _kinds(spec: Mapping[str, Any]) -> list[str]:
    kind = spec.get("type")
    if isinstance(kind, list):
        return [str(k) for k in kind]
    return [str(kind)] if kind else []


def _typed_as(kind: str, value: Any) -> Any:
    """``value`` as a JSON-schema ``kind``; raises ValueError when it is not one."""
    if kind == "null":
        if value is None or value == "null":
            return None
    elif kind == "string":
        if isinstance(value, str):
            return value
    elif kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
    elif kind == "integer":
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            return int(value.strip())
    elif kind == "number":
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, (int, float)):
            return value
        if isinstance(value, str):
            text = value.strip()
            try:
                return int(text)
            except ValueError:
                return float(text)
    elif kind in ("object", "array"):
        parsed = json.loads(value) if isinstance(value, str) else value
        if isinstance(parsed, dict if kind == "object" else list):
            return parsed
    else:  # no type: JSON text becomes data, anything else stays
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value
    raise ValueError


def typed_value(name: str, spec: Mapping[str, Any], value: Any) -> Any:
    """``value`` typed per the param's ``type`` (a list of types: the first that fits)."""
    kinds = _kinds(spec) or [""]
    for kind in kinds:
        try:
            return _typed_as(kind, value)
        except (ValueError, TypeError):
            continue
    want = " or ".join(k for k in kinds if k) or "a value"
    raise GateAnswerError(f"param {name!r} expects {want}, got {value!r}")


def typed_values(params: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Every value typed per its param; an unknown param is an error."""
    unknown = sorted(set(values) - set(params))
    if unknown:
        raise GateAnswerError(
            f"unknown param(s) {', '.join(map(repr, unknown))}; the gate takes "
            f"{', '.join(map(repr, params)) or 'none'}"
        )
    return {
        name: typed_value(name, params[name] if isinstance(params[name], Mapping) else {}, value)
        for name, value in values.items()
    }


def param_defaults(params: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults of a gate's params: DSL specs (``default``) or Airflow's serialized
    params (``value``)."""
    found = {}
    for name, spec in params.items():
        if isinstance(spec, Mapping):
            if "default" in spec:
                found[name] = spec["default"]
            elif spec.get("value") is not None:
                found[name] = spec["value"]
    return found


def param_schemas(params: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """name -> JSON schema, from DSL specs or Airflow's serialized params (``{value, schema}``)."""
    out: dict[str, Mapping[str, Any]] = {}
    for name, spec in params.items():
        spec = spec if isinstance(spec, Mapping) else {}
        schema = spec.get("schema")
        out[name] = schema if isinstance(schema, Mapping) else spec
    return out


def answer_syntax(gate: str, options: Sequence[str], params: Mapping[str, Any]) -> str:
    """How to answer this gate with ``--signal`` (for messages)."""
    if params:
        return " ".join(
            f"--signal {gate}={name}=<{'|'.join(_kinds(schema)) or 'value'}>"
            for name, schema in param_schemas(params).items()
        )
    words = [o.lower() for o in options]
    return f"--signal {gate}={'|'.join(words) or 'approve|reject'}"


def parse_answer(
    texts: Sequence[str], options: Sequence[str], params: Mapping[str, Any]
) -> tuple[list[str], dict[str, Any]]:
    """(chosen_options, params_input) for the answers given to one gate.

    An approve gate takes one ``approve`` or ``reject``; an input gate takes ``name=value``
    pairs (repeatable) or a JSON object; params not given take their defaults, a param with no
    default must be given. Values are typed per the params' schema."""
    if not texts:
        raise GateAnswerError("no answer given")
    if not params:
        if len(texts) != 1:
            raise GateAnswerError(f"give one answer, not {len(texts)}")
        word = texts[0].strip().lower()
        choice = _APPROVE_WORDS.get(word)
        by_label = {o.lower(): o for o in options}
        if word in by_label:
            choice = by_label[word]
        if choice is None or (options and choice not in options):
            raise GateAnswerError(
                f"expected {' or '.join(o.lower() for o in options) or 'approve or reject'}, "
                f"got {texts[0]!r}"
            )
        return [choice], {}
    given: dict[str, Any] = {}
    schemas = param_schemas(params)
    for text in texts:
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                value = json.loads(stripped)
            except ValueError as exc:
                raise GateAnswerError(f"not a JSON object: {exc}") from None
            if not isinstance(value, dict):
                raise GateAnswerError("expected a JSON object of param values")
            given.update(value)
            continue
        name, sep, raw = text.partition("=")
        if not sep or not name.strip():
            raise GateAnswerError(f"expected name=value or a JSON object, got {text!r}")
        given[name.strip()] = raw
    values = typed_values(schemas, given)
    missing = [name for name in params if name not in values]
    defaults = param_defaults(params)
    without = [name for name in missing if name not in defaults]
    if without:
        raise GateAnswerError(f"no value for param(s) {', '.join(map(repr, without))}")
    for name in missing:
        values[name] = defaults[name]
    chosen = [INPUT_OK] if not options or INPUT_OK in options else [options[0]]
    return chosen, {name: values[name] for name in params}
