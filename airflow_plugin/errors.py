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
]


class NoetlRuntimeError(Exception):
    """Root of the runtime's errors (see the module docstring)."""

    family: ClassVar[str] = "runtime"


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
