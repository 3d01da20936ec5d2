"""C512: cursor-driven loops (`loop.cursor`, docs/cursor-loops.md).

Missing keys are errors: the loop cannot claim rows without them. An unknown driver kind is only
a warning, because drivers can be registered by third parties under an entry-point group.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any

from ..ast import Step
from ..diagnostics import Severity
from ..read.base import did_you_mean, is_template
from .context import CheckContext

CURSOR_KEYS = ("kind", "auth", "claim", "options")
BUILTIN_CURSOR_DRIVERS = ("postgres",)
CURSOR_DRIVER_ENTRY_POINTS = "noetl.cursor_drivers"


@cache
def registered_cursor_drivers() -> tuple[str, ...]:
    """Driver names this environment declares (entry-point names only: nothing is imported)."""
    names = set(BUILTIN_CURSOR_DRIVERS)
    names.update(entry.name for entry in entry_points(group=CURSOR_DRIVER_ENTRY_POINTS))
    return tuple(sorted(names))


def _present(value: Any) -> bool:
    return value is not None and value != "" and value != {}


def check_cursor(ctx: CheckContext, step: Step) -> None:
    cursor = step.loop.cursor
    label = f"the cursor of step {step.name!r}"
    if not isinstance(cursor, dict):
        return  # the reader reported the wrong type
    missing = [key for key in ("kind", "auth", "claim") if not _present(cursor.get(key))]
    if missing:
        names = ", ".join(f"`{key}`" for key in missing)
        ctx.report(
            "C512",
            ctx.pos(cursor),
            f"{label} needs {names} (a cursor needs a driver `kind`, "
            "a credential `auth` and a `claim` statement)",
        )
    for key in cursor:
        if key not in CURSOR_KEYS:
            ctx.report(
                "C512",
                ctx.key_pos(cursor, key),
                f"unknown key {str(key)!r} in {label}" + did_you_mean(str(key), CURSOR_KEYS),
            )
    kind = cursor.get("kind")
    if _present(kind) and not is_template(kind) and kind not in registered_cursor_drivers():
        # The deployment may install a driver this environment lacks, so only warn.
        ctx.report(
            "C512",
            ctx.pos(cursor, "kind"),
            f"cursor driver {kind!r} of step {step.name!r} is not registered here (registered: "
            f"{', '.join(registered_cursor_drivers())}); the runtime needs a package that declares "
            f"it under the `{CURSOR_DRIVER_ENTRY_POINTS}` entry points",
            severity=Severity.WARNING,
        )
    claim = cursor.get("claim")
    if _present(claim) and not isinstance(claim, str):
        ctx.report(
            "C512",
            ctx.pos(cursor, "claim"),
            f"`claim` of {label} must be an SQL statement (a string)",
        )
    if _present(cursor.get("options")) and not isinstance(cursor.get("options"), dict):
        ctx.report("C512", ctx.pos(cursor, "options"), f"`options` of {label} must be a mapping")
