"""What every check module receives: the playbook, its document, where to report, shared facts."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..airflow_versions import NEWEST
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
    # NoETL's local runtime (and a `./`/`../` path in NoETL 5) names the child by its file,
    # relative to the calling playbook's folder, not by catalog path.
    by_file: bool = False


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
    # The Airflow (major, minor) the DAG files are for (`--airflow-version`): what it cannot run
    # is reported at check time (airflow_versions), never left to fail when a run gets there.
    airflow: tuple[int, int] = NEWEST


_UNSCANNED = object()


@dataclass
class CheckContext:
    playbook: Playbook
    document: Document
    sink: DiagnosticSink
    project: Project
    _scanned: dict = field(default_factory=dict, repr=False)  # flow scalar span -> indices
    _blocks: dict = field(default_factory=dict, repr=False)  # literal block span -> _block()
    c515_kinds: set = field(default_factory=set, repr=False)  # kinds C515 named (NoETL 5: once)

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
        What is learnt about a string is kept, so many findings in one long string cost one scan.
        """
        span: Span | None = span_of(value)
        if span is None:
            return Position(1, 1)
        key = (span.start, span.end)
        if span.style in ("|", ">"):
            if span.style == "|":
                lines, indent, starts = self._block(key, span, value)
                line_index = bisect.bisect_right(starts, offset) - 1
                if line_index < lines:
                    # A literal block keeps every line (leading blank ones too): value line i is
                    # the i-th line after the header, shifted right by the block's indentation.
                    column = offset - starts[line_index]
                    return Position(span.line + 1 + line_index, indent + column + 1)
            return self._search(span, value, offset)
        scanned = self._scanned.get(key, _UNSCANNED)
        if scanned is _UNSCANNED:
            text = self.document.text
            scanned = self._scanned[key] = source_indices(text, span.start, span.end, span.style)
        if scanned is not None and scanned[1] == value:
            indices = scanned[0]
            return self.document.position_at(indices[offset] if offset < len(indices) else span.end)
        return self._search(span, value, offset)

    def _block(self, key: tuple[int, int], span: Span, value: str) -> tuple[int, int, list[int]]:
        """(source lines after the header, indentation, start offset of each value line)."""
        if key not in self._blocks:
            body = self.document.text[span.start : span.end].split("\n")[1:]  # header: `|`
            indent = next((len(line) - len(line.lstrip(" ")) for line in body if line.strip()), 0)
            starts = [0] + [m.end() for m in re.finditer("\n", value)]
            self._blocks[key] = (len(body), indent, starts)
        return self._blocks[key]

    def _search(self, span: Span, value: str, offset: int) -> Position:
        raw = self.document.text[span.start : span.end]
        needle = value[offset : offset + 24].split("\n", 1)[0]
        found = raw.find(needle) if needle else -1
        if found >= 0:
            return self.document.position_at(span.start + found)
        return span.position

    @cached_property
    def step_names(self) -> frozenset[str]:
        # Frozen: it is also the namespace of every did-you-mean about a step name, which then
        # costs nothing to pass (see read.base.did_you_mean).
        return frozenset(self.playbook.step_names)

    @cached_property
    def flow(self) -> StepGraph:
        return StepGraph.of(self.playbook)

    @cached_property
    def sites(self) -> list[TemplateSite]:
        return template_sites(self.playbook)
