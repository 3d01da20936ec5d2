"""C511: the quantum tool (docs/quantum.md).

Literal values are checked against what the adapter accepts; templated values are left to the
runtime. A literal circuit only gets a light header check: parsing QASM is the simulator's job.
"""

from __future__ import annotations

import re
from typing import Any

from ..diagnostics import Position
from ..quantum_surface import CONFIG_KEYS, DEVICES, OPS, PROVIDERS, TRANSPILE_KEYS
from ..read.base import did_you_mean, is_template, type_name
from .context import CheckContext

# The tool's own keys, and a pipeline task's `name` and `spec`.
KEYS = CONFIG_KEYS | {"name", "spec"}
# Leading whitespace, `//` line comments and `/* */` block comments before the version header.
_QASM_PREAMBLE = re.compile(r"(?:\s++|//[^\n]*+|/\*.*?\*/)*+", re.DOTALL)
_QASM_HEADER = re.compile(r"OPENQASM\s++[23](?:\.\d++)?+\s*+;")


def _unknown_keys(ctx: CheckContext, mapping: dict, known, where: str) -> None:
    for key in mapping:
        if key not in known:
            ctx.report(
                "C511",
                ctx.key_pos(mapping, key),
                f"unknown key {str(key)!r} in {where}" + did_you_mean(str(key), known),
            )


def check_quantum(ctx: CheckContext, tool: Any, label: str, anchor: Position) -> None:
    """``anchor``: where to report what is missing (the `kind` of the tool)."""
    if not isinstance(tool, dict):
        return
    _unknown_keys(ctx, tool, KEYS, f"the quantum tool {label}")
    _choice(ctx, tool, "provider", PROVIDERS, label)
    _choice(ctx, tool, "device", DEVICES, label)
    op = _choice(ctx, tool, "op", OPS, label) or ("run" if "op" not in tool else None)
    if op in ("run", "submit"):
        if tool.get("circuit") in (None, ""):
            ctx.report(
                "C511",
                ctx.pos(tool, "op") if "op" in tool else anchor,
                f"the quantum tool {label} needs a `circuit` (OpenQASM 2/3) for op {op}",
            )
        else:
            _check_circuit(ctx, tool, label)
    elif op in ("status", "results") and tool.get("job_id") in (None, ""):
        ctx.report(
            "C511", ctx.pos(tool, "op"), f"the quantum tool {label} needs a `job_id` for op {op}"
        )
    _check_int(ctx, tool, "shots", label, minimum=1)
    _check_int(ctx, tool, "seed", label, minimum=None)
    _check_transpile(ctx, tool, label)
    for key, types, what in (
        ("params", (dict,), "a mapping"),
        ("tags", (list,), "a list of strings"),
    ):
        value = tool.get(key)
        if value is None or is_template(value):
            continue
        if not isinstance(value, types):
            ctx.report(
                "C511",
                ctx.pos(tool, key),
                f"`{key}` of {label} must be {what}, not {type_name(value)}",
            )
        elif key == "tags" and not all(isinstance(tag, str) for tag in value):
            ctx.report("C511", ctx.pos(tool, key), f"`tags` of {label} must be {what}")


def _choice(
    ctx: CheckContext, tool: dict, key: str, choices: tuple[str, ...], label: str
) -> str | None:
    value = tool.get(key)
    if value is None or is_template(value):
        return None
    if value not in choices:
        ctx.report(
            "C511",
            ctx.pos(tool, key),
            f"`{key}` of {label} must be one of {', '.join(choices)}, not {value!r}"
            + did_you_mean(str(value), choices),
        )
        return None
    return value


def _check_circuit(ctx: CheckContext, tool: dict, label: str) -> None:
    circuit = tool["circuit"]
    if not isinstance(circuit, str):
        ctx.report(
            "C511",
            ctx.pos(tool, "circuit"),
            f"`circuit` of {label} must be OpenQASM text, not {type_name(circuit)}",
        )
        return
    start = _QASM_PREAMBLE.match(circuit).end()
    rest = circuit[start:]
    if rest.startswith(("{{", "{%")):  # the header (or the whole circuit) comes from a template
        return
    if not _QASM_HEADER.match(rest):
        ctx.report(
            "C511",
            ctx.position_in_string(circuit, start),
            f"`circuit` of {label} must start with an `OPENQASM 2.0;` or `OPENQASM 3.0;` header",
        )


def _check_int(ctx: CheckContext, tool: dict, key: str, label: str, *, minimum: int | None) -> None:
    value = tool.get(key)
    if value is None or is_template(value):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        ctx.report(
            "C511",
            ctx.pos(tool, key),
            f"`{key}` of {label} must be an integer, not {type_name(value)}",
        )
    elif minimum is not None and value < minimum:
        ctx.report(
            "C511",
            ctx.pos(tool, key),
            f"`{key}` of {label} must be a positive integer, not {value}",
        )


def _check_transpile(ctx: CheckContext, tool: dict, label: str) -> None:
    transpile = tool.get("transpile")
    if transpile is None or is_template(transpile):
        return
    if not isinstance(transpile, dict):
        ctx.report(
            "C511",
            ctx.pos(tool, "transpile"),
            f"`transpile` of {label} must be a mapping {{optimization_level, seed_transpiler}}",
        )
        return
    _unknown_keys(ctx, transpile, TRANSPILE_KEYS, f"`transpile` of {label}")
    level = transpile.get("optimization_level")
    if (
        level is not None
        and not is_template(level)
        and (isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 3)
    ):
        ctx.report(
            "C511",
            ctx.pos(transpile, "optimization_level"),
            f"`transpile.optimization_level` of {label} must be 0, 1, 2 or 3, not {level!r}",
        )
    _check_int(ctx, transpile, "seed_transpiler", f"`transpile` of {label}", minimum=None)
