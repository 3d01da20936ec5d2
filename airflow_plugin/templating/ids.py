"""Execution ids.

NoETL identifies a run by one integer ``execution_id`` (playbooks embed it in SQL strings and
keys). Airflow identifies a run by ``(dag_id, run_id)``. Every task of a run must compute the
same number without talking to anyone, and a retried task must get the same number again, so
the id is a pure function of those two strings.
"""

from __future__ import annotations

import hashlib

# 63 bits: fits a signed Postgres BIGINT (NoETL's event table key) and stays positive.
_MASK_63 = (1 << 63) - 1


def execution_id_for(dag_id: str, run_id: str) -> int:
    """Deterministic positive 63-bit execution id for an Airflow DAG run."""
    # A separator that cannot appear in either id keeps ("a", "bc") and ("ab", "c") apart.
    digest = hashlib.sha256(f"{dag_id}\x1f{run_id}".encode()).digest()
    value = int.from_bytes(digest[:8], "big") & _MASK_63
    # Zero is the one value a positive id cannot take; remapping it costs one collision in 2^63.
    return value or 1


def catalog_id_for(dag_id: str) -> int:
    """Deterministic positive 63-bit id of a DAG's catalog entry: NoETL's ``catalog_id`` names
    the registered playbook, and on Airflow the compiled DAG is that entry (the same for every
    run of it, unlike the execution id)."""
    digest = hashlib.sha256(f"catalog\x1f{dag_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & _MASK_63 or 1


def ids_as_text(value):
    """``value`` (JSON-shaped) with every integer under a key ending in ``_id`` as its decimal
    text, for what the CLI prints as JSON: an execution id is 63 bits, past JavaScript's safe
    integers (2^53), so a browser or ``jq`` would round it to another execution. Always text,
    small or large, so the field has one type."""
    if isinstance(value, dict):
        return {
            key: (
                str(item)
                if isinstance(key, str)
                and key.endswith("_id")
                and isinstance(item, int)
                and not isinstance(item, bool)
                else ids_as_text(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [ids_as_text(item) for item in value]
    return value
