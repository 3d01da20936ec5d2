"""Table (a)'s specs for NoETL 58c2a16b's (v1) playbook-call keys: a `type: playbook` step's
reference to the child (`path`, `resource_path`, `playbook_path`), its inline text (`content`,
`playbook_content`), `task`, `version` and a `loop` block beside them
(noetl/plugin/playbook/{loader,executor,context}.py).

The same shape as ``dsl_key_specs.CANONICAL``; each variant is a case fragment with the child
under ``children`` (registered first by the recorder, compiled beside the parent by the runner;
tests/differential/README.md). Each case names its own child path, so that the catalog holds
one version of it (`version: 1` is then that one).
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.differential.dsl_key_specs_older import _V1_OK, _v1

_LOADER = "noetl/plugin/playbook/loader.py"
_EXECUTOR = "noetl/plugin/playbook/executor.py"
_CHILD = "keys/v1_child"


def _v1_child() -> dict[str, Any]:
    """The called playbook: start -> `c` (a python step) -> end."""
    return {
        "apiVersion": "noetl.io/v1",
        "kind": "Playbook",
        "metadata": {"name": "child", "path": _CHILD},
        "workflow": [
            {"step": "start", "next": [{"step": "c"}]},
            {"step": "c", "type": "python", "code": _V1_OK, "next": [{"step": "end"}]},
            {"step": "end"},
        ],
    }


def _v1_call(child: str, **call: Any) -> dict[str, Any]:
    """v1: step `a` is a `type: playbook` call with the keys ``call`` (the child's path under
    whichever key they name); the child is registered under ``child``."""
    return {
        "playbook": _v1({"type": "playbook", **call}),
        "children": [{"path": child, "playbook": _v1_child()}],
    }


def _c(name: str) -> str:
    return f"{_CHILD}_{name}"


V1_CALLS: tuple[tuple[str, str, str, str, str, Any, Any], ...] = (
    (
        "v1_call_resource_path",
        "v1",
        "resource_path",
        "None",
        _LOADER,
        _v1_call(_c("rp"), path=_c("rp")),
        _v1_call(_c("rp"), resource_path=_c("rp")),
    ),
    (
        "v1_call_playbook_path",
        "v1",
        "playbook_path",
        "None",
        _LOADER,
        _v1_call(_c("pp"), path=_c("pp")),
        _v1_call(_c("pp"), playbook_path=_c("pp")),
    ),
    (
        "v1_call_path",
        "v1",
        "path",
        "None",
        _LOADER,
        _v1_call(_c("p"), resource_path=_c("p")),
        _v1_call(_c("p"), path=_c("p")),
    ),
    (
        "v1_call_content",
        "v1",
        "content",
        "None",
        _LOADER,
        _v1_call(_c("ct"), path=_c("ct")),
        # Inline text instead of a path: 58c2a16b renders it, then asks the server to run
        # `nested/<task>` (the request carries a path only).
        _v1_call(_c("ct"), content=yaml.safe_dump(_v1_child(), sort_keys=False)),
    ),
    (
        "v1_call_playbook_content",
        "v1",
        "playbook_content",
        "None",
        _LOADER,
        _v1_call(_c("pc"), path=_c("pc")),
        _v1_call(_c("pc"), playbook_content=yaml.safe_dump(_v1_child(), sort_keys=False)),
    ),
    (
        "v1_call_task",
        "v1",
        "task",
        "'playbook_task'",
        _EXECUTOR,
        _v1_call(_c("t"), path=_c("t")),
        _v1_call(_c("t"), path=_c("t"), task="sub"),
    ),
    (
        "v1_call_version",
        "v1",
        "version",
        "'latest'",
        _EXECUTOR,
        _v1_call(_c("v"), path=_c("v")),
        _v1_call(_c("v"), path=_c("v"), version=1),
    ),
    (
        "v1_call_loop",
        "v1",
        "loop",
        "None",
        "noetl/plugin/playbook/context.py",
        _v1_call(_c("l"), path=_c("l")),
        _v1_call(_c("l"), path=_c("l"), loop={"in": [1, 2], "iterator": "item"}),
    ),
)
