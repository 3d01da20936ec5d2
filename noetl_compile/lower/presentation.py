"""What the Airflow UI shows of a lowered playbook, decided here so ``emit`` only prints it.

* the tool kind of every task (``task_display_name`` ``start (python)``, and ``tool_kind`` for
  the operators that colour and name themselves by it, ``airflow_plugin.operators.presentation``);
* branch conditions as edge labels (``Label``): the guard of the arcs between two units;
* mapped loop instances named by their item (``map_index_template``);
* the DAG's ``doc_md`` (description, catalog path, source), its tags and owner.

Labels and docs are plain strings; ``emit`` writes them through ``literals`` like any value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import networkx as nx

from .ir import Unit

__all__ = [
    "MAP_INDEX_TEMPLATE",
    "decorate_units",
    "doc_md",
    "edge_labels",
    "payload_kind",
    "tags",
]

# Kept equal to airflow_plugin.operators.presentation.MAP_INDEX_TEMPLATE by a test: the compiler
# never imports the plugin. The head stores each chunk's label; an older chunk shows its index.
MAP_INDEX_TEMPLATE = "{{ task.chunk.label | default(ti.map_index) }}"
# Units whose operators take `tool_kind` (NoetlTask subclasses; not the HITL/sensor/trigger ones,
# whose class names already say what they are).
_KIND_OPERATORS = {"step", "loop_seq", "region"}
_MAX_LABEL = 60
_MAX_TAG = 100  # Airflow's TAG_MAX_LEN


def _kind_of_tool(tool: Any) -> str | None:
    if isinstance(tool, Mapping):
        kind = tool.get("kind")
        return kind if isinstance(kind, str) and kind else None
    return None


def payload_kind(payload: Mapping[str, Any]) -> str:
    """``python``, ``http+python`` for a pipeline, ``gate: approve``, ``route`` for no tool."""
    tool = payload.get("tool")
    kind = _kind_of_tool(tool)
    if kind == "gate" and isinstance(tool, Mapping) and isinstance(tool.get("gate"), str):
        return f"gate: {tool['gate']}"
    if kind:
        return kind
    pipeline = payload.get("pipeline")
    if isinstance(pipeline, list):
        kinds: list[str] = []
        for entry in pipeline:
            inner = entry.get("tool", entry) if isinstance(entry, Mapping) else None
            found = _kind_of_tool(inner)
            if found and found not in kinds:
                kinds.append(found)
        if kinds:
            return "+".join(kinds)
    return "route"


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 3] + "..."


def _guard_text(when: Any) -> str | None:
    if not isinstance(when, str) or not when.strip():
        return None
    text = when.strip()
    # `{{ expr }}` alone reads as `expr`; anything else (text around, several tags) as written.
    if text.startswith("{{") and text.endswith("}}") and text.count("{{") == 1:
        text = text[2:-2].strip()
    return _one_line(text)


def _arc_label(arcs: list[Mapping[str, Any]], source_guarded: bool) -> str | None:
    texts: list[str] = []
    for arc in arcs:
        guard = _guard_text(arc.get("when"))
        event = arc.get("event")
        if (
            isinstance(event, str)
            and event
            and (guard is None or guard in (f"event.name == '{event}'", f'event.name == "{event}"'))
        ):
            guard = event  # `event.name == 'loop.done'` alone reads as `loop.done`
        elif guard is None and arc.get("mode") == "exclusive" and source_guarded:
            guard = "else"
        if guard is None:
            return None  # one unconditional arc: the edge is always taken
        if guard not in texts:
            texts.append(guard)
    return _one_line(" or ".join(texts)) if texts else None


def edge_labels(graph: nx.DiGraph, unit_of: Mapping[str, Unit]) -> None:
    """Fill ``Unit.edge_labels`` (upstream unit id -> label) from the arcs between units."""
    guarded = {
        source: any(
            _guard_text(arc.get("when"))
            for _, _, data in graph.out_edges(source, data=True)
            for arc in data.get("arcs", [])
        )
        for source in graph.nodes
    }
    for source, target, data in graph.edges(data=True):
        up, down = unit_of.get(source), unit_of.get(target)
        if up is None or down is None or up is down:
            continue
        label = _arc_label(list(data.get("arcs", [])), guarded[source])
        if label is None:
            # Any unconditional arc between the two units: no label on the edge.
            down.edge_labels[up.id] = None
        elif down.edge_labels.get(up.id, "") is not None:
            previous = down.edge_labels.get(up.id)
            down.edge_labels[up.id] = (
                label if not previous or previous == label else _one_line(f"{previous} or {label}")
            )
    for unit in unit_of.values():
        unit.edge_labels = {k: v for k, v in unit.edge_labels.items() if v}


def decorate_units(units: list[Unit]) -> None:
    """Display names, ``tool_kind`` and ``map_index_template`` as task keyword arguments."""
    for unit in units:
        payload = unit.payload
        if unit.kind == "region":
            members = ", ".join(unit.steps[:4]) + (", ..." if len(unit.steps) > 4 else "")
            kind = "region"
            display = {unit.id: _one_line(f"{unit.id} (region: {members})")}
        else:
            kind = payload_kind(payload)
            step = str(payload.get("step", unit.id))
            if unit.kind in ("loop", "cursor"):
                # A fused loop's head and tail also run the steps around it: named first.
                lead = "".join(f"{name}, " for name in unit.lead)
                trail = "".join(f", {name}" for name in unit.trail)
                display = {
                    "head": _one_line(f"head ({lead}items)")
                    if unit.kind == "loop"
                    else "head (claim)",
                    "body": f"body ({kind})",
                    "worker": f"worker ({kind})",
                    "tail": _one_line(f"tail (collect{trail})"),
                }
            elif unit.kind == "loop_seq":
                display = {unit.id: _one_line(f"{step} ({kind}, sequential loop)")}
            elif unit.kind == "nested":
                display = {unit.id: _one_line(f"{step} (playbook)")}
            else:
                display = {unit.id: _one_line(f"{step} ({kind})")}
        for task in unit.tasks:
            extra: dict[str, Any] = {}
            name = display.get(task.task_id)
            if name and name != task.task_id:
                extra["task_display_name"] = name
            if unit.kind in _KIND_OPERATORS:
                extra["tool_kind"] = kind
            if task.mapped and unit.kind == "loop":
                extra["map_index_template"] = MAP_INDEX_TEMPLATE
            task.kwargs = {**extra, **task.kwargs}


def doc_md(
    *,
    name: str | None,
    description: str | None,
    catalog: str | None,
    source: str,
    dialect: str,
    profile: str,
    sha256: str,
) -> str:
    """Markdown for the DAG's Docs panel: what the playbook says about itself, then where it is."""
    lines = [
        f"# {' '.join(name.split())}" if isinstance(name, str) and name.strip() else "# Playbook"
    ]
    if description and description.strip():
        lines += ["", description.strip()]
    lines += [""]
    if catalog:
        lines.append(f"- Catalog path: `{catalog}`")
    lines += [
        f"- Source: `{source}`",
        f"- Dialect: {dialect}",
        f"- Engine profile: {profile} (what it does: noetlc's docs/semantics.md, section 4)",
        f"- SHA-256: `{sha256}`",
        "",
        "Compiled by noetlc: change the playbook and recompile rather than editing this DAG.",
    ]
    return "\n".join(lines) + "\n"


def tags(dialect: str, catalog: str | None) -> list[str]:
    out = ["noetl", dialect]
    if catalog and len(catalog) <= _MAX_TAG and catalog not in out:
        out.append(catalog)
    return out
