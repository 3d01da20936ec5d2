"""The values a loaded playbook is made of: ``dict``/``list``/``str`` subclasses (``YMap``,
``YList``, ``YStr``) that remember the source ``Span`` of themselves, their keys and items.
``load.py`` builds them; every later stage reads them as ordinary values."""

from __future__ import annotations

from typing import Any

import yaml

from .diagnostics import Position


class Span:
    """Where a node sits in the source: 1-based line/col plus 0-based character offsets.

    Kept small because a playbook has tens of thousands of nodes and most spans are never
    asked for: the composed node tree is released once the document is built, and a value keeps
    only libyaml's start mark of its node (a compact C object holding offset, line and column,
    which the composer made anyway), its end offset and its scalar style. ``end`` and ``style``
    are known for a value's own span (``span_of(value)``: strings, mappings, lists); the spans of
    mapping keys and of items that are not strings or collections (``key_span``,
    ``value_span``, ``item_span``) are positions only, with ``end`` and ``style`` None.
    """

    __slots__ = ("_mark", "end", "style")

    def __init__(self, mark: Any, end: int | None = None, style: str | None = None) -> None:
        self._mark = mark
        self.end = end
        self.style = style  # scalar style: None (plain), "'", '"', "|", ">"; None for collections

    @classmethod
    def of(cls, node: yaml.Node) -> Span:
        style = node.style if isinstance(node, yaml.ScalarNode) else None
        return cls(node.start_mark, node.end_mark.index, style)

    @property
    def line(self) -> int:
        return self._mark.line + 1

    @property
    def col(self) -> int:
        return self._mark.column + 1

    @property
    def start(self) -> int:
        return self._mark.index

    @property
    def position(self) -> Position:
        return Position(self.line, self.col)

    def __repr__(self) -> str:
        return f"Span({self.line}:{self.col})"


class YMap(dict):
    """A mapping that knows the span of itself, of each key and of each value.

    ``key_spans`` and ``value_spans`` hold start marks (see ``Span``); the accessors wrap them.
    """

    __slots__ = ("key_spans", "span", "value_spans")

    def key_span(self, key: Any) -> Span:
        mark = self.key_spans.get(key)
        return Span(mark) if mark is not None else self.span

    def value_span(self, key: Any) -> Span:
        mark = self.value_spans.get(key)
        return Span(mark) if mark is not None else self.span


class YList(list):
    """A sequence that knows the span of itself and of each item (``item_spans``: start marks)."""

    __slots__ = ("item_spans", "span")

    def item_span(self, index: int) -> Span:
        if 0 <= index < len(self.item_spans):
            return Span(self.item_spans[index])
        return self.span


class YStr(str):
    """A string scalar with its span (so templates inside it can be located exactly).

    ``template_scan`` memoises what the template analysis derives from the text (set on first
    use; the text never changes): one scan per string for a whole check-and-compile run, however
    many strings the document holds (a size-bound cache shared by all strings would evict and
    rescan them on every pass once a playbook holds more templates than it keeps).
    """

    __slots__ = ("_end", "_mark", "_style", "template_scan")

    @property
    def span(self) -> Span:
        return Span(self._mark, self._end, self._style)


def span_of(value: Any) -> Span | None:
    return getattr(value, "span", None)


def list_of_one(value: Any, span: Span) -> YList:
    """Readers normalise `next: a` / `then: {...}` into a one-item list that keeps positions."""
    items = YList([value])
    items.span = span
    items.item_spans = [span._mark]
    return items


def empty_map(span: Span) -> YMap:
    mapping = YMap()
    mapping.span, mapping.key_spans, mapping.value_spans = span, {}, {}
    return mapping
