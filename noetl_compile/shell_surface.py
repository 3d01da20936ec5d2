"""The shell tool's playbook surface: its config fields, and which `{{ }}` tags of a command are
Go templates left to the command rather than Jinja. `noetlc check` (C516, template sites) and the
runtime's shell tool (``airflow_plugin/tools/shell.py``) both read this one module, so it stays
standard-library only and imports nothing of the compiler's stages (like ``quantum_surface``).

Go templates. Commands such as ``docker ps --format '{{.ID}}'`` or ``kubectl get pods -o
go-template='{{range .items}}{{.metadata.name}}{{end}}'`` hand Go templates to the program they
run. NoETL 5's local runtime (the Rust CLI, ``noetl run -r local``) substitutes only the
``{{ name }}`` placeholders it knows and leaves every other tag to the command; its Python
distributed shell executor keeps a command Jinja cannot render as written. So in a shell command
a tag is a Go action, passed to the command verbatim and never read as Jinja, when (after an
optional ``-`` trim marker and blanks) it

* starts with ``.``, ``$`` or a backquote (a field, the dot itself, a Go variable, a Go raw string):
  ``{{.ID}}``, ``{{ .Names }}``, ``{{.}}``, ``{{$x}}``, ``{{`{{.Size}}`}}``;
* has a ``.`` or ``$`` operand after a blank or ``(``: ``{{json .Config}}``, ``{{range .items}}``,
  ``{{index .Labels "app"}}`` (Jinja never writes an attribute after a blank);
* is one of Go's bare keywords ``end``, ``else``, ``break``, ``continue`` or starts with
  ``else if`` / ``else with``.

Every other tag is Jinja, rendered as in any tool config. A bash ``${#name}`` (string length)
holds ``{#``, which Jinja would read as an unclosed comment: in a shell command it is bash's too.
"""

from __future__ import annotations

import re

__all__ = [
    "COMMAND_KEYS",
    "CONFIG_FIELDS",
    "CONFIG_KEYS",
    "blank_go_actions",
    "go_action_spans",
    "protect_go_actions",
    "unprotect_go_actions",
]

# field -> (type, meaning). The one table of the shell tool's config keys (docs, check, runtime).
CONFIG_FIELDS: dict[str, tuple[str, str]] = {
    "kind": ("shell", "the tool kind"),
    "cmds": (
        "list of strings, or a string",
        (
            "commands run one after another, each in its own shell process; a string is split "
            "into its non-empty lines (NoETL 5's local runtime); the first non-zero exit stops"
        ),
    ),
    "command": ("string", "one script, run in one shell process (NoETL 5's Rust shell tool)"),
    "cmd": ("string", "legacy alias of `command` (NoETL's Python shell executor)"),
    "shell": ("string", "the shell that runs each command with `-c` (default `bash`)"),
    "env": ("mapping", "variables laid over the task's environment for the commands"),
    "cwd": ("string", "working directory (default: the task's)"),
    "timeout_seconds": (
        "number",
        (
            "per-command limit; the command's process group is killed and the call fails "
            "with status `timeout` (default: none)"
        ),
    ),
    "timeout": ("number", "alias of `timeout_seconds` (the tool-level timeout of NoETL 5)"),
    "capture": ("boolean", "capture stdout/stderr into the result (default true)"),
    "input": ("mapping", "the tool's input (rendered; visible to templates as `input`)"),
    "output": ("mapping", "NoETL 5 result handling; not used by the shell tool itself"),
}
CONFIG_KEYS = frozenset(CONFIG_FIELDS)
COMMAND_KEYS = ("cmds", "command", "cmd")

# A `{{ ... }}` tag: a Go raw string tag (`{{`...`}}`, whose body may hold braces), else a body
# that holds neither `{{` nor `}}`. Linear: an attempt from one `{{` stops at the next `{{` (or
# backquote), so no character is scanned by more than two attempts.
_TAG = re.compile(r"\{\{(`[^`]*`)\}\}|\{\{((?:[^{}]|\}(?!\})|\{(?!\{))*)\}\}")
_GO_OPERAND = re.compile(r"[\s(][.$]")
_GO_KEYWORDS = frozenset({"end", "else", "break", "continue"})
_BASH_LENGTH = "${#"


def _is_go_action(body: str) -> bool:
    text = body.strip().removeprefix("-").removesuffix("-").strip()
    if not text:
        return False
    if text[0] in ".$`":
        return True
    if text in _GO_KEYWORDS or text.startswith(("else if ", "else with ")):
        return True
    return _GO_OPERAND.search(text) is not None


def go_action_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every Go action and bash ``${#`` in a shell command, in order."""
    spans: list[tuple[int, int]] = []
    if "{{" in text:
        spans += [
            m.span()
            for m in _TAG.finditer(text)
            if m.group(1) is not None or _is_go_action(m.group(2))
        ]
    tags, covered, extra = spans, 0, []
    start = text.find(_BASH_LENGTH)
    while start >= 0:
        # Only the `{#` matters to Jinja; a `${#` inside a Go action is already covered (the
        # tags are in order, so one pointer walks them once).
        while covered < len(tags) and tags[covered][1] <= start:
            covered += 1
        if covered >= len(tags) or not tags[covered][0] <= start:
            extra.append((start, start + len(_BASH_LENGTH)))
        start = text.find(_BASH_LENGTH, start + len(_BASH_LENGTH))
    return sorted(tags + extra)


def blank_go_actions(text: str) -> str:
    """``text`` with its Go actions (and bash ``${#``) replaced by blanks of the same length, so
    the Jinja left in it keeps its offsets (check reads it this way)."""
    spans = go_action_spans(text)
    if not spans:
        return text
    parts, last = [], 0
    for start, end in spans:
        parts += [text[last:start], " " * (end - start)]
        last = end
    parts.append(text[last:])
    return "".join(parts)


def protect_go_actions(text: str) -> str:
    """``text`` with each Go action (and bash ``${#``) inside a Jinja ``raw`` block, so rendering
    the command as a Jinja template gives them back verbatim (the runtime renders it this way).
    A tag that would close the raw block itself is left alone (Jinja then reports it)."""
    spans = go_action_spans(text)
    if not spans:
        return text
    parts, last = [], 0
    for start, end in spans:
        piece = text[start:end]
        parts.append(text[last:start])
        parts.append(piece if "endraw" in piece else "{% raw %}" + piece + "{% endraw %}")
        last = end
    parts.append(text[last:])
    return "".join(parts)


_RAW_OPEN, _RAW_CLOSE = "{% raw %}", "{% endraw %}"


def unprotect_go_actions(text: str) -> str:
    """Undo :func:`protect_go_actions` on a command whose rendering failed and was kept as its
    (protected) text: each ``raw`` block holding exactly one Go action gives the action back."""
    if _RAW_OPEN not in text:
        return text
    parts, last = [], 0
    start = text.find(_RAW_OPEN)
    while start >= 0:
        inner_start = start + len(_RAW_OPEN)
        end = text.find(_RAW_CLOSE, inner_start)
        if end < 0:
            break
        inner = text[inner_start:end]
        if go_action_spans(inner) == [(0, len(inner))]:
            parts += [text[last:start], inner]
            last = end + len(_RAW_CLOSE)
        start = text.find(_RAW_OPEN, end + len(_RAW_CLOSE))
    parts.append(text[last:])
    return "".join(parts)
