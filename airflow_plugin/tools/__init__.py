"""Tool executors of the runtime (Airflow-free at import time).

Each kind is one module exposing ``run_<kind>(ToolCall) -> ToolOutcome``; ``registry`` maps kinds
to them and imports a module only when a step first uses that kind.
"""

from __future__ import annotations

from .outcome import ToolCall, ToolOutcome, error_from_exception, tool_error
from .registry import Executor, ToolNotAvailable, available_tools, get_tool, register_tool

__all__ = [
    "Executor",
    "ToolCall",
    "ToolNotAvailable",
    "ToolOutcome",
    "available_tools",
    "error_from_exception",
    "get_tool",
    "register_tool",
    "tool_error",
]
