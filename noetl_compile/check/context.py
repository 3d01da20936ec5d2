"""What every check module receives: the playbook, its document, where to report, shared facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..analyze.flowgraph import StepGraph
from ..analyze.sites import TemplateSite, template_sites
from ..ast import Playbook
from ..diagnostics import DiagnosticSink, Position
from ..load import Document, Span, YList, YMap, span_of
from ..positions import source_indices


@dataclass(frozen=True)
class NestedCall:
    """A `playbook` tool naming another playbook; resolved once every file of the run is read."""

    file: str
    position: Position
    target: str


@dataclass(frozen=True)
class CatalogClaim:
    """A playbook's catalog key and DAG id; two claims on one key or one id are R208."""

    file: str
    position: Position
    key: str
    dag_id: str


@dataclass
class Project:
    """Facts about the whole run: other playbooks (for nested calls) and known connections."""

    connections: set[str] | None = None  # from --connections; None = not checked
    nested_calls: list[NestedCall] = field(default_factory=list)
    claims: list[CatalogClaim] = field(default_factory=list)


@dataclass
class CheckContext:
    playbook: Playbook
    document: Document
    sink: DiagnosticSink
    project: Project

    def report(self, code: str, position: Position, message: str, **kwargs: Any) -> None:
        self.sink.add(code, position, message, **kwargs)

    @staticmethod
    def pos(container: Any, key: Any = None) -> Position:
        """Position of ``container[key]`` (or the container): values, then the container."""
        if key is not None:
            if isinstance(container, YMap) and key in container:
                span = span_of(container[key]) or container.value_span(key)
                return span.position
            if isinstance(container, YList) and isinstance(key, int):
                return container.item_span(key).position
        span = span_of(container)
        return span.position if span else Position(1, 1)

    @staticmethod
    def key_pos(mapping: Any, key: Any) -> Position:
        if isinstance(mapping, YMap) and key in mapping:
            return mapping.key_span(key).position
        span = span_of(mapping)
        return span.position if span else Position(1, 1)

    def position_in_string(self, value: Any, offset: int) -> Position:
        """File position of character ``offset`` inside a YAML string value.

        Flow scalars are re-scanned character by character (positions.py); literal blocks map
        line by line; anything else searches the source slice and falls back to the scalar start.
        """
        span: Span | None = span_of(value)
        if span is None:
            return Position(1, 1)
        text = self.document.text
        raw = text[span.start : span.end]
        if span.style in ("|", ">"):
            return self._in_block(span, raw, value, offset)
        scanned = source_indices(text, span.start, span.end, span.style)
        if scanned is not None and scanned[1] == value:
            indices = scanned[0]
            return self.document.position_at(indices[offset] if offset < len(indices) else span.end)
        return self._search(span, raw, value, offset)

    def _in_block(self, span: Span, raw: str, value: str, offset: int) -> Position:
        line_index = value.count("\n", 0, offset)
        column = offset - (value.rfind("\n", 0, offset) + 1)
        body = raw.split("\n")[1:]  # the header line holds `|` / `>` and indicators
        indent = next((len(line) - len(line.lstrip(" ")) for line in body if line.strip()), 0)
        if span.style == "|" and line_index < len(body):
            # A literal block keeps every line (leading blank ones too): value line i is the
            # i-th line after the header, shifted right by the block's indentation.
            return Position(span.line + 1 + line_index, indent + column + 1)
        return self._search(span, raw, value, offset)

    def _search(self, span: Span, raw: str, value: str, offset: int) -> Position:
        needle = value[offset : offset + 24].split("\n", 1)[0]
        found = raw.find(needle) if needle else -1
        if found >= 0:
            return self.document.position_at(span.start + found)
        return span.position

    @cached_property
    def step_names(self) -> set[str]:
        return set(self.playbook.step_names)

    @cached_property
    def flow(self) -> StepGraph:
        return StepGraph(self.playbook)

    @cached_property
    def sites(self) -> list[TemplateSite]:
        return template_sites(self.playbook)
