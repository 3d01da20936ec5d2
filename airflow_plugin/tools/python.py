"""``kind: python`` — run inline Python code with NoETL's conventions.

Conventions reproduced (reference/noetl_dsl.md sections 1b and 3.5):

* inputs — the tool's ``args`` and ``input`` with the step's ``input`` laid over them — become
  global variables of the code, and are also available whole as ``input`` / ``args``;
* ``context`` (the render context as plain data), ``json``, ``os``, ``datetime``, ``uuid`` are
  preset globals; ``libs: {alias: module}`` or ``{alias: {from, import}}`` adds more;
* the result is the value of a top-level ``result = ...``; otherwise, for v1 playbooks, the return
  value of ``def main(...)`` called with the inputs as keyword arguments (a single parameter
  named ``input_data``/``input``/``args``/``data`` that is not itself an input receives the whole
  input dict); otherwise a summary ``{"status": "ok", "locals": {...}}``;
* a raised exception or a syntax error becomes an error outcome carrying the exception type,
  message and traceback; a result dict with ``status == "error"`` is an error outcome too.

The code runs in the task's process with full builtins: playbook code is trusted like DAG code.
The Jinja sandbox protects template rendering, not this.
"""

from __future__ import annotations

import base64
import datetime
import importlib
import inspect
import json
import os
import time
import traceback
import types
import uuid
from collections.abc import Mapping
from typing import Any

from ..runtime.context import PROTECTED_KEY
from ..runtime.render import to_jsonable
from .outcome import ToolCall, ToolOutcome, error_from_exception
from .registry import ToolNotAvailable

__all__ = ["merged_inputs", "run_python"]

KIND = "python"

# Parameter names v1 playbooks use for "give me all inputs as one dict".
_WHOLE_INPUT_PARAMS = ("input_data", "input", "args", "data", "payload", "kwargs")

_UNSET = object()


def merged_inputs(config: Mapping[str, Any], step_input: Mapping[str, Any]) -> dict[str, Any]:
    """Tool ``args``, then tool ``input``, then the step input on top (NoETL's worker order)."""
    merged: dict[str, Any] = {}
    for layer in (config.get("args"), config.get("input"), step_input):
        if isinstance(layer, Mapping):
            merged.update(layer)
    return merged


def _source(config: Mapping[str, Any]) -> str | None:
    code = config.get("code")
    if isinstance(code, str):
        return code
    encoded = config.get("code_b64")
    if isinstance(encoded, str):
        return base64.b64decode(encoded).decode("utf-8")
    if config.get("script") is not None:
        # NoETL loads ``script`` from a file, GCS, S3 or HTTP; none of that exists here yet.
        raise ToolNotAvailable(
            "python",
            "the python tool's `script` source is not built yet in this runtime; use `code`",
        )
    return None


def _load_libs(libs: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = {}
    if not isinstance(libs, Mapping):
        return loaded
    for alias, spec in libs.items():
        if isinstance(spec, str):
            loaded[alias] = importlib.import_module(spec)
        elif isinstance(spec, Mapping) and "from" in spec:
            module = importlib.import_module(spec["from"])
            loaded[alias] = getattr(module, spec.get("import", alias))
    return loaded


def _plain_context(context: Mapping[str, Any]) -> dict[str, Any]:
    return to_jsonable({k: v for k, v in context.items() if k != PROTECTED_KEY})


def _call_main(main: Any, inputs: dict[str, Any]) -> Any:
    try:
        signature = inspect.signature(main)
    except (TypeError, ValueError):
        return main(**inputs)
    params = list(signature.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return main(**inputs)
    kwargs: dict[str, Any] = {}
    for param in params:
        if param.kind not in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            continue
        if param.name in inputs:
            kwargs[param.name] = inputs[param.name]
        elif param.name in _WHOLE_INPUT_PARAMS and param.default is inspect.Parameter.empty:
            kwargs[param.name] = dict(inputs)
        # else: its default applies, or Python raises a clear "missing argument" TypeError.
    return main(**kwargs)


def _summary(namespace: dict[str, Any], preset: set[str]) -> dict[str, Any]:
    simple = (str, int, float, bool, type(None), list, dict, tuple)
    created = {
        name: value
        for name, value in namespace.items()
        if name not in preset and not name.startswith("__") and isinstance(value, simple)
    }
    return {"status": "ok", "locals": to_jsonable(created)}


def run_python(call: ToolCall) -> ToolOutcome:
    started = time.monotonic()
    config = call.config
    filename = f"<noetl python {call.step}:{call.task}>"

    def meta() -> dict[str, Any]:
        return {"duration_ms": round((time.monotonic() - started) * 1000, 3)}

    try:
        code = _source(config)
    except ToolNotAvailable:
        raise
    except Exception as exc:  # noqa: BLE001 - bad base64 etc. is a tool error
        return ToolOutcome.failure(error_from_exception(exc, kind=KIND), **meta())
    if code is None:
        return ToolOutcome.failure(
            {
                "kind": KIND,
                "type": "ConfigError",
                "message": "python tool needs `code` (or `code_b64`)",
            },
            **meta(),
        )

    try:
        compiled = compile(code, filename, "exec")
    except SyntaxError as exc:
        error = error_from_exception(exc, kind=KIND, with_traceback=False)
        error["line"] = exc.lineno
        error["column"] = exc.offset
        error["traceback"] = "".join(traceback.format_exception_only(type(exc), exc))
        return ToolOutcome.failure(error, **meta())

    inputs = merged_inputs(config, call.step_input)
    namespace: dict[str, Any] = {
        "__name__": "__noetl_python__",
        "__builtins__": __builtins__,
        "json": json,
        "os": os,
        "datetime": datetime,
        "uuid": uuid,
        "context": _plain_context(call.context),
        "input": dict(inputs),
        "args": dict(inputs),
    }
    try:
        namespace.update(_load_libs(config.get("libs")))
    except Exception as exc:  # noqa: BLE001
        return ToolOutcome.failure(error_from_exception(exc, kind=KIND), **meta())
    namespace.update(inputs)  # explicit bindings win over the presets
    preset = set(namespace)
    before = namespace.get("result", _UNSET)

    try:
        exec(compiled, namespace)  # noqa: S102 - running playbook code is this tool's purpose
        after = namespace.get("result", _UNSET)
        if after is not _UNSET and after is not before:
            value = after
        elif isinstance(namespace.get("main"), types.FunctionType):
            value = _call_main(namespace["main"], inputs)
        else:
            value = _summary(namespace, preset)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - every failure of user code is data
        return ToolOutcome.failure(error_from_exception(exc, kind=KIND), **meta())

    value = to_jsonable(value)
    if isinstance(value, dict) and str(value.get("status", "")).lower() == "error":
        message = (
            value.get("error") or value.get("message") or "python code returned status 'error'"
        )
        error = {
            "kind": KIND,
            "type": "ToolError",
            "message": message if isinstance(message, str) else json.dumps(message),
        }
        return ToolOutcome.failure(error, data=value, **meta())
    return ToolOutcome.success(value, **meta())
