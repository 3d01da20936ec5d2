"""Tool registry: ``kind -> executor``.

Built-in executors are named here and imported on first use, so a step that only runs python
never imports httpx, psycopg or duckdb. A kind that has no executor is a missing feature of this
runtime, not a tool failure: :func:`get_tool` raises :class:`ToolNotAvailable` so the step fails
loudly, naming the kind and what is supported, instead of pretending to have run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..errors import NoetlUnavailable
from .outcome import ToolCall, ToolOutcome

__all__ = ["Executor", "ToolNotAvailable", "available_tools", "get_tool", "register_tool"]

Executor = Callable[[ToolCall], ToolOutcome]

# kind -> (module under airflow_plugin.tools, executor function). Aliases share an executor.
BUILTIN_TOOLS: dict[str, tuple[str, str]] = {
    "python": ("python", "run_python"),
    "noop": ("noop", "run_noop"),
    "http": ("http", "run_http"),
    "postgres": ("postgres", "run_postgres"),
    "duckdb": ("duckdb", "run_duckdb"),
    "secrets": ("secrets", "run_secrets"),
    "secret_manager": ("secrets", "run_secrets"),
    "credential": ("secrets", "run_secrets"),
    "transfer": ("transfer", "run_transfer"),
    # qiskit loads with the package, on the first quantum step only.
    "quantum": ("quantum", "run_quantum"),
    "shell": ("shell", "run_shell"),
}
# Kinds a floor above provides by `register_tool` (a nested playbook runs the interpreter:
# runtime/interpreter.py registers it when imported). Named here so a lookup before that import
# says what is missing instead of listing the kind as unknown.
PROVIDED_ABOVE: dict[str, str] = {
    "playbook": "airflow_plugin.runtime.interpreter",
    "playbooks": "airflow_plugin.runtime.interpreter",
}

_REGISTRY: dict[str, Executor] = {}


class ToolNotAvailable(NoetlUnavailable):
    """The tool kind has no executor in this runtime."""

    def __init__(self, kind: object, message: str | None = None):
        self.kind = kind
        if message is None:
            message = (
                f"this runtime cannot execute tool kind {kind!r} "
                f"(supported kinds: {', '.join(available_tools())})"
            )
        super().__init__(message)


def register_tool(kind: str, executor: Executor, *, replace: bool = False) -> Executor:
    """Register ``executor`` for ``kind``; refuses to shadow an existing one unless ``replace``."""
    if not isinstance(kind, str) or not kind:
        raise ValueError("tool kind must be a non-empty string")
    current = _REGISTRY.get(kind)
    if current is None and kind in BUILTIN_TOOLS and not replace:
        current = _load_builtin(kind)
    if current is not None and not replace and current is not executor:
        raise ValueError(f"a tool executor for kind {kind!r} is already registered")
    _REGISTRY[kind] = executor
    return executor


def _load_builtin(kind: str) -> Executor:
    module_name, function = BUILTIN_TOOLS[kind]
    module = importlib.import_module(f"{__package__}.{module_name}")
    executor = getattr(module, function)
    _REGISTRY[kind] = executor
    return executor


def get_tool(kind: object) -> Executor:
    executor = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if executor is not None:
        return executor
    if isinstance(kind, str) and kind in BUILTIN_TOOLS:
        return _load_builtin(kind)
    if isinstance(kind, str) and kind in PROVIDED_ABOVE:
        raise ToolNotAvailable(
            kind, f"tool kind {kind!r} is registered by {PROVIDED_ABOVE[kind]}, not imported yet"
        )
    raise ToolNotAvailable(kind)


def available_tools() -> list[str]:
    return sorted(set(_REGISTRY) | set(BUILTIN_TOOLS) | set(PROVIDED_ABOVE))
