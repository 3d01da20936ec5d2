"""What an absent step payload key means: the one table the compiler and the runtime share.

The compiler leaves out every key that holds only its default (so a DAG file shows what the
playbook says, ``lower.payload.compact_step``); the runtime fills them back in
(``airflow_plugin.runtime.payload.with_defaults``). The runtime imports this module, so it stays
standard-library only and imports nothing of the compiler's stages (like ``dag_ids``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["STEP_DEFAULTS"]

# Read-only: both sides hand out fresh copies of the containers, never these.
STEP_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "input": {},
        "tool": None,
        "pipeline": None,
        "set": {},
        "vars": {},
        "case": [],
        "routing": {"mode": "exclusive", "arcs": []},
    }
)
