"""Where the templates are: every templated string of a playbook, with its owning step.

A template's meaning depends on where it sits (which step's results exist, which names are
bound), so every later analysis starts from these sites rather than from raw strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ast import Playbook
from ..load import YStr
from ..shell_surface import COMMAND_KEYS, blank_go_actions
from .expressions import is_templated

# Keys whose values are never rendered (names and prose).
_UNRENDERED = {"step", "desc", "description"}


@dataclass(frozen=True, slots=True)
class TemplateSite:
    value: YStr  # the templated string, with its span
    step: str | None  # owning step; None for workload, keychain and workbook tasks
    field: str  # where in the step, for messages: "tool.code", "next.arcs[0].when"
    workbook_task: str | None = None


def _walk(value: Any, field: str, out: list[tuple[YStr, str]]) -> None:
    if isinstance(value, dict):
        shell = value.get("kind") == "shell"
        for key, item in value.items():
            if key not in _UNRENDERED:
                if shell and key in COMMAND_KEYS:  # Go template actions are the command's
                    item = _without_go_actions(item)
                _walk(item, f"{field}.{key}" if field else str(key), out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, f"{field}[{index}]", out)
    elif isinstance(value, YStr) and is_templated(value):
        out.append((value, field))


def _without_go_actions(value: Any) -> Any:
    """A shell command as Jinja sees it: its Go actions blanked (same length, same span)."""
    if isinstance(value, list):
        return [_without_go_actions(item) for item in value]
    if not isinstance(value, YStr) or not is_templated(value):
        return value
    blanked = blank_go_actions(value)
    if blanked == value:
        return value
    copy = YStr(blanked)
    copy._mark, copy._end, copy._style = value._mark, value._end, value._style
    return copy


def template_sites(playbook: Playbook) -> list[TemplateSite]:
    """Every templated string, in document order (computed once per playbook)."""
    return playbook.analysis("template_sites", _template_sites)


def _template_sites(playbook: Playbook) -> list[TemplateSite]:
    sites: list[TemplateSite] = []
    root = playbook.raw if isinstance(playbook.raw, dict) else {}
    sections = ("workload", "keychain", "executor")
    for section in sections if playbook.workload_templates else sections[1:]:
        found: list[tuple[YStr, str]] = []
        _walk(root.get(section), section, found)
        sites += [TemplateSite(value, None, field) for value, field in found]
    for name, task in playbook.workbook.items():
        found = []
        _walk(task.config, f"workbook.{name}", found)
        sites += [TemplateSite(value, None, field, workbook_task=name) for value, field in found]
    for step in playbook.steps:
        found = []
        _walk(step.raw, "", found)
        sites += [TemplateSite(value, step.name, field) for value, field in found]
    return sites
