"""``kind: secrets`` / ``secret_manager`` / ``credential``: secrets through Airflow's backends.

The result holds a *reference* to the secret, never its value (``hooks.secrets`` says why and
where a value is looked up); templates that read the result get the value through the render
context, registered with Airflow's log masker on the way.

The name comes from ``name`` | ``secret_name`` | ``key`` | ``credential``. A missing secret is a
failure outcome that is not retryable; a backend that fails is a retryable one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..hooks.secrets import (
    AIRFLOW_PROVIDERS,
    PROVIDERS,
    SecretUnavailable,
    lookup_secret,
    normalise_provider,
    secret_ref,
)
from .outcome import ToolCall, ToolOutcome, tool_error

__all__ = ["run_secrets"]

_NAME_KEYS = ("name", "secret_name", "key", "credential")


def _config_error(kind: str, message: str) -> ToolOutcome:
    return ToolOutcome.failure(tool_error(kind, "ConfigError", message))


def _secret_name(config: Mapping[str, Any], step_input: Mapping[str, Any]) -> str | None:
    # The tool's own keys first; a name passed as step input (a workbook call's `with`) next.
    for source in (config, step_input):
        for key in _NAME_KEYS:
            value = source.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def run_secrets(call: ToolCall) -> ToolOutcome:
    started = time.monotonic()
    config = call.config
    kind = str(config.get("kind") or "secrets")

    provider = normalise_provider(config.get("provider"))
    if provider not in PROVIDERS:
        return _config_error(
            kind,
            f"unknown secrets provider {provider!r}; this runtime reads secrets through Airflow "
            f"({', '.join(sorted(AIRFLOW_PROVIDERS))}) or the environment (env)",
        )
    name = _secret_name(config, call.step_input)
    if name is None:
        return _config_error(kind, f"the {kind} tool needs the secret's `name` (or `secret_name`)")
    version = config.get("version")
    if version is not None and str(version).strip().lower() not in ("", "latest"):
        return _config_error(
            kind,
            f"secret {name!r}: version {version!r} cannot be pinned; Airflow's secrets backends "
            "return the current version only",
        )

    try:
        lookup_secret(provider, name)
    except SecretUnavailable as exc:
        error = tool_error(kind, exc.error_type, str(exc), retryable=exc.retryable)
        return ToolOutcome.failure(error, duration_ms=_ms(started))
    reference = secret_ref(provider, name)
    return ToolOutcome.success(
        {"secret_value": reference, "value": reference, "name": name, "provider": provider},
        duration_ms=_ms(started),
    )


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)
