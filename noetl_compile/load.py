"""Stage 1 — load: YAML text -> plain Python data that remembers where every node came from.

We compose with libyaml (``CSafeLoader``) and build the values ourselves instead of calling
``yaml.load``: that is where duplicate keys, recursive aliases and merge keys are decided, and
it lets every mapping and list carry the source span of its keys and items. Later stages see
ordinary ``dict``/``list``/``str`` values (subclasses), so they never depend on PyYAML.
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

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
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

# No playbook nests anywhere near this deep; below it every recursive stage is safe.
MAX_DEPTH = 100
# libyaml composes recursively in C and overflows the C stack (SIGSEGV) somewhere past 20,000
# levels. Nesting depth cannot exceed the bracket count plus the longest line, so only texts
# where that bound is high are scanned event by event (the parser itself is not recursive).
_COMPOSE_SAFE_BOUND = 4000
# Aliases may repeat a node; the built document may hold this many values per source character
# (plus a floor), so a few lines of anchors (billion laughs) cannot expand to gigabytes.
_EXPANSION_PER_CHAR, _EXPANSION_FLOOR = 4, 10_000
# Characters YAML forbids in a stream (YAML 1.1 c-printable); libyaml reports them as an offset.
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")
# int() refuses to print more decimal digits than this (sys.get_int_max_str_digits); a larger
# integer could be loaded from hex but neither reported nor emitted.
_MAX_INT_BITS = 14_000


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


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _position(text: str, index: int) -> Position:
    line = text.count("\n", 0, index) + 1
    return Position(line, index - (text.rfind("\n", 0, index) + 1) + 1)


# The printable ASCII characters plus tab, LF and CR: the ASCII characters YAML allows.
_ALLOWED_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n\r"


def _forbidden_character(path: str, text: str) -> Diagnostic | None:
    if text.isascii() and not text.encode("ascii").translate(None, _ALLOWED_ASCII):
        return None  # nearly every playbook: one C pass, several times faster than the search
    match = _FORBIDDEN.search(text)
    if match is None:
        return None
    return Diagnostic(
        "Y001",
        Severity.ERROR,
        path,
        _position(text, match.start()),
        f"invalid YAML: control character U+{ord(match.group()):04X} is not allowed "
        '(inside a double-quoted string write it as an escape, e.g. "\\0")',
    )


@functools.cache
def _libyaml_limits_nesting() -> bool:
    """Whether the installed libyaml stops at a nesting limit of its own (1000 levels since 0.2.6,
    far below the ~20,000 where its recursive composer overflows): then composing is always safe.
    Probed, not read from the version: a wheel may bundle one libyaml, a source build another."""
    if _Loader is yaml.SafeLoader:
        return True  # the pure-Python composer: RecursionError, which load_text reports
    try:
        for _ in yaml.parse("[" * 1001 + "]" * 1001, Loader=_Loader):
            pass
    except yaml.YAMLError as error:
        return _libyaml_nesting_limit(error)
    return False


def _too_deep(path: str, text: str) -> Diagnostic | None:
    """Y001 where nesting passes MAX_DEPTH, for texts where libyaml's composer might overflow."""
    if _libyaml_limits_nesting():
        return None  # compose stops first; load_text then finds the depth with _too_deep_pure
    brackets = text.count("[") + text.count("{")
    if brackets + len(text) < _COMPOSE_SAFE_BOUND:
        return None  # no line is longer than the text: skip splitting it
    if brackets + max(map(len, text.splitlines()), default=0) < _COMPOSE_SAFE_BOUND:
        return None  # shallow enough for the composer; the builder checks MAX_DEPTH itself
    try:
        return _first_too_deep(path, text, _Loader)
    except yaml.YAMLError as error:
        if not _libyaml_nesting_limit(error):
            return None  # compose reports the syntax error with its own position
    return _too_deep_pure(path, text)


def _libyaml_nesting_limit(error: yaml.YAMLError) -> bool:
    # libyaml >= 0.2.6 (in PyYAML 6.0.4's wheels) has a nesting limit of its own (1000 levels), and
    # its scanner's look-ahead can trip it before the parser hands over event MAX_DEPTH + 1.
    return "maximum nesting depth" in str(error)


def _too_deep_pure(path: str, text: str) -> Diagnostic | None:
    """The depth check with PyYAML's pure-Python parser: no limit and no recursion, so the
    diagnostic and its position are the same whatever libyaml is installed. A syntax error
    before the first level too deep is reported instead: it is the first mistake in the text
    (libyaml's look-ahead can trip its limit before its parser reaches that error)."""
    try:
        return _first_too_deep(path, text, yaml.SafeLoader)
    except yaml.YAMLError as error:
        return _yaml_error(path, error, text)


def _first_too_deep(path: str, text: str, loader: type) -> Diagnostic | None:
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                return Diagnostic(
                    "Y001",
                    Severity.ERROR,
                    path,
                    Position(mark.line + 1, mark.column + 1),
                    f"invalid YAML: nesting deeper than {MAX_DEPTH} levels",
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


# Errors found only where the parser gives up; the construct that was left open is the mistake.
_UNCLOSED = {
    "while scanning a quoted scalar": "unclosed quoted string",
    "while parsing a flow mapping": "unclosed `{`",
    "while parsing a flow sequence": "unclosed `[`",
    "while scanning a block scalar": "bad block scalar",
}


def _yaml_error(path: str, exc: yaml.YAMLError, text: str) -> Diagnostic:
    context = getattr(exc, "context", None)
    opened = _UNCLOSED.get(context or "")
    context_mark = getattr(exc, "context_mark", None)
    if opened and context_mark is not None:
        position = Position(context_mark.line + 1, context_mark.column + 1)
        problem = getattr(exc, "problem", None) or ""
        return Diagnostic(
            "Y001", Severity.ERROR, path, position, f"invalid YAML: {opened} ({problem})"
        )
    mark = getattr(exc, "problem_mark", None) or context_mark
    if mark is not None and context_mark is not None:
        # A quote left open swallows the following lines up to the next quote; the parser then
        # fails far below. Point at the quote that opened on a line and never closed.
        quote = _unbalanced_quote(text, context_mark.line, mark.line)
        if quote is not None:
            return Diagnostic(
                "Y001",
                Severity.ERROR,
                path,
                quote,
                f"invalid YAML: unclosed quoted string ({getattr(exc, 'problem', '')})",
            )
    position = Position(mark.line + 1, mark.column + 1) if mark else Position(1, 1)
    problem = getattr(exc, "problem", None) or str(exc)
    message = _one_line(f"{context}, {problem}" if context else str(problem))
    line = (
        text.splitlines()[position.line - 1]
        if mark and position.line <= len(text.splitlines())
        else ""
    )
    if "\t" in line[: position.col] or "'\\t'" in message:
        message += " (YAML does not allow tab characters for indentation; use spaces)"
    return Diagnostic("Y001", Severity.ERROR, path, position, f"invalid YAML: {message}")


def _unbalanced_quote(text: str, first: int, last: int) -> Position | None:
    """Position of a `"` that opens a value and is not closed on its line (0-based line range)."""
    lines = text.split("\n")
    for number in range(first, min(last, len(lines) - 1) + 1):
        line = lines[number]
        match = re.search(r"(?::|-)\s+(\")", line)
        if match is None:
            continue
        rest = line[match.end(1) :]
        if not re.search(r'(?<!\\)"', rest):
            return Position(number + 1, match.start(1) + 1)
    return None


def load_text(text: str, path: str) -> Document:
    """Parse one YAML document; never raises on bad input, reports diagnostics instead."""
    refused = _forbidden_character(path, text) or _too_deep(path, text)
    if refused is not None:
        return Document(path, text, None, [refused])
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        too_deep = _too_deep_pure(path, text) if _libyaml_nesting_limit(exc) else None
        return Document(path, text, None, [too_deep or _yaml_error(path, exc, text)])
    except (ValueError, RecursionError, MemoryError) as exc:
        message = f"invalid YAML: {_one_line(str(exc) or type(exc).__name__)}"
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
