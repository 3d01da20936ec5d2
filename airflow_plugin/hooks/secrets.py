"""Secret references and the backends that answer them (the hook under the secrets tool and
under every render context that reveals a step result).

NoETL's secrets tool fetches a value from a secret manager and returns it as the step result
(``{{ get_token.secret_value }}``). Returned in clear, the value would land in the XCom table,
in NoETL events and in any log line that prints a result. So the result holds a *reference*
instead of the value::

    {"secret_value": {"__noetl_secret__": {"provider": "airflow", "name": "api_token"}},
     "value": <the same reference>, "name": "api_token", "provider": "airflow"}

and :func:`resolve_secret_refs` swaps references for the real values where step results enter a
render context, registering every value with Airflow's log masker on the way. Templates still
get the value; nothing persisted or logged ever holds it.

Where a secret is looked up (config ``provider``, default ``airflow``):

* ``airflow`` and the cloud providers NoETL playbooks name (``gcp``/``google``, ``aws``,
  ``azure``, ``vault``): an Airflow Variable of that name through ``airflow.sdk.Variable.get``,
  else the password of the Airflow Connection of that name. Airflow consults, in order, the
  secrets backend the deployment configured (``[secrets] backend``: GCP Secret Manager, AWS
  Secrets Manager, Azure Key Vault, HashiCorp Vault...), ``AIRFLOW_VAR_<NAME>`` /
  ``AIRFLOW_CONN_<NAME>`` environment variables and the metadata DB. The playbook's provider
  does not pick a backend: which cloud answers is the deployment's choice, as with every
  Airflow secret. For the same reason NoETL's ``project_id`` is not used (the backend's own
  configuration names the project), and a pinned ``version`` other than ``latest`` is refused
  rather than silently answered with the current value.
* ``env``: the process environment variable of that name.

The name comes from ``name`` | ``secret_name`` | ``key`` | ``credential``. A missing secret is a
failure outcome that is not retryable; a backend that fails (a misconfigured or unreachable
secrets backend) is a retryable one. Error messages name the secret and where it was looked
for, never a value. Airflow's masker ignores very short values (under 5 characters by default,
``[logging] min_length_masked_secret``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ..errors import NoetlNotFound
from .connections import mask

__all__ = [
    "AIRFLOW_PROVIDERS",
    "PROVIDERS",
    "SECRET_REF_KEY",
    "SecretUnavailable",
    "clear_secret_cache",
    "is_secret_ref",
    "lookup_secret",
    "normalise_provider",
    "resolve_secret_refs",
    "secret_ref",
]

SECRET_REF_KEY = "__noetl_secret__"
DEFAULT_PROVIDER = "airflow"
ENV_PROVIDERS = frozenset({"env", "environment"})
# Providers answered by whatever secrets backend the Airflow deployment configured.
AIRFLOW_PROVIDERS = frozenset(
    {"airflow", "gcp", "google", "gcp_secret_manager", "aws", "azure", "vault", "hashicorp"}
)
PROVIDERS = ENV_PROVIDERS | AIRFLOW_PROVIDERS

# A task process runs one step (or one region/loop body), so values rarely need to live long;
# the TTL bounds how stale a rotated secret can be in a long sequential loop.
_CACHE_SIZE = 128
_CACHE_TTL_S = 300.0
_cache: OrderedDict[tuple[str, str], tuple[float, str]] = OrderedDict()
_cache_lock = threading.Lock()


class SecretUnavailable(NoetlNotFound):
    """A secret could not be read. The message names it and where it was looked for.

    ``retryable``: the lookup itself failed (a backend error) rather than finding nothing;
    ``reason``: ``not_found`` | ``access_denied`` | ``backend_error`` | ``unreadable`` (defined,
    but Airflow cannot read it: asking again gives the same answer).
    """

    def __init__(
        self,
        provider: str,
        name: str,
        looked_in: list[str],
        *,
        reason: str = "not_found",
        cause: BaseException | None = None,
        detail: str | None = None,
    ):
        self.provider = provider
        self.name = name
        self.looked_in = list(looked_in)
        self.reason = reason
        self.retryable = reason == "backend_error"
        what = {
            "not_found": "is not defined",
            "access_denied": "was refused by the secrets backend",
            "backend_error": "could not be read: the secrets lookup failed",
            "unreadable": "is defined but Airflow could not read it",
        }[reason]
        # Only the exception's type: a backend's message may quote its own configuration.
        because = f" ({type(cause).__name__})" if cause is not None else ""
        extra = f"; {detail}" if detail else ""
        super().__init__(
            f"secret {name!r} (provider {provider!r}) {what}{because}{extra}; "
            f"looked in: {'; '.join(self.looked_in)}"
        )

    @property
    def error_type(self) -> str:
        return {
            "not_found": "SecretNotFound",
            "access_denied": "SecretAccessDenied",
            "backend_error": "SecretBackendError",
            "unreadable": "SecretUnreadable",
        }[self.reason]


# -- references ----------------------------------------------------------------------------------


def secret_ref(provider: str, name: str) -> dict[str, dict[str, str]]:
    """The placeholder a step result holds instead of the secret's value."""
    return {SECRET_REF_KEY: {"provider": provider, "name": name}}


def is_secret_ref(value: Any) -> bool:
    if not isinstance(value, Mapping) or len(value) != 1 or SECRET_REF_KEY not in value:
        return False
    spec = value[SECRET_REF_KEY]
    return (
        isinstance(spec, Mapping)
        and isinstance(spec.get("provider"), str)
        and isinstance(spec.get("name"), str)
    )


def resolve_secret_refs(value: Any) -> Any:
    """``value`` with every secret reference replaced by the secret (masked in Airflow's logs).

    Walks dicts, lists and tuples; containers without a reference are returned as they are (no
    copy), so resolving a large result without secrets costs one walk. Raises
    :class:`SecretUnavailable` when a referenced secret cannot be read.
    """
    if is_secret_ref(value):
        spec = value[SECRET_REF_KEY]
        return lookup_secret(spec["provider"], spec["name"])
    if isinstance(value, Mapping):
        resolved = {key: resolve_secret_refs(item) for key, item in value.items()}
        if all(resolved[key] is item for key, item in value.items()):
            return value
        return resolved
    if isinstance(value, (list, tuple)):
        items = [resolve_secret_refs(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, tuple) else items
    return value


# -- lookup --------------------------------------------------------------------------------------


def lookup_secret(provider: str, name: str) -> str:
    """The secret's value (cached per process for a few minutes, registered with the masker)."""
    provider = normalise_provider(provider)
    key = (provider, name)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] > now:
            _cache.move_to_end(key)
            return hit[1]
    value = _from_env(name) if provider in ENV_PROVIDERS else _from_airflow(provider, name)
    mask(value)
    with _cache_lock:
        _cache[key] = (now + _CACHE_TTL_S, value)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return value


def clear_secret_cache() -> None:
    """Forget every cached value (tests, or after rotating a secret in a long-lived process)."""
    with _cache_lock:
        _cache.clear()


def normalise_provider(provider: Any) -> str:
    return str(provider or DEFAULT_PROVIDER).strip().lower()


def _from_env(name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise SecretUnavailable("env", name, [f"environment variable {name!r}"])
    return value


def _airflow_places(name: str) -> list[str]:
    upper = name.upper()
    variable = f"AIRFLOW_VAR_{upper}"
    connection = f"AIRFLOW_CONN_{upper}"
    where = "the configured secrets backend, {}, the metadata DB"
    return [
        f"Airflow Variable {name!r} ({where.format(variable)})",
        f"the password of Airflow Connection {name!r} ({where.format(connection)})",
    ]


def _from_airflow(provider: str, name: str) -> str:
    places = _airflow_places(name)
    try:
        from ..compat import AirflowNotFoundException, get_connection, get_variable
    except ImportError as exc:  # pragma: no cover - the runtime is installed with Airflow
        raise SecretUnavailable(provider, name, places, reason="backend_error", cause=exc) from None

    try:
        value = get_variable(name)
    except Exception as exc:  # noqa: BLE001 - a misconfigured or unreachable backend
        raise _failure(provider, name, places, exc) from None
    if value is not None:
        return value

    try:
        conn = get_connection(name)
    except AirflowNotFoundException:
        raise _connection_not_found(provider, name, places) from None
    except Exception as exc:  # noqa: BLE001
        raise _failure(provider, name, places, exc) from None
    if conn.password in (None, ""):
        raise SecretUnavailable(
            provider,
            name,
            places,
            detail=f"Airflow Connection {name!r} exists but has no password",
        )
    return conn.password


def _connection_not_found(provider: str, name: str, places: list[str]) -> SecretUnavailable:
    """Airflow's connection lookup answers "not defined" also when a backend raised: it logs the
    exception at debug level and tries the next backend. For the environment, which noetlc's
    docs and tests define secrets in, that hides a defined but unreadable value as a missing one
    (Airflow 3.1 with cryptography 51 and a Fernet key cannot build any Connection that has a
    password: ``MultiFernet`` has no ``is_encrypted``). So a set ``AIRFLOW_CONN_<NAME>`` is read
    again through Airflow's environment backend, and what it raises is the answer (its type only:
    a parser's message may quote the value)."""
    variable = f"AIRFLOW_CONN_{name.upper()}"
    if variable not in os.environ:
        return SecretUnavailable(provider, name, places)
    try:
        from airflow.secrets.environment_variables import EnvironmentVariablesBackend

        EnvironmentVariablesBackend().get_connection(name)
    except Exception as exc:  # noqa: BLE001 - the cause Airflow's lookup swallowed
        return SecretUnavailable(
            provider,
            name,
            places,
            reason="unreadable",
            cause=exc,
            detail=f"{variable} is set, but Airflow raised reading it: check its URI or JSON "
            f"(`airflow connections get {name}` shows Airflow's own reading), and that the "
            "installed packages are inside Airflow's constraints",
        )
    return SecretUnavailable(provider, name, places)


def _failure(provider: str, name: str, places: list[str], exc: BaseException) -> SecretUnavailable:
    # Airflow raises AirflowSecretsBackendAccessDenied (a PermissionError) for an authoritative
    # deny: asking again will not help, unlike a backend that is down or misconfigured.
    reason = "access_denied" if isinstance(exc, PermissionError) else "backend_error"
    return SecretUnavailable(provider, name, places, reason=reason, cause=exc)
