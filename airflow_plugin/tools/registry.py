"""Tool registry: ``kind -> executor``.

A kind that is not registered is a missing feature of this runtime, not a tool failure:
:func:`get_tool` raises :class:`ToolNotAvailable` so the step fails loudly instead of pretending to
have run (no fake execution, no silent skip).
"""

from __future__ import annotations

from collections.abc import Callable

from .outcome import ToolCall, ToolOutcome

__all__ = ["Executor", "ToolNotAvailable", "available_tools", "get_tool", "register_tool"]

Executor = Callable[[ToolCall], ToolOutcome]

_REGISTRY: dict[str, Executor] = {}


class ToolNotAvailable(RuntimeError):
    """The tool kind has no executor in this runtime."""

    def __init__(self, kind: object, message: str | None = None):
        self.kind = kind
        if message is None:
            available = ", ".join(sorted(_REGISTRY)) or "none"
            message = (
                f"the {kind} tool is not built yet in this runtime "
                f"(available tool kinds: {available})"
            )
        super().__init__(message)


def register_tool(kind: str, executor: Executor, *, replace: bool = False) -> Executor:
    """Register ``executor`` for ``kind``; refuses to shadow an existing one unless ``replace``."""
    if not isinstance(kind, str) or not kind:
        raise ValueError("tool kind must be a non-empty string")
    if kind in _REGISTRY and not replace and _REGISTRY[kind] is not executor:
        raise ValueError(f"a tool executor for kind {kind!r} is already registered")
    _REGISTRY[kind] = executor
    return executor


def get_tool(kind: object) -> Executor:
    try:
        return _REGISTRY[kind]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ToolNotAvailable(kind) from None


def available_tools() -> list[str]:
    return sorted(_REGISTRY)
