"""``kind: noop`` — a step that only routes (the canonical parser demands a tool on every step).

NoETL 5's noop (noetl/tools ded94546 ``noop.rs``) reads ``result`` (the tool's result, as given)
and ``message``: a ``result`` is the step's result here too, and a ``message`` is added to this
runtime's ``{status: noop, step}``.
"""

from __future__ import annotations

from .outcome import ToolCall, ToolOutcome


def run_noop(call: ToolCall) -> ToolOutcome:
    config = call.config
    if config.get("result") is not None:
        return ToolOutcome.success(config["result"])
    result = {"status": "noop", "step": call.step}
    if config.get("message") is not None:
        result["message"] = config["message"]
    return ToolOutcome.success(result)
