"""Stage 1 — load: YAML text -> plain Python data that remembers where every node came from.

We compose with libyaml (``CSafeLoader``) and build the values ourselves instead of calling
``yaml.load``: that is where duplicate keys, recursive aliases and merge keys are decided, and
it lets every mapping and list carry the source span of its keys and items. Later stages see
ordinary ``dict``/``list``/``str`` values (subclasses, ``spans.py``), so they never depend on
PyYAML. What the text is refused for before it is built, and where a parser error is, is
``yaml_errors.py``.
"""

from __future__ import annotations

import bisect
import errno
import functools
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from .diagnostics import Diagnostic, Position, Severity
from .spans import Span, YList, YMap, YStr, empty_map, list_of_one, span_of
from .yaml_errors import (
    LOADER,
    MAX_DEPTH,
    forbidden_character,
    libyaml_nesting_limit,
    one_line,
    too_deep_for_composer,
    too_deep_pure,
    yaml_error,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "Document",
    "Span",
    "YList",
    "YMap",
    "YStr",
    "empty_map",
    "list_of_one",
    "load_file",
    "load_text",
    "span_of",
]

# Scalar construction (int/float/bool/null/timestamp...) is stateless, so one instance serves all.
_scalar_constructor = SafeConstructor()
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
# The resolver tags a plain `=` as !!value and `<<` as !!merge; outside a key both are text.
_TEXT_TAGS = {_STR_TAG, "tag:yaml.org,2002:value", _MERGE_TAG}
# Collections may carry these tags (``!!set`` and ``!!omap`` are mappings/sequences to us too).
_MAP_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:set"}
_SEQ_TAGS = {"tag:yaml.org,2002:seq", "tag:yaml.org,2002:omap", "tag:yaml.org,2002:pairs"}
# Scalars we build with SafeConstructor; other standard tags (binary, a `!!map` on a scalar)
# do not give a value a playbook can use.
_SCALAR_TAGS = {
    "tag:yaml.org,2002:" + name for name in ("null", "bool", "int", "float", "timestamp")
}

# Aliases may repeat a node; the built document may hold this many values per source character
# (plus a floor), so a few lines of anchors (billion laughs) cannot expand to gigabytes.
_EXPANSION_PER_CHAR, _EXPANSION_FLOOR = 4, 10_000
# int() refuses to print more decimal digits than this (sys.get_int_max_str_digits); a larger
# integer could be loaded from hex but neither reported nor emitted.
_MAX_INT_BITS = 14_000


@dataclass
class Document:
    """One loaded YAML file."""

    path: str
    text: str
    data: Any  # YMap for a playbook; None when the file could not be loaded
    diagnostics: list[Diagnostic]

    def position_at(self, index: int) -> Position:
        """1-based line/column of a character offset in the source (a binary search in the
        line starts, so many findings in one file cost log n each, not a rescan)."""
        index = max(0, min(index, len(self.text)))
        starts = self._line_starts
        line = bisect.bisect_right(starts, index)
        return Position(line, index - starts[line - 1] + 1)

    @functools.cached_property
    def _line_starts(self) -> list[int]:
        return [0] + [match.end() for match in re.finditer("\n", self.text)]


class _GiveUp(Exception):
    """The document cannot be built at all (too deep, too large); already reported."""


class _Builder:
    """Turns a composed node graph into Y* values, reporting what yaml.safe_load hides."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.diagnostics: list[Diagnostic] = []
        self._active: set[int] = set()  # node ids on the current path, to catch alias cycles
        # Collections on the current path that were built before (alias uses), outermost first.
        self._repeated: list[yaml.Node] = []
        self._seen: set[int] = set()  # collections built once already
        self._budget = _EXPANSION_FLOOR + _EXPANSION_PER_CHAR * len(text)

    def report(
        self, code: str, node: yaml.Node, message: str, position: Position | None = None
    ) -> None:
        from .rules import severity_of

        self.diagnostics.append(
            Diagnostic(
                code,
                severity_of(code),
                self.path,
                position or _mark_position(node.start_mark),
                message,
            )
        )

    def build(self, node: yaml.Node) -> Any:
        self._budget -= 1
        if self._budget < 0:
            # Point at the outermost repeated anchor: that is the alias use that multiplies.
            repeated = self._repeated[0] if self._repeated else node
            self.report(
                "Y008",
                repeated,
                "aliases expand this document past "
                f"{_EXPANSION_FLOOR + _EXPANSION_PER_CHAR * len(self.text):,} values; "
                "this anchor is repeated too often (a 'billion laughs' document?)",
            )
            raise _GiveUp
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if len(self._active) >= MAX_DEPTH:
            self.report("Y001", node, f"invalid YAML: nesting deeper than {MAX_DEPTH} levels")
            raise _GiveUp
        if id(node) in self._active:
            self.report(
                "Y004", node, "recursive alias: a node contains itself", self._alias_position(node)
            )
            return None
        if (
            isinstance(node, yaml.MappingNode)
            and node.flow_style
            and self.text.startswith("{{", node.start_mark.index)
        ):
            # `when: {{ x }}` is a flow mapping to YAML; the author meant a template string.
            end = node.end_mark.index
            self.report(
                "Y003",
                node,
                "unquoted template: YAML reads `{{ ... }}` as a mapping; "
                f'quote the whole value: "{self.text[node.start_mark.index : end]}"',
            )
            return _ystr(self.text[node.start_mark.index : end], node)
        again = id(node) in self._seen
        if not again:
            self._seen.add(id(node))
            self._collection_tag(node)
        else:
            self._repeated.append(node)
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node)
            return self._sequence(node)
        finally:
            self._active.discard(id(node))
            if again:
                self._repeated.pop()

    def _collection_tag(self, node: yaml.Node) -> None:
        mapping = isinstance(node, yaml.MappingNode)
        if node.tag in (_MAP_TAGS if mapping else _SEQ_TAGS):
            return
        kind = "mapping" if mapping else "sequence"
        self.report(
            "Y005",
            node,
            f"tag {_tag_name(node.tag)!r} does not fit a {kind}; it is read as a {kind}",
        )

    def _alias_position(self, node: yaml.Node) -> Position | None:
        """Where the recursive `*alias` is written: composed nodes forget aliases, so find the
        anchor just before the node and the first use of it inside the node's own text."""
        start, end = node.start_mark.index, node.end_mark.index
        anchor = re.search(r"&([^\s,\[\]{}]+)\s*$", self.text[max(0, start - 200) : start])
        if anchor is None:
            anchor = re.match(r"&([^\s,\[\]{}]+)", self.text[start:])
        if anchor is None:
            return None
        use = self.text.find("*" + anchor.group(1), start, end)
        if use < 0:
            return None
        line = self.text.count("\n", 0, use) + 1
        return Position(line, use - (self.text.rfind("\n", 0, use) + 1) + 1)

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag in _TEXT_TAGS:
            return _ystr(node.value, node)
        if node.tag not in _SCALAR_TAGS:
            self.report(
                "Y005",
                node,
                f"unsupported YAML tag {_tag_name(node.tag)!r} on a scalar; "
                "the value is read as a string",
            )
            return self._as_text(node)
        if node.tag == _INT_TAG and len(node.value) > _MAX_INT_BITS // 3:
            # Cheap length test first: int() of a long decimal string is quadratic.
            self.report("Y005", node, f"invalid !!int value: {len(node.value)} digits is too large")
            return self._as_text(node)
        try:
            built = _scalar_constructor.yaml_constructors[node.tag](_scalar_constructor, node)
        except Exception:  # noqa: BLE001 — each constructor fails in its own way (KeyError...)
            shown = node.value if len(node.value) <= 40 else node.value[:37] + "..."
            self.report("Y005", node, f"invalid {_tag_name(node.tag)} value: {shown!r}")
            return self._as_text(node)
        if isinstance(built, int) and built.bit_length() > _MAX_INT_BITS:
            self.report(
                "Y005", node, f"invalid !!int value: {built.bit_length()} bits is too large"
            )
            return self._as_text(node)
        return built

    @staticmethod
    def _as_text(node: yaml.ScalarNode) -> YStr:
        """A scalar whose tag does not fit is kept as the text it was written as."""
        return _ystr(node.value, node)

    def _sequence(self, node: yaml.SequenceNode) -> YList:
        items = YList(self.build(item) for item in node.value)
        items.span = Span.of(node)
        items.item_spans = [item.start_mark for item in node.value]  # item_span() wraps lazily
        return items

    def _mapping(self, node: yaml.MappingNode) -> YMap:
        mapping = YMap()
        mapping.span = Span.of(node)
        mapping.key_spans = {}
        mapping.value_spans = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                self._merge(mapping, value_node)
                continue
            key = self.build(key_node)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                self.report("Y003", key_node, "mapping keys must be scalars")
                continue
            if key in mapping.key_spans:
                first = mapping.key_span(key)
                self.report(
                    "Y002",
                    key_node,
                    f"duplicate key {key!r} (first defined on line {first.line}); YAML keeps only the last value",
                )
            mapping[key] = self.build(value_node)
            # Start marks only: the node tree is released after building (see Span).
            mapping.key_spans[key] = key_node.start_mark
            mapping.value_spans[key] = value_node.start_mark
        return mapping

    def _merge(self, mapping: YMap, value_node: yaml.Node) -> None:
        """`<<: *anchor` merge keys: explicit keys win over merged ones, as in YAML 1.1."""
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for source in sources:
            merged = self.build(source)
            if not isinstance(merged, YMap):
                self.report(
                    "Y003", source, "a merge key (<<) needs a mapping or a list of mappings"
                )
                continue
            for key, value in merged.items():
                if key not in mapping:
                    mapping[key] = value
                    mapping.key_spans[key] = merged.key_spans.get(key)
                    mapping.value_spans[key] = merged.value_spans.get(key)


def _ystr(text: str, node: yaml.Node) -> YStr:
    value = YStr(text)
    value._mark = node.start_mark
    value._end = node.end_mark.index
    value._style = node.style if isinstance(node, yaml.ScalarNode) else None
    return value


def _mark_position(mark: Any) -> Position:
    return Position(mark.line + 1, mark.column + 1)


def _tag_name(tag: str) -> str:
    """`tag:yaml.org,2002:bool` -> `!!bool`; local tags stay as written."""
    prefix = "tag:yaml.org,2002:"
    return "!!" + tag[len(prefix) :] if tag.startswith(prefix) else tag


def load_text(text: str, path: str) -> Document:
    """Parse one YAML document; never raises on bad input, reports diagnostics instead."""
    refused = forbidden_character(path, text) or too_deep_for_composer(path, text)
    if refused is not None:
        return Document(path, text, None, [refused])
    try:
        nodes = list(yaml.compose_all(text, Loader=LOADER))
    except yaml.YAMLError as exc:
        too_deep = too_deep_pure(path, text) if libyaml_nesting_limit(exc) else None
        return Document(path, text, None, [too_deep or yaml_error(path, exc, text)])
    except (ValueError, RecursionError, MemoryError) as exc:
        message = f"invalid YAML: {one_line(str(exc) or type(exc).__name__)}"
        return Document(
            path, text, None, [Diagnostic("Y001", Severity.ERROR, path, Position(1, 1), message)]
        )
    builder = _Builder(path, text)
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        return Document(
            path,
            text,
            None,
            [
                Diagnostic(
                    "Y006", Severity.ERROR, path, Position(1, 1), "empty document: no playbook here"
                )
            ],
        )
    if len(nodes) > 1:
        builder.report(
            "Y007", nodes[1], "more than one YAML document in a file; only the first is read"
        )
    try:
        data = builder.build(nodes[0])
    except _GiveUp:
        data = None
    if data is None and not builder.diagnostics:  # `---` or `~` alone: a document of nothing
        builder.report("Y006", nodes[0], "empty document: no playbook here")
    return Document(path, text, data, builder.diagnostics)


# Larger than any playbook (a 100,000-step chain is ~12 MiB); reading stops there.
MAX_FILE_BYTES = 64 * 1024 * 1024


def load_file(path: str) -> Document:
    try:
        # Non-blocking and checked after opening: a file swapped for a FIFO (or any file whose
        # read would wait) since discovery looked at it cannot hang the run.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            message = f"cannot read file: larger than {MAX_FILE_BYTES // 2**20} MiB"
            return Document(path, "", None, [_file_error(path, message)])
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = (
            len(data[data.rfind(b"\n", 0, exc.start) + 1 : exc.start].decode("utf-8", "replace"))
            + 1
        )
        message = f"not UTF-8 text: {exc.reason} at byte {exc.start}"
        return Document(
            path,
            "",
            None,
            [Diagnostic("Y001", Severity.ERROR, path, Position(line, column), message)],
        )
    except OSError as exc:
        return Document(path, "", None, [_file_error(path, f"cannot read file: {exc.strerror}")])
    text = text.removeprefix("\ufeff")  # a byte order mark is not part of the document
    return load_text(text, path)


def _file_error(path: str, message: str) -> Diagnostic:
    return Diagnostic("E001", Severity.ERROR, path, Position(1, 1), message)
