"""The driver contract: a rendered claim in, one claimed row (or none) out per call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import NoetlFailure

__all__ = ["ClaimSpec", "CursorDriver", "CursorDriverError"]


class CursorDriverError(NoetlFailure, RuntimeError):
    """A claim could not be made: the message names the driver and the cause (never a DSN)."""

    def __init__(self, message: str, *, retryable: bool = False, code: str | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.code = code


@dataclass(frozen=True)
class ClaimSpec:
    """A cursor as the loop's head rendered it, once per loop start (seed 002: the claim is
    rendered against the execution context; row values only ever reach the item via ``iter``).

    ``auth`` is the name of a connection, ``options`` the driver's own settings
    (``pool_size`` for postgres)."""

    kind: str
    claim: str
    auth: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    step: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "claim": self.claim,
            "auth": self.auth,
            "options": dict(self.options),
            "step": self.step,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClaimSpec:
        return cls(
            kind=str(data["kind"]),
            claim=str(data["claim"]),
            auth=data.get("auth"),
            options=dict(data.get("options") or {}),
            step=str(data.get("step") or ""),
        )


@runtime_checkable
class CursorDriver(Protocol):
    """``Driver(spec)`` opens a handle; ``claim()`` atomically takes one work item and returns
    it as a JSON-safe mapping, or None when nothing is left; ``close()`` releases the handle
    (not a shared pool). A claim must be committed when it returns: a slot that dies afterwards
    leaves the item claimed, and the claim statement's own stale-claim clause takes it back."""

    def __init__(self, spec: ClaimSpec) -> None: ...

    def claim(self) -> Mapping[str, Any] | None: ...

    def close(self) -> None: ...
