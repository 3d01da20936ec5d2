"""A mapped task instance named as Airflow's UI names it: ``measure.body (Oslo)``, not the
event's ``entity_id`` ``measure.body[1]``. The listener records the name Airflow shows (the
``map_index_template`` rendered) as ``data.map_label`` on a mapped instance's task events;
``noetlc events``, ``noetlc status`` and the NoETL view read it from there."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["entity_name", "instance_name", "map_labels"]


def map_labels(events: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """(task, map index) -> the name Airflow shows for that mapped instance (``Oslo``), from
    the task events that carry it (``data.map_label``)."""
    labels: dict[tuple[str, int], str] = {}
    for event in events:
        label = (event.get("data") or {}).get("map_label")
        index = event.get("map_index")
        if isinstance(label, str) and event.get("task_id") and isinstance(index, int):
            labels[(event["task_id"], index)] = label
    return labels


def instance_name(task: str, map_index: Any, labels: Mapping[tuple[str, int], str]) -> str:
    """A task instance as Airflow's UI names it: the task, and a mapped one's label."""
    if not isinstance(map_index, int) or map_index < 0:
        return task
    return f"{task} ({labels.get((task, map_index), map_index)})"


def entity_name(event: Mapping[str, Any], labels: Mapping[tuple[str, int], str]) -> str:
    """The event's entity: a mapped task instance (``entity_id`` ``task[i]``) by its label
    where one was recorded, anything else as stored."""
    entity = str(event.get("entity_id"))
    task, index = event.get("task_id"), event.get("map_index")
    mapped = isinstance(index, int) and index >= 0 and entity == f"{task}[{index}]"
    if mapped and (task, index) in labels:
        return instance_name(str(task), index, labels)
    return entity
