"""Credential Params: the second line of defence behind X601.

X601 (check/security.py) refuses a literal secret it recognises; a value it does not recognise
(an odd token under `api_key`, a value it took for a reference) would reach the DAG file as a
Param default, shown in the trigger form to every user who may trigger the DAG. So, whatever
the detector said:

* a workload key that names a credential (``check.secrets.is_secret_key``: `db_password`,
  `API_KEY`, `secretToken`...) never carries a literal into the DAG file. Its literal parts are
  left out (None) and compile says so (X602, with the key's position); templates stay, since
  they are resolved at run time (`{{ env.PG_PASSWORD }}`, `{{ secret... }}`), and so do empty
  values; a literal beside templates that render constants (`"s3cr3t{{ '' }}"`) is a literal. The run request (`noetlc run --conf`, the trigger form) supplies the value.
* a Param whose key Airflow itself treats as sensitive (its secrets masker's
  ``should_hide_value_for_key``: the words of ``[core] sensitive_var_conn_names``' defaults
  below) or that names a credential is emitted with ``format="password"``, the JSON-schema
  format Airflow's trigger form renders as a masked input. Only string (or null) Params can be
  masked there; Airflow's list is wider than ours (`dsn`, `proxy`, `webhook_url`, any key holding
  `token` such as `max_tokens`), so those keys are masked but keep their values.

The compiler never imports Airflow: the names (``secret_names``) are Airflow 3.3's ``DEFAULT_SENSITIVE_FIELDS``,
and tests/test_credential_params.py checks them, and the rule, against the installed Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..check.secrets import literal_text
from ..secret_names import airflow_hides, is_secret_key

# Under a credential key, these entries of a mapping are the credential (`password: {default: x}`,
# a Param declared in the workload); the same list as check/security.py's walk.
_VALUE_KEYS = frozenset({"value", "default", "literal", "plain", "raw", "data", "current"})


def masked_in_form(key: str) -> bool:
    return is_secret_key(key) or airflow_hides(key)


class Withheld(NamedTuple):
    path: tuple[Any, ...]  # keys and list indices from the workload mapping
    key: str  # the credential-named key that held it


class CredentialParams(NamedTuple):
    params: dict[str, Any]  # the Params' defaults, literals under credential keys left out
    masked: frozenset[str]  # Params emitted with format="password"
    withheld: list[Withheld]


def credential_params(params: Mapping[str, Any]) -> CredentialParams:
    """``params`` (workload key -> plain default) as the DAG file may hold them."""
    out: dict[str, Any] = {}
    withheld: list[Withheld] = []
    for key, value in params.items():
        if is_secret_key(key) and _has_literal(value, credential=True):
            # The whole default goes: a list or mapping of credentials keeps none of them.
            out[key] = None
            withheld.append(Withheld((key,), key))
        else:
            out[key] = _scrub(value, (key,), withheld)
    masked = frozenset(
        key for key, value in out.items() if masked_in_form(key) and _maskable(value)
    )
    return CredentialParams(out, masked, withheld)


def _maskable(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _has_literal(value: Any, *, credential: bool) -> bool:
    """Does ``value`` (under a credential key when ``credential``) hold literal credential text?"""
    if isinstance(value, str):
        # `"s3cr3t{{ '' }}"` is the literal `s3cr3t`: templates that render constants hide none.
        rendered = literal_text(value) if credential else None
        return rendered is not None and bool(rendered.strip())
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return credential
    if isinstance(value, list):
        return any(_has_literal(item, credential=credential) for item in value)
    if isinstance(value, Mapping):
        return any(
            _has_literal(
                item,
                credential=(credential and str(k).lower() in _VALUE_KEYS) or is_secret_key(k),
            )
            for k, item in value.items()
        )
    return False


def _scrub(value: Any, path: tuple[Any, ...], withheld: list[Withheld]) -> Any:
    """``value`` with every literal under a nested credential key replaced by None."""
    if isinstance(value, Mapping):
        out = {}
        for k, item in value.items():
            if is_secret_key(k) and _has_literal(item, credential=True):
                out[k] = None
                withheld.append(Withheld((*path, k), str(k)))
            else:
                out[k] = _scrub(item, (*path, k), withheld)
        return out
    if isinstance(value, list):
        return [_scrub(item, (*path, i), withheld) for i, item in enumerate(value)]
    return value
