"""The one exception of the quantum tool: what went wrong, as the tool error envelope wants it."""

from __future__ import annotations

from typing import Any

from ...errors import NoetlFailure
from ..outcome import tool_error

__all__ = ["KIND", "QuantumError", "config_error"]

KIND = "quantum"


class QuantumError(NoetlFailure):
    """A quantum call that cannot succeed as given (or a provider that failed).

    ``type``: the error class name reported to the playbook (``QuantumConfigError``,
    ``QASMParseError``...); ``code``: a stable code a `when` can test (``GPU_UNAVAILABLE``...);
    ``retryable``: whether calling again may succeed (a provider that is down, never a bad circuit).
    """

    def __init__(self, type: str, message: str, *, code: str, retryable: bool = False):
        super().__init__(message)
        self.type = type
        self.code = code
        self.retryable = retryable

    def as_tool_error(self) -> dict[str, Any]:
        return tool_error(KIND, self.type, str(self), retryable=self.retryable, code=self.code)


def config_error(message: str) -> QuantumError:
    return QuantumError("QuantumConfigError", message, code="CONFIG")
