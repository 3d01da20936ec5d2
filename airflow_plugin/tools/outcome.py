"""What a tool call produces.

Every executor returns a :class:`ToolOutcome` instead of raising: policies (retry, continue on
error, routing on ``call.error``) need the failure as data. ``status`` is only ``ok`` or
``error``; tool-specific statuses (``noop``, ``success``...) stay inside ``data``.

A failed outcome may carry ``reported``: the result document the tool itself returns for the
failure in NoETL (its python tool answers ``{id, status: "error", error: <text>}``, or hands back
the dict whose ``status: "error"`` marked the call failed). When set, that document is what
``{{ step }}`` holds; ``error`` stays the structured error for ``{{ error }}`` and the events.
"""

from __future__ import annotations

import traceback as _traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from noetl_compile.engine_profiles import CANONICAL, EngineProfile

__all__ = ["ToolCall", "ToolOutcome", "error_from_exception", "tool_error"]


@dataclass(frozen=True)
class ToolCall:
    """One invocation of a tool.

    ``config``: the tool (or pipeline task) configuration, already rendered.
    ``step_input``: the step's rendered ``input``; NoETL lays it over the tool's own
    ``input``/``args``.
    ``context``: the render context the config was rendered with (python exposes it as
    ``context``).
    ``profile``: the engine whose tool semantics apply (``python_function_body``: NoETL 5's
    python calling convention; ``python_error_status_fails``: whether a returned
    ``status: error`` fails the call; ``postgres_result_per_statement``: case-v2's result shape).
    """

    step: str
    task: str
    config: Mapping[str, Any]
    step_input: Mapping[str, Any] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    profile: EngineProfile = CANONICAL


@dataclass
class ToolOutcome:
    status: Literal["ok", "error"]
    data: Any = None
    error: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    reported: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def success(cls, data: Any, **meta: Any) -> ToolOutcome:
        return cls("ok", data=data, meta=dict(meta))

    @classmethod
    def failure(
        cls,
        error: dict[str, Any],
        data: Any = None,
        *,
        reported: dict[str, Any] | None = None,
        **meta: Any,
    ) -> ToolOutcome:
        return cls("error", data=data, error=error, meta=dict(meta), reported=reported)


def tool_error(
    kind: str,
    type: str,  # the field is called ``type`` in NoETL's error envelope
    message: str,
    *,
    retryable: bool = False,
    code: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The structured error every tool returns.

    ``kind``: the tool kind; ``type``: an exception-like class name (``HTTPStatusError``,
    ``UniqueViolation``, ``ConfigError``...); ``retryable``: whether trying again may succeed
    (timeouts, 429/5xx, lost connections, serialization failures); ``code``: the tool's own code
    (``HTTP_503``, a SQLSTATE like ``23505``), ``None`` when there is none.
    """
    return {
        "kind": kind,
        "type": type,
        "message": message,
        "retryable": retryable,
        "code": code,
        **extra,
    }


def error_from_exception(
    exc: BaseException,
    *,
    kind: str,
    with_traceback: bool = True,
    retryable: bool = False,
    code: str | None = None,
) -> dict[str, Any]:
    """:func:`tool_error` of an exception, with its traceback (the NoETL ``output.py`` fields)."""
    error = tool_error(kind, type(exc).__name__, str(exc), retryable=retryable, code=code)
    if with_traceback:
        error["traceback"] = "".join(_traceback.format_exception(exc))
    return error
