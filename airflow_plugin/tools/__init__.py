"""Tool executors of the runtime (Airflow-free).

Built in so far: ``python``, ``noop``. Every other kind raises :class:`ToolNotAvailable`.
"""

from __future__ import annotations

from .noop import run_noop
from .outcome import ToolCall, ToolOutcome, error_from_exception
from .python import run_python
from .registry import Executor, ToolNotAvailable, available_tools, get_tool, register_tool

register_tool("python", run_python)
register_tool("noop", run_noop)

__all__ = [
    "Executor",
    "ToolCall",
    "ToolNotAvailable",
    "ToolOutcome",
    "available_tools",
    "error_from_exception",
    "get_tool",
    "register_tool",
    "run_noop",
    "run_python",
]
