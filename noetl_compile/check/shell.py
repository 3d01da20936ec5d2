"""C516 (an unknown key) and C517 (an invalid config): the shell tool (its keys are the table ``shell_surface.CONFIG_FIELDS``).

Literal values are checked against what the runtime's shell tool accepts; templated values are
left to the run. Go template actions inside commands are not Jinja (``shell_surface``): the
template sites see those commands with them blanked.
"""

from __future__ import annotations

from typing import Any

from ..diagnostics import Position
from ..read.base import did_you_mean, is_template, type_name
from ..shell_surface import COMMAND_KEYS, CONFIG_KEYS
from ..tool_catalogue import COMMON_FIELDS
from .context import CheckContext

# The tool's own keys and the fields every tool takes (a pipeline task's `name`, `spec`...).
KEYS = CONFIG_KEYS | {f.name for f in COMMON_FIELDS}


def check_shell(ctx: CheckContext, tool: Any, label: str, anchor: Position) -> None:
    """``anchor``: where to report a missing command (the `kind` of the tool)."""
    if not isinstance(tool, dict):
        return
    for key in tool:
        if key == "set" and ctx.playbook.generation == "noetl5":
            continue  # NoETL 5's pipeline task `set` (names for the later tasks)
        if key not in KEYS:
            ctx.report(
                "C516",
                ctx.key_pos(tool, key),
                f"unknown key {str(key)!r} in the shell tool {label}"
                + did_you_mean(str(key), sorted(CONFIG_KEYS)),
            )
    given = [key for key in COMMAND_KEYS if tool.get(key) not in (None, "", [])]
    if not given:
        ctx.report(
            "C517",
            anchor,
            f"the shell tool {label} needs `cmds` (a list of commands) or `command` (one script)",
        )
    elif len(given) > 1:
        ctx.report(
            "C517",
            ctx.pos(tool, given[1]),
            f"the shell tool {label} has both `{given[0]}` and `{given[1]}`: "
            f"only `{given[0]}` runs",
        )
    for key in COMMAND_KEYS[1:]:
        value = tool.get(key)
        if isinstance(value, (dict, list)):
            ctx.report(
                "C517",
                ctx.pos(tool, key),
                f"`{key}` of {label} must be one script (a string), not {type_name(value)}",
            )
    cmds = tool.get("cmds")
    if isinstance(cmds, list):
        for index, item in enumerate(cmds):
            if isinstance(item, (dict, list)):
                ctx.report(
                    "C517",
                    ctx.pos(cmds, index),
                    f"`cmds[{index}]` of {label} must be a command string, not {type_name(item)}",
                )
    elif cmds is not None and not isinstance(cmds, str):
        ctx.report(
            "C517",
            ctx.pos(tool, "cmds"),
            f"`cmds` of {label} must be a list of commands, not {type_name(cmds)}",
        )
    env = tool.get("env")
    if env is not None and not is_template(env) and not isinstance(env, dict):
        ctx.report(
            "C517",
            ctx.pos(tool, "env"),
            f"`env` of {label} must be a mapping of variable names to values, not {type_name(env)}",
        )
    for key in ("timeout_seconds", "timeout"):
        value = tool.get(key)
        if value is None or is_template(value):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            ctx.report(
                "C517",
                ctx.pos(tool, key),
                f"`{key}` of {label} must be a positive number of seconds, not {value!r}",
            )
    capture = tool.get("capture")
    if capture is not None and not is_template(capture) and not isinstance(capture, bool):
        ctx.report("C517", ctx.pos(tool, "capture"), f"`capture` of {label} must be true or false")
