"""What an event may carry into storage: secrets redacted, size bounded.

Applied to every event before it is queued, so neither the store nor the outbox file ever holds
a secret:

* every value Airflow's secrets masker knows (connection passwords and secret extras fetched
  through Airflow, values the secrets tool resolved, anything ``mask_secret`` registered) is
  replaced wherever it occurs, also inside longer strings;
* values under secret keys are replaced, by two rules and no other (``noetl_compile/
  secret_names.py``): a key X601 calls a credential (``db_password``, ``X-Api-Key``: any value
  but a boolean) and a key Airflow's masker calls sensitive (its default names, a substring
  rule: ``token_length``, ``max_tokens`` too), whose *strings* are masked as Airflow masks them,
  while numbers and booleans stay (``token_length: 8`` is no secret, and Airflow shows it);
* credentials inside URLs and DSNs (``scheme://user:password@host``, ``password=...``) lose the
  password;
* a payload larger than ``max_bytes`` once serialised is replaced by its size, its sha256 and a
  short preview of the redacted text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from noetl_compile.secret_names import airflow_hides, is_secret_key

__all__ = ["REDACTED", "bound", "is_secret_name", "mask_secret_values", "redact"]

REDACTED = "***"
PREVIEW_CHARS = 512

# user:password@ in any URL; password=... / pwd=... in libpq, JDBC and ODBC strings.
# Anchored on `://`, not on the scheme: a scheme-first pattern re-read a long run of letters from
# each of its characters (quadratic); the scheme is kept as it is either way.
_URL_CREDENTIALS = re.compile(r"(?P<head>://[^/\s:@]*+:)(?P<secret>[^@\s/]++)@")
_KV_PASSWORD = re.compile(
    r"(?P<head>\b(?:password|pwd|passwd)\s*+=\s*+)(?P<secret>'[^']*+'|[^\s;&]++)", re.IGNORECASE
)


def is_secret_name(key: str) -> bool:
    """Whether a value under ``key`` is masked (either rule)."""
    return is_secret_key(key) or airflow_hides(key)


def redact(value: Any, *, key: str | None = None, _depth: int = 0) -> Any:
    """``value`` with every secret replaced by :data:`REDACTED` (a new object)."""
    # The name rules first (cached per key, and most keys are no secret), then plain data by
    # exact type: every event's data comes here, several times per loop item.
    if (
        key is not None
        and (is_secret_key(key) or airflow_hides(key))
        and value not in (None, "", {}, [])
        and not isinstance(value, bool)
    ):
        return REDACTED if is_secret_key(key) else _strings_hidden(value)
    kind = type(value)
    if kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is str:
        return _redact_text(value)
    if kind is dict or isinstance(value, Mapping):
        return {k: redact(v, key=str(k), _depth=_depth + 1) for k, v in value.items()}
    if kind is list or isinstance(value, (list, tuple)):
        return [redact(v, _depth=_depth + 1) for v in value]
    if isinstance(value, str):
        return _redact_text(value)
    return value


def _strings_hidden(value: Any) -> Any:
    """Airflow's masking of a sensitive key's value: every string in it, nothing else."""
    if isinstance(value, str):
        return REDACTED if value else value
    if isinstance(value, Mapping):
        return {k: _strings_hidden(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strings_hidden(v) for v in value]
    return value


def mask_secret_values(value: Any, *, key: str | None = None) -> None:
    """Register with Airflow's masker every value under a secret-looking key of ``value`` (a
    workload): from then on it is hidden wherever it appears in this process (task logs, and
    events, whose text goes through the masker), also when a step copies it under another name."""
    secret = key is not None and (
        is_secret_key(key) or (airflow_hides(key) and isinstance(value, str))
    )
    if (
        secret
        and isinstance(value, (str, int, float))
        and not isinstance(value, bool)
        and str(value)
    ):
        _mask(str(value))
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            mask_secret_values(v, key=str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            mask_secret_values(v, key=key)


def _mask(text: str) -> None:
    from ..compat import mask_secret

    mask_secret(text)  # a no-op without Airflow: events still get the key rules


def _redact_text(text: str) -> str:
    if "@" in text:
        text = _URL_CREDENTIALS.sub(lambda m: m["head"] + REDACTED + "@", text)
    if "=" in text:
        text = _KV_PASSWORD.sub(lambda m: m["head"] + REDACTED, text)
    return _masker_redact(text)


def _masker_redact(text: str) -> str:
    masker = _masker()
    if masker is None:
        return text
    try:
        return masker(text)
    except Exception:  # noqa: BLE001 - a masker failure must not drop the event; the key rules still applied
        return text


_MASKER: Any = False


def _masker() -> Any:
    """Airflow's task-SDK masker ``redact`` (the one ``mask_secret`` feeds), or None without
    Airflow. Looked up once per process."""
    global _MASKER
    if _MASKER is False:
        from ..compat import masker_redact

        _MASKER = masker_redact()  # None without Airflow: key rules only
    return _MASKER


def bound(data: Mapping[str, Any], max_bytes: int) -> dict[str, Any]:
    """``data`` itself when its JSON is at most ``max_bytes``; else a stand-in that says what
    was dropped: ``{"truncated": true, "size": bytes, "sha256": hex, "preview": text}``.

    A ``provenance`` entry (what a quantum call needs to be repeated) is small and kept in the
    stand-in when it fits on its own: wide counts must not take it out of the event log."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=True, default=str)
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return dict(data)
    stand_in = {
        "truncated": True,
        "size": len(encoded),
        "sha256": hashlib.sha256(encoded).hexdigest(),
        "keys": sorted(str(k) for k in data)[:50],
        "preview": text[:PREVIEW_CHARS],
    }
    provenance = data.get("provenance")
    if isinstance(provenance, Mapping):
        kept = json.dumps(provenance, separators=(",", ":"), default=str).encode()
        if len(kept) <= max_bytes // 2:
            stand_in["provenance"] = dict(provenance)
    return stand_in
