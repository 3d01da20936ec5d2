"""Table (a)'s specs for the rows a plain playbook cannot record: the playbook's own
``metadata.path`` (the recorder sets it unless a case says ``register_path: false``) and the
keys of a nested ``kind: playbook`` call (a case's ``children`` are registered first).

The same shape as ``dsl_key_specs.CANONICAL``; a variant here is a case fragment
``{playbook, <case keys>}`` (``dsl_key_cases._fragment``; tests/differential/README.md).
"""

from __future__ import annotations

from typing import Any

from tests.differential.dsl_key_specs import _OK, _playbook, _py, _two
from tests.differential.dsl_key_specs_older import _c2

_ENGINE = "noetl/core/dsl/v2/engine.py"
_WORKER = "noetl/worker/v2_worker_nats.py"
_CHILD = "keys/nested_child"


def _unpathed(playbook: dict[str, Any]) -> dict[str, Any]:
    """`playbook` registered without `metadata.path` (the catalog names it by `metadata.name`)."""
    return {"playbook": playbook, "register_path": False}


def _pathed(playbook: dict[str, Any]) -> dict[str, Any]:
    return {**playbook, "metadata": {**playbook["metadata"], "path": "keys/with_path"}}


def _nested(child: str, **call: Any) -> dict[str, Any]:
    """`start` calls the child playbook `child` (one quick python step `start`) with the call
    keys `call`; `after` follows. The child is registered (recorder) or compiled (runner) first."""
    child_playbook = _playbook({"step": "start", "tool": _py("result = {'child': 1}")})
    return {
        "playbook": _two({"kind": "playbook", "path": child, **call}),
        "children": [{"path": child, "playbook": child_playbook}],
    }


NESTED: tuple[tuple[str, str, str, str, str, Any, Any], ...] = (
    (
        "metadata_path",
        "canonical",
        "path",
        "'playbook'",
        _ENGINE,
        _unpathed(_two(_py(_OK))),
        _pathed(_two(_py(_OK))),
    ),
    (
        "c2_metadata_path",
        "case-v2",
        "path",
        "'playbook'",
        _ENGINE,
        _unpathed(_c2(_py(_OK))),
        _pathed(_c2(_py(_OK))),
    ),
    (
        "nested_return_step",
        "canonical",
        "return_step",
        "None",
        _WORKER,
        _nested(f"{_CHILD}_rs"),
        _nested(f"{_CHILD}_rs", return_step="start"),
    ),
    (
        "nested_timeout",
        "canonical",
        "timeout",
        "300",
        _WORKER,
        _nested(f"{_CHILD}_to", return_step="start"),
        # 0: the worker's wait loop (`while elapsed < max_wait`) never polls.
        _nested(f"{_CHILD}_to", return_step="start", timeout=0),
    ),
)
