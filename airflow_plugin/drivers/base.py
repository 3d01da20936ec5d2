"""The driver contract: a rendered claim in, one claimed row (or none) out per call.

Two levels, each declared by the driver class in ``guarantee`` (text shown in the loop's
events and the docs; :func:`guarantee_of`):

* a plain driver has ``claim() -> row | None`` and ``close()``: **at least once**. An item whose
  slot dies or stalls is claimed again by the claim statement's own stale-claim clause, so a
  slow live slot and its successor can both complete it.
* a leasing driver adds ``claim_lease() -> Lease | None``, ``renew(lease) -> bool``,
  ``item(lease)`` (a context manager whose ``complete() -> bool`` commits the item only if the
  lease's token still holds) and ``stop(lease, reason)``. The runtime renews the lease from a
  heartbeat thread while the item runs and stops the item when a renewal is refused (an
  optional ``held_wait()`` -> seconds until the next lease another slot holds expires lets an
  idle slot wait for it instead of ending the drain); a
  completion the fence refuses is recorded (``CursorLeaseLost``), never applied. An optional
  ``forget()`` deletes the loop start's leases; the loop's tail calls it once every slot ended
  well, so lease storage does not grow with every run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import NoetlFailure

__all__ = [
    "AT_LEAST_ONCE",
    "ClaimSpec",
    "CursorDriver",
    "CursorDriverError",
    "Lease",
    "guarantee_of",
    "leases",
]

AT_LEAST_ONCE = (
    "at least once: the driver takes no lease; an item whose slot dies or stalls past the claim's "
    "stale-claim clause is claimed again and may complete twice"
)


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
    # Which loop start the claims belong to (a leasing driver keys its leases by it): one per
    # head run, shared by the slots and their retries.
    scope: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "claim": self.claim,
            "auth": self.auth,
            "options": dict(self.options),
            "step": self.step,
            "scope": self.scope,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClaimSpec:
        return cls(
            kind=str(data["kind"]),
            claim=str(data["claim"]),
            auth=data.get("auth"),
            options=dict(data.get("options") or {}),
            step=str(data.get("step") or ""),
            scope=str(data.get("scope") or ""),
        )


@dataclass
class Lease:
    """One claimed item and its fencing token: the claim id and the lease deadline (epoch
    seconds). ``key`` names the item (the driver's ``options.key`` columns of the row);
    ``claims`` counts how often the item was claimed in this loop start."""

    row: Mapping[str, Any]
    key: str
    token: str
    deadline: float
    seconds: float
    claims: int = 1


@runtime_checkable
class CursorDriver(Protocol):
    """``Driver(spec)`` opens a handle; ``claim()`` atomically takes one work item and returns
    it as a JSON-safe mapping, or None when nothing is left; ``close()`` releases the handle
    (not a shared pool). A claim must be committed when it returns: a slot that dies afterwards
    leaves the item claimed, and the claim statement's own stale-claim clause takes it back."""

    def __init__(self, spec: ClaimSpec) -> None: ...

    def claim(self) -> Mapping[str, Any] | None: ...

    def close(self) -> None: ...


def leases(driver: Any) -> bool:
    """Whether ``driver`` (an instance or class) fences its claims with leases."""
    if getattr(driver, "leasing", True) is False:  # an instance whose options turned leases off
        return False
    return all(callable(getattr(driver, name, None)) for name in ("claim_lease", "renew", "item"))


def guarantee_of(driver: Any) -> str:
    """The delivery guarantee ``driver`` (an instance or class) declares."""
    if getattr(driver, "leasing", True) is False:
        return AT_LEAST_ONCE
    declared = getattr(driver, "guarantee", None)
    return declared if isinstance(declared, str) and declared else AT_LEAST_ONCE
