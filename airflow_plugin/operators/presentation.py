"""How a NoETL task shows in the Airflow UI: its tool kind and, for loop instances, its item.

* ``ToolKindMixin`` takes the compiler's ``tool_kind=`` keyword: the task's colour
  (``ui_color``, per kind) and its operator name (``NoETL python``) say which tool the step runs,
  where every node used to read ``NoetlStepOperator``. It comes before ``BaseOperator`` in the
  MRO so the keyword never reaches Airflow's argument check.
* ``item_label`` names a mapped loop instance by its item (the head stores it in the chunk; the
  body's ``map_index_template`` reads it), secrets redacted, one line, bounded length.

Plain Python besides the Airflow attributes it sets: importing it costs a DAG file nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "ITEM_LABEL_KEYS",
    "KIND_COLORS",
    "MAP_INDEX_TEMPLATE",
    "ToolKindMixin",
    "item_label",
    "kind_color",
]

# One colour per tool kind (light, so the black task name stays readable).
KIND_COLORS = {
    "python": "#fff2cc",
    "http": "#d9f2e6",
    "postgres": "#dbe7ff",
    "duckdb": "#fff7b3",
    "sql": "#e6defc",
    "transfer": "#f8dcea",
    "sink": "#f8dcea",
    "secrets": "#f4d4d4",
    "playbook": "#e9e1f7",
    "workbook": "#e6f4d7",
    "quantum": "#d5f1f6",
    "noop": "#eeeeee",
    "route": "#eeeeee",
    "gate": "#ffd9b3",
    "region": "#e3e3f1",
}
_DEFAULT_COLOR = "#dfe9f7"

# What the loop body's ``map_index_template`` renders: the label the head put in the chunk,
# else the index (a chunk from an older head has none; StrictUndefined must not fail the task).
MAP_INDEX_TEMPLATE = "{{ task.chunk.label | default(ti.map_index) }}"

# Keys that usually name an item, tried in this order before the item's JSON is shown.
ITEM_LABEL_KEYS = ("name", "id", "key", "title", "label", "city", "code", "slug")
_MAX_LABEL = 60


def kind_color(kind: str | None) -> str:
    first = (kind or "").split("+", 1)[0].split(":", 1)[0].strip()
    return KIND_COLORS.get(first, _DEFAULT_COLOR)


class ToolKindMixin:
    """Accepts ``tool_kind`` (a display string from the compiler: ``python``, ``http+python``,
    ``gate: approve``) and shows it as the operator's name and colour."""

    def __init__(self, *, tool_kind: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tool_kind = tool_kind
        if tool_kind:
            self.ui_color = kind_color(tool_kind)
            # Serialised as the task's operator name (`_operator_name`): the graph and grid show it.
            self.custom_operator_name = f"NoETL {tool_kind}"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 3] + "..."


def _one(item: Any) -> str:
    from ..hooks.redact import redact

    item = redact(item)
    if isinstance(item, Mapping):
        for key in ITEM_LABEL_KEYS:
            value = item.get(key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                return _short(str(value))
    if isinstance(item, str):
        return _short(item)
    try:
        return _short(json.dumps(item, sort_keys=True, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return _short(repr(item))


def item_label(items: Sequence[Any]) -> str:
    """The label of a chunk: its item, or ``first .. last (n items)`` for several."""
    if not items:
        return "(no items)"
    if len(items) == 1:
        return _one(items[0]) or "(empty)"
    return f"{_one(items[0])} .. {_one(items[-1])} ({len(items)} items)"
