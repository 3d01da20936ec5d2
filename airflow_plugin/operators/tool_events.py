"""Tool-call events of a step whose "call" is not a runtime tool: an inline nested playbook, or a
gate (its call is the wait). ``ToolStarted`` when it starts, ``ToolCompleted``/``ToolErrored``
when it ends, with the same correlation fields the step runtime's tool calls carry. The start
and the end may be told by different processes (a gate pauses in one task attempt's process and
resumes in another): ``announce=False`` builds the emitter for the end only."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..errors import error_family
from ..events import names

__all__ = ["ToolCallEvents"]


class ToolCallEvents:
    def __init__(
        self,
        step: str,
        execution_id: int | str,
        kind: str,
        data: Mapping[str, Any] | None = None,
        *,
        announce: bool = True,
    ) -> None:
        self.fields = {
            "entity": "tool",
            "entity_id": f"{step}:{kind}",
            "tool_run_id": f"{step}:{kind}",
            "execution_id": str(execution_id),
            "step": step,
            "step_run_id": step,
            "attempt": 1,
        }
        self.data = {"kind": kind, **(data or {})}
        # The end told by another process than the start has no duration to give.
        self.started = time.monotonic() if announce else None
        if announce:
            self._emit(names.TOOL_STARTED, "in_progress", None, {})

    def completed(self, result: Any) -> None:
        from ..templating.render import to_jsonable

        self._emit(names.TOOL_COMPLETED, "success", "call.done", {"result": to_jsonable(result)})

    def errored(self, exc: BaseException | str) -> None:
        extra: dict[str, Any] = {"error": str(exc)}
        family = error_family(exc) if isinstance(exc, BaseException) else None
        if family is not None:
            extra["error_family"] = family  # errors.error_family: the one classification
        self._emit(names.TOOL_ERRORED, "error", "call.error", extra)

    def _emit(self, name: str, status: str, alias: str | None, extra: dict[str, Any]) -> None:
        from ..events import Event, emit

        duration = None
        if name != names.TOOL_STARTED and self.started is not None:
            duration = time.monotonic() - self.started
        emit(
            Event(
                name=name,
                status=status,
                alias=alias,
                data={**self.data, **extra},
                duration=duration,
                **self.fields,
            )
        )
