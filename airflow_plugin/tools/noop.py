"""``kind: noop`` — a step that only routes (the canonical parser demands a tool on every step)."""

from __future__ import annotations

from .outcome import ToolCall, ToolOutcome


def run_noop(call: ToolCall) -> ToolOutcome:
    return ToolOutcome.success({"status": "noop", "step": call.step})
