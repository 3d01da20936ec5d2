"""C516: keys of a tool config that its kind does not read, against the one field table
(`noetl_compile/tool_catalogue.py`) the docs pages are generated from.

The runtime ignores an unknown key, so a typo (`mehtod: POST`) silently runs with the default:
each one is a warning at the key with the closest field of that kind. A key NoETL 5's tool reads
that the Airflow runtime does not act on (`noetl5_tools.not_run`) is S116 there, with the reason.
v1 steps carry their tool settings inline among step keys, which the v1 reader checks; only tool
mappings are read here.
"""

from __future__ import annotations

from typing import Any

from ..load import YMap
from ..noetl5_tools import TOOLS_REPO, not_run
from ..read.base import did_you_mean, is_template, misplaced_routing
from ..tool_catalogue import fields_of, kind_of
from .context import CheckContext


def check_fields(ctx: CheckContext, kind: str | None, config: Any, label: str) -> None:
    if ctx.playbook.dialect == "v1" or not isinstance(config, YMap) or not isinstance(kind, str):
        return
    for key in config:
        if str(key) in ("next", "arcs"):
            # routing indented into the tool: an error whatever the kind (S118)
            ctx.report(
                "S118",
                ctx.key_pos(config, key),
                misplaced_routing(str(key), config, (), f"the {kind} tool of {label}") or "",
            )
    entry = kind_of(kind)
    if is_template(kind) or entry is None or entry.own_check:
        return  # gates and quantum report their unknown keys themselves (C510, C511)
    known = fields_of(kind)
    if known is None:
        return
    for key in config:
        if str(key) in ("next", "arcs"):
            continue  # S118 above
        if key in known:
            reason = not_run(kind, str(key))
            if reason:  # a key NoETL 5's tool reads that the Airflow runtime does not act on
                ctx.report(
                    "S116",
                    ctx.key_pos(config, key),
                    f"`{key}` of the {kind} tool of {label} is read by NoETL 5's {kind} tool "
                    f"({TOOLS_REPO}), accepted, not executed on Airflow: {reason}",
                )
            continue
        if key == "set" and ctx.playbook.generation == "noetl5":
            continue  # NoETL 5's pipeline task `set` binds names for the later tasks
        ctx.report(
            "C516",
            ctx.key_pos(config, key),
            f"unknown field {str(key)!r} in the {kind} tool of {label} (the runtime ignores it)"
            + did_you_mean(str(key), known),
        )


def closest_unknown(config: Any, kind: str, wanted: tuple[str, ...]) -> str | None:
    """A key of ``config`` the kind does not read whose closest field is one of ``wanted``:
    the misspelling of a required field (`uri:` for `url`)."""
    known = fields_of(kind)
    if known is None or not isinstance(config, dict):
        return None
    for key in config:
        if key in known:
            continue
        hint = did_you_mean(str(key), frozenset(wanted))
        if hint:
            return str(key)
    return None
