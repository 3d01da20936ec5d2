"""The root of the runtime's errors, and its families.

Every exception the plugin's runtime floors raise (hooks, templating, tools, events, drivers,
runtime) derives from ``NoetlRuntimeError`` through one family, so an operator or the event log
asks ``error_family(exc)`` instead of listing classes. Each family keeps the builtin base its
members always had (``ValueError``, ``LookupError``, ``RuntimeError``): an ``except`` written
for those still catches them.

| family | class | what |
|---|---|---|
| ``config`` | ``NoetlConfigError`` (ValueError) | a playbook block that cannot work as written |
| ``not_found`` | ``NoetlNotFound`` (LookupError) | a connection, secret or playbook that is not there |
| ``unavailable`` | ``NoetlUnavailable`` (RuntimeError) | a kind, feature or extension this runtime lacks |
| ``failed`` | ``NoetlFailure`` | work that ran and failed (a step, a statement, a template, a store) |

The application floor (``local/``, ``deploy/``) reports to a person and keeps its own errors.

This module is also where the errors are classified, once for everyone:

* :func:`fails_task`: whether an operator fails its task at once (``AirflowFailException``, no
  Airflow retry). Every runtime error does, unless it says trying again may succeed
  (``retryable``, e.g. a cursor claim that lost its connection): NoETL's own retries ran inside
  the step already, and a config error, a missing connection or kind cannot heal by itself.
  Anything that is not a runtime error (a bug, an infrastructure failure) goes to Airflow's
  retry handling as it always did.
* :func:`error_record`: how an event records an exception that ended a step, a child playbook or
  a call: ``{"type", "message", "family"?}``, ``family`` absent for anything not ours.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "NoetlConfigError",
    "NoetlFailure",
    "NoetlNotFound",
    "NoetlRuntimeError",
    "NoetlUnavailable",
    "error_family",
    "error_record",
    "fails_task",
]


class NoetlRuntimeError(Exception):
    """Root of the runtime's errors (see the module docstring)."""

    family: ClassVar[str] = "runtime"
    # Whether running the task again may succeed; an error class may set it per instance from
    # its cause (``drivers.base.CursorDriverError``).
    retryable: bool = False


class NoetlConfigError(NoetlRuntimeError, ValueError):
    family = "config"


class NoetlNotFound(NoetlRuntimeError, LookupError):
    family = "not_found"


class NoetlUnavailable(NoetlRuntimeError, RuntimeError):
    family = "unavailable"


class NoetlFailure(NoetlRuntimeError):
    family = "failed"


def error_family(exc: BaseException) -> str | None:
    """The family of one of the runtime's errors; None for anything else (a bug, a library's
    own exception that was not translated)."""
    return exc.family if isinstance(exc, NoetlRuntimeError) else None


def fails_task(exc: BaseException) -> bool:
    """Whether an operator fails its task at once on ``exc`` (see the module docstring)."""
    return isinstance(exc, NoetlRuntimeError) and not exc.retryable


def error_record(exc: BaseException) -> dict[str, str]:
    """An exception as an event's ``error``: class, message and, for ours, its family."""
    record = {"type": type(exc).__name__, "message": str(exc)}
    family = error_family(exc)
    if family is not None:
        record["family"] = family
    return record
