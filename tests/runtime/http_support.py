"""Calling the ``http`` tool in the runtime tests (test_tool_http*.py): one call, what the echo
endpoint saw, and everything an outcome exposes (to search it for secrets)."""

from __future__ import annotations

import json
from typing import Any

from airflow_plugin.tools.http import run_http
from airflow_plugin.tools.outcome import ToolCall, ToolOutcome


def call(config: dict[str, Any], step_input: dict[str, Any] | None = None) -> ToolOutcome:
    return run_http(ToolCall(step="s", task="t", config=config, step_input=step_input or {}))


def echo(outcome: ToolOutcome) -> dict[str, Any]:
    """What the echo endpoint saw."""
    assert outcome.ok, outcome.error
    return outcome.data["data"]


def everything(outcome: ToolOutcome) -> str:
    """All an outcome exposes (result, error, meta), as text to search for secrets."""
    return json.dumps([outcome.data, outcome.error, outcome.meta], default=str)
