"""``kind: noop`` — a step that only routes (the canonical parser demands a tool on every step).

A ``result`` is the step's result as given (NoETL 5's noop, noetl/tools ded94546 ``noop.rs:60``).
Without one, the engine's noop result (``profile.noop_result``): the Python engines'
``{status: noop, step}`` (138c10ed v2_worker_nats.py:2723; a ``message`` added), or NoETL 5's
``{status: ok, message}`` with ``message`` defaulting to ``noop``.
"""

from __future__ import annotations

from .outcome import ToolCall, ToolOutcome


def run_noop(call: ToolCall) -> ToolOutcome:
    config = call.config
    if config.get("result") is not None:
        return ToolOutcome.success(config["result"])
    message = config.get("message")
    if call.profile.noop_result == "ok message":
        return ToolOutcome.success(
            {"status": "ok", "message": "noop" if message is None else message}
        )
    result = {"status": "noop", "step": call.step}
    if message is not None:
        result["message"] = message
    return ToolOutcome.success(result)
