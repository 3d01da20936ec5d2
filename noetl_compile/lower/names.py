"""Names the generated DAG file uses: dag ids, task ids and group ids.

Every name is derived from playbook text, so every name is validated here: ids are reduced to
the characters Airflow accepts (ASCII letters, digits, ``_`` and ``-``; dots are reserved for
task-group prefixes), made unique in workflow order, kept off Airflow's context keys, and
bounded in length. Nothing here imports Airflow; the context keys are copied from
``airflow.sdk.definitions.context.KNOWN_CONTEXT_KEYS`` (3.3) and a test keeps them in sync.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from ..dag_ids import dag_id_for_path

__all__ = ["AIRFLOW_CONTEXT_KEYS", "IdAllocator", "dag_id_for_path", "sanitize_id"]

AIRFLOW_CONTEXT_KEYS = frozenset(
    {
        "asset_state_store",
        "conn",
        "dag",
        "dag_run",
        "data_interval_end",
        "data_interval_start",
        "ds",
        "ds_nodash",
        "exception",
        "expanded_ti_count",
        "inlet_events",
        "inlets",
        "logical_date",
        "macros",
        "map_index_template",
        "outlet_events",
        "outlets",
        "params",
        "partition_date",
        "partition_key",
        "prev_data_interval_end_success",
        "prev_data_interval_start_success",
        "prev_end_date_success",
        "prev_start_date_success",
        "reason",
        "run_id",
        "task",
        "task_instance",
        "task_instance_key_str",
        "task_reschedule_count",
        "task_state_store",
        "templates_dict",
        "test_mode",
        "ti",
        "triggering_asset_events",
        "try_number",
        "ts",
        "ts_nodash",
        "ts_nodash_with_tz",
        "var",
    }
)
# Airflow's KEY_REGEX allows 250 characters; leave room for a group prefix and a suffix.
MAX_ID = 120
_INVALID = re.compile(r"[^A-Za-z0-9_-]+")


def _ascii(text: str) -> str:
    """Transliterate what has an ASCII form (é -> e); the rest becomes separators."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def sanitize_id(name: str, *, fallback: str = "step") -> str:
    """A task/group id for ``name``: ``[A-Za-z0-9_-]+``, at most ``MAX_ID`` characters.

    When the name had to change beyond recognition (nothing ASCII left, or it was cut), a short
    hash of the original keeps distinct names distinct.
    """
    text = _INVALID.sub("_", _ascii(str(name))).strip("_")
    if not text:
        return f"{fallback}_{_short_hash(str(name))}"
    if text in AIRFLOW_CONTEXT_KEYS:
        text = f"{text}_step"
    if len(text) > MAX_ID:
        text = f"{text[: MAX_ID - 9]}_{_short_hash(str(name))}"
    return text


class IdAllocator:
    """Hands out unique ids in call order: ``fetch``, ``fetch_2``, ``fetch_3``..."""

    def __init__(self, reserved: set[str] | None = None) -> None:
        self.taken: set[str] = set(reserved or ())

    def allocate(self, name: str, *, fallback: str = "step") -> str:
        base = sanitize_id(name, fallback=fallback)
        candidate, counter = base, 1
        while candidate.lower() in self.taken:  # case-insensitive: file systems and UIs fold case
            counter += 1
            candidate = f"{base}_{counter}"
        self.taken.add(candidate.lower())
        return candidate
