"""Where the templates are: every templated string of a playbook, with its owning step.

A template's meaning depends on where it sits (which step's results exist, which names are
bound), so every later analysis starts from these sites rather than from raw strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ast import Playbook
from ..load import YStr
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
        for key, item in value.items():
            if key not in _UNRENDERED:
                _walk(item, f"{field}.{key}" if field else str(key), out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, f"{field}[{index}]", out)
    elif isinstance(value, YStr) and is_templated(value):
        out.append((value, field))


def template_sites(playbook: Playbook) -> list[TemplateSite]:
    """Every templated string, in document order (computed once per playbook)."""
    return playbook.analysis("template_sites", _template_sites)


def _template_sites(playbook: Playbook) -> list[TemplateSite]:
    sites: list[TemplateSite] = []
    root = playbook.raw if isinstance(playbook.raw, dict) else {}
    for section in ("workload", "keychain", "executor"):
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
