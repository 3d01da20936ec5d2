"""D909-D915, D934, D945-D947, D955: v1 constructs whose run on Airflow differs from their run on NoETL's v1
engine (58c2a16b).

A v1 playbook gets only these rows: its steps, arcs and arguments are read by another engine
(the broker of 58c2a16b) whose forms differ from the canonical and case-v2 ones.
"""

from __future__ import annotations

import re
from typing import Any

from ..ast import Step
from ..spans import YList, YMap, YStr
from .context import CheckContext
from .difference_sites import mentions, step_pos

_DEF_MAIN = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+main[ \t]*\(", re.MULTILINE)
_WHOLE_TEMPLATE = re.compile(r"[ \t]*\{\{[^{}]*\}\}[ \t]*")

# v1 step keys that never reach 58c2a16b's tool (D934): per step type, the key and why.
_V1_KEYS_DROPPED: dict[Any, tuple[tuple[str, str], ...]] = {
    "http": (
        ("params", "sends no `params` (an empty `data` map is taken as the query first)"),
        ("timeout", "never hands a step's `timeout` to its http plugin (30 s applies)"),
    ),
    "duckdb": (
        ("command_b64", "writes a job's `command_b64` itself from `command` and drops the step's"),
        (
            "commands_b64",
            "writes a job's `commands_b64` itself from `commands` and drops the step's",
        ),
    ),
    "postgres": (
        ("command_b64", "writes a job's `command_b64` itself from `command` and drops the step's"),
        (
            "commands_b64",
            "writes a job's `commands_b64` itself from `commands` and drops the step's",
        ),
    ),
    "python": (
        ("code_b64", "never hands `code_b64` to its python plugin ('No code provided')"),
        ("code_base64", "never hands `code_base64` to its python plugin ('No code provided')"),
    ),
}


def v1_step(ctx: CheckContext, step: Step) -> None:
    raw = step.raw if isinstance(step.raw, YMap) else None
    if raw is None:
        return
    if step.loop is not None and "loop" in raw:
        ctx.report(
            "D945",
            ctx.key_pos(raw, "loop"),
            f"`loop:` block of v1 step {step.name!r}: 58c2a16b's broker never copies `loop` onto "
            "the job, so no item runs there (a step without `type` is a control step and the "
            "execution stays RUNNING; a step with one makes its call once); noetlc runs the loop",
            hint="type: iterator, with collection/element/task",
        )
    elif step.loop is not None:
        ctx.report(
            "D909",
            ctx.pos(raw, "type") if "type" in raw else step_pos(ctx, step),
            f"v1 iterator {step.name!r}: 58c2a16b runs every item in one job and `{{{{ "
            f"{step.name} }}}}` is the plain list; noetlc runs one call per item and the list is "
            f"`{{{{ {step.name}.result }}}}`",
        )
    if raw.get("type") == "playbook":
        ctx.report(
            "D955",
            ctx.pos(raw, "type"),
            f"the playbook call of v1 step {step.name!r}: 58c2a16b starts the child and its "
            "result is the server's execution record (status running), without waiting; "
            "noetlc waits and returns the child's last step result",
        )
    if "save" in raw:
        ctx.report(
            "D946",
            ctx.key_pos(raw, "save"),
            f"`save` of v1 step {step.name!r}: 58c2a16b keeps the save's outcome out of the "
            "step's result and a failed save leaves the step succeeded; noetlc records the "
            "outcome as `_sink` and a failed save fails the step",
        )
    _v1_whole_template(ctx, raw, ("with", "args", "data", "input"))
    if isinstance(raw.get("data"), dict):
        ctx.report(
            "D911",
            ctx.key_pos(raw, "data"),
            f"a step's `data` (step {step.name!r}): 58c2a16b reads a step's arguments from "
            "`with`/`args` only; noetlc reads `data` as the arguments",
            hint="with: {...}",
        )
    code = raw.get("code")
    if raw.get("type") == "python" and isinstance(code, str) and not _DEF_MAIN.search(code):
        ctx.report(
            "D913",
            ctx.pos(raw, "code"),
            f"python code of step {step.name!r} defines no `main`: 58c2a16b fails it; noetlc "
            "runs it and takes `result`",
        )
    kind = raw.get("type")
    # A mistyped `type` (a list, a map) is the structure checks' finding, not a lookup key here.
    dropped = _V1_KEYS_DROPPED.get(kind, ()) if isinstance(kind, str) else ()
    for key, why in dropped:
        # An encoded key beside its plain one (`code_b64` and `code`): the plain one runs there.
        plain = key.split("_")[0] if key.endswith(("_b64", "_base64")) else None
        if key in raw and not (plain and plain in raw):
            ctx.report(
                "D934",
                ctx.key_pos(raw, key),
                f"`{key}` of v1 {raw.get('type')} step {step.name!r}: 58c2a16b {why}; noetlc "
                f"applies `{key}`",
            )
    entries = raw.get("next")
    if not isinstance(entries, YList):
        return
    conditional = False
    for entry in entries:
        if not isinstance(entry, YMap):
            continue
        if "step" in entry:
            _v1_whole_template(ctx, entry, ("data", "input", "with", "args"))
        if "with" in entry and "step" in entry:
            ctx.report(
                "D911",
                ctx.key_pos(entry, "with"),
                f"an arc's `with` (to {entry.get('step')!r}): 58c2a16b reads an arc's arguments "
                "from `data`/`input` only; noetlc reads `with` as the arguments",
                hint="data: {...}",
            )
        if "then" in entry or "else" in entry:
            key = "then" if "then" in entry else "else"
            ctx.report(
                "D915",
                ctx.key_pos(entry, key),
                f"`{key}` block in `next` of step {step.name!r}: 58c2a16b reads only `step` of a "
                "`next` entry (neither block runs, the execution stays RUNNING); noetlc follows "
                "the blocks",
            )
            conditional = True
            continue
        when = entry.get("when")
        if when is not None:
            conditional = True
            if isinstance(when, str) and mentions(when, "error"):
                ctx.report(
                    "D912",
                    ctx.pos(entry, "when"),
                    f"this arc of step {step.name!r} routes a failure: 58c2a16b fails the "
                    "execution at the failed action and takes no arc; noetlc takes it",
                )
    if conditional and not any("then" in e or "else" in e for e in entries if isinstance(e, YMap)):
        ctx.report(
            "D914",
            ctx.key_pos(raw, "next"),
            f"conditional `next` of step {step.name!r}: 58c2a16b keeps the execution RUNNING "
            "when a branch is not taken; noetlc ends the run when the branch taken ends",
        )


def _v1_whole_template(ctx: CheckContext, holder: YMap, keys: tuple[str, ...]) -> None:
    """D910 at the first argument (of a step or an arc) that is one whole template."""
    for key in keys:
        block = holder.get(key)
        whole = _first_whole_template(block) if isinstance(block, dict) else None
        if whole is not None:
            ctx.report(
                "D910",
                ctx.pos(whole),
                f"`{whole.strip()}` is one whole template: 58c2a16b renders it to text; "
                "noetlc keeps the value's type",
            )
            return


def _first_whole_template(block: dict) -> YStr | None:
    for value in block.values():
        if isinstance(value, YStr) and _WHOLE_TEMPLATE.fullmatch(value):
            return value
    return None


# 58c2a16b's `_is_actionable` (event/service/initial.py): what it dispatches as a job.
_V1_ACTIONS = frozenset(
    {
        "http", "python", "duckdb", "postgres", "snowflake", "snowflake_transfer", "transfer",
        "secrets", "workbook", "playbook", "save", "iterator",
    }
)  # fmt: skip


def _v1_actionable(raw: YMap) -> bool:
    kind = str(raw.get("type") or "").strip().lower()
    if not kind or kind in ("start", "end", "route"):
        return False
    if raw.get("save"):
        return True
    if kind == "python":
        return any(raw.get(key) for key in ("code", "code_b64", "code_base64"))
    return kind in _V1_ACTIONS


def v1_first_step(ctx: CheckContext) -> None:
    """D947 at the step 58c2a16b's first dispatch cannot run: the first entry of `start`'s
    `next` (when `start` is no action itself) that is no action and not `end`."""
    steps = {s.name: s for s in ctx.playbook.steps}
    start = steps.get("start")
    if start is None or not isinstance(start.raw, YMap) or _v1_actionable(start.raw):
        return
    entries = start.raw.get("next")
    if not isinstance(entries, YList) or not entries:
        return
    first = entries[0]
    name = first.get("step") or first.get("name") if isinstance(first, YMap) else first
    target = steps.get(name) if isinstance(name, str) else None
    if isinstance(first, YMap):
        _first_arc_arguments(ctx, first, name)
    if target is None or not isinstance(target.raw, YMap) or _v1_actionable(target.raw):
        return
    if name.strip().lower() == "end":
        return
    ctx.report(
        "D947",
        step_pos(ctx, target),
        f"v1 step {name!r} is the first step of `start` and no action (no `type`, or python "
        "without `code`): 58c2a16b marks it completed without following its `next` and the "
        "execution stays RUNNING; noetlc passes through it",
        hint="type: python (or another tool) if the playbook must also run on 58c2a16b",
    )


def _first_arc_arguments(ctx: CheckContext, arc: YMap, name: Any) -> None:
    """D911 at the `input`/`payload` of the arc 58c2a16b's first dispatch takes: it flattens
    the arc's `with`/`payload`/`input` into one mapping and then passes only a `data` key of it
    as arguments (event/service/initial.py `_extract_transition_data`, `_build_task`)."""
    for key in ("input", "payload"):
        if key in arc and "step" in arc:
            ctx.report(
                "D911",
                ctx.key_pos(arc, key),
                f"the arc's `{key}` (from `start` to {name!r}): 58c2a16b's first dispatch "
                "passes only an arc's `data` to the first step; noetlc reads "
                f"`{key}` as the arguments",
                hint="data: {...}",
            )
