"""Variable references, filters and tests in the Jinja templates of playbook strings.

A template is split into tags by a small scanner that mirrors Jinja's lexer where it matters
(string literals, bracket balancing, whitespace-control marks, comments, raw blocks). Each tag
body is parsed with the LALR grammar `grammar/jinja_expr.lark`, and the statements are replayed
in order to tell free names from locals (set, for targets, macro parameters, `loop`).

Jinja stays the authority on syntax but is only consulted when this fast path meets something it
cannot parse: then Jinja's verdict tells a real syntax error (reported with Jinja's message and
the offset of the offending token) from a gap in the grammar (then that tag is analysed from
Jinja's own AST and listed in `unparsed`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from itertools import chain
from pathlib import Path
from typing import NamedTuple

import jinja2
from jinja2 import nodes as jinja_nodes
from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, UnexpectedToken

from ..load import YStr

__all__ = [
    "BUILTIN_GLOBALS",
    "Reference",
    "TemplateScan",
    "TemplateSyntaxProblem",
    "is_templated",
    "scan_template",
    "template_tags",
]


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Reference:
    root: str  # first name, e.g. "fetch" in fetch.data.items[0]
    path: tuple[str | int, ...]  # static path after the root; stops at the first dynamic subscript
    offset: int  # offset in the scanned text where the root name starts
    guarded: bool  # operand of `is defined` / `is undefined` / `| default(...)` / `| d(...)`


@dataclass(frozen=True, slots=True)
class TemplateSyntaxProblem:
    message: str  # Jinja's own message
    offset: int  # offset of the offending token in the scanned text


@dataclass(frozen=True, slots=True)
class TemplateScan:
    references: tuple[Reference, ...]  # free variable references, in text order
    filters: tuple[tuple[str, int], ...]  # (filter name, offset) of every filter application
    tests: tuple[tuple[str, int], ...]  # (test name, offset) of every test
    error: TemplateSyntaxProblem | None
    unparsed: tuple[str, ...]  # tag bodies Jinja accepts but the grammar does not (or reads apart)


# Names Jinja provides to every template: not references to anything a playbook defines.
BUILTIN_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace"})
# An author probing whether a value exists, rather than relying on it.
_GUARD_FILTERS = frozenset({"default", "d"})
_GUARD_TESTS = frozenset({"defined", "undefined"})
_CONSTANTS = {
    "true": True,
    "True": True,
    "false": False,
    "False": False,
    "none": None,
    "None": None,
}
# Names a macro body (and a call block's body, which is a macro) gets implicitly.
_MACRO_LOCALS = ("varargs", "kwargs", "caller")
# Tags that may continue an open block, before its end tag.
_MIDDLE_TAGS = {"if": ("elif", "else"), "for": ("else",)}


def is_templated(text: str) -> bool:
    """Jinja would read this string as a template (a comment alone counts: `{#` must close)."""
    return "{{" in text or "{%" in text or "{#" in text


# ----------------------------------------------------------------------------- expression tree
# The parse keeps only what the analysis needs: names, static paths, calls, filters and tests.
# Every other construct (operators, literals, lists, conditionals) becomes a Group of operands.
# Offsets inside nodes are relative to the tag body that was parsed.


class Name(NamedTuple):
    name: str
    offset: int


class Const(NamedTuple):
    value: object


class Attr(NamedTuple):
    obj: object
    key: str | int  # `a.b`, or `a.0`


class Item(NamedTuple):
    obj: object
    key: object  # subscript expression


class Call(NamedTuple):
    obj: object
    args: tuple


class Filter(NamedTuple):
    name: str
    offset: int
    operand: object  # None in `{% filter f %}` and `{% set x | f %}`
    args: tuple


class Test(NamedTuple):
    name: str
    offset: int
    operand: object
    args: tuple


class Group(NamedTuple):
    items: tuple


@dataclass(frozen=True, slots=True)
class _Statement:
    """What a `{% %}` tag does to scopes and block nesting."""

    keyword: str
    expressions: tuple = ()  # evaluated in the enclosing scope
    binds: tuple[str, ...] = ()  # then bound in the enclosing scope (`set x = ...`, a macro's name)
    opens_block: bool = False
    block_locals: tuple[str, ...] = ()  # bound inside the block (loop targets, parameters)
    block_expressions: tuple = ()  # evaluated inside the block (a for loop's filter)
    binds_at_end: tuple[str, ...] = ()  # bound in the enclosing scope when the block ends


# ----------------------------------------------------------------------------- parser


class _Rejected(Exception):
    """Something the grammar lets through but Jinja rejects; `offset` is in the tag body, or
    None when unknown."""

    def __init__(self, offset: int | None) -> None:
        super().__init__(offset)
        self.offset = offset


class _Keyword(NamedTuple):
    value: object


class _Spread(NamedTuple):
    value: object
    double: bool  # `**kwargs` rather than `*args`


def _chain_filters(filters: tuple[Filter, ...]) -> tuple:
    """`{% filter a | b %}`: each filter applies to the previous one's result."""
    chained = None
    for applied in filters:
        chained = applied._replace(operand=chained)
    return () if chained is None else (chained,)


def _names_and_namespaces(targets: tuple) -> tuple[tuple[str, ...], tuple[Name, ...]]:
    """Split `set` targets into bound names and namespaces written through (`ns.x`)."""
    namespaces = tuple(part for part in targets if type(part) is Name)
    names = tuple(chain.from_iterable(part for part in targets if type(part) is not Name))
    return names, namespaces


def _signature(params: tuple) -> tuple[tuple, tuple[str, ...]]:
    """The default values of a macro's (name, default) parameters, and the names its body sees."""
    defaults = tuple(default for _, default in params if default is not None)
    return defaults, tuple(name for name, _ in params) + _MACRO_LOCALS


@v_args(inline=True)
class _Builder(Transformer):
    """Lark callbacks, run during the LALR parse: they build the small tree above directly."""

    def expression(self, node):
        return node

    def name(self, token):
        if token.value in _CONSTANTS:
            return Const(_CONSTANTS[token.value])
        return Name(token.value, token.start_pos)

    def string(self, *tokens):
        parts = []
        for token in tokens:
            escaped = token.value[1:-1].encode("ascii", "backslashreplace")
            try:  # the unescaping Jinja's lexer does
                parts.append(escaped.decode("unicode-escape"))
            except UnicodeError:
                raise _Rejected(token.start_pos) from None
        return Const("".join(parts))

    def integer(self, token):
        try:
            return Const(int(token.value.replace("_", ""), 0))
        except ValueError:  # more digits than Python converts
            raise _Rejected(token.start_pos) from None

    def real(self, token):
        return Const(float(token.value.replace("_", "")))

    def group(self, *items):
        return Group(items)

    expression_list = test_list = for_iterable = group

    def negative(self, operand):
        # Fold `-1` so that `rows[-1]` keeps a static path.
        if type(operand) is Const and type(operand.value) in (int, float):
            return Const(-operand.value)
        return operand

    # Trailers are built without their object; apply_trailer fills it in.
    def apply_trailer(self, obj, trailer):
        return type(trailer)(obj, trailer[1])

    def attribute(self, token):
        return Attr(None, token.value)

    def index_attribute(self, token):
        return Attr(None, int(token.value.replace("_", ""), 0))

    def subscription(self, *keys):  # `a[]` is valid Jinja too
        return Item(None, keys[0] if len(keys) == 1 else Group(keys))

    def call(self, args):
        return Call(None, args)

    def keyword_argument(self, _name, value):
        return _Keyword(value)

    def star_argument(self, value):
        return _Spread(value, False)

    def double_star_argument(self, value):
        return _Spread(value, True)

    def call_args(self, *arguments):
        # Jinja's order: positional, then keywords and at most one *args, then one **kwargs.
        stage, starred, values = 0, False, []
        for argument in arguments:
            kind = type(argument)
            if kind is _Spread:
                if stage == 2 or (starred and not argument.double):
                    raise _Rejected(None)
                stage, starred = (2, starred) if argument.double else (1, True)
            elif kind is _Keyword:
                if stage == 2:
                    raise _Rejected(None)
                stage = 1
            elif stage:
                raise _Rejected(None)
            values.append(argument.value if kind is _Keyword or kind is _Spread else argument)
        return tuple(values)

    def filter_call(self, *parts):
        names = [part for part in parts if type(part) is Token]
        args = parts[-1] if type(parts[-1]) is tuple else ()
        return Filter(".".join(names), names[0].start_pos, None, args)

    def test_call(self, *parts):
        names = [part for part in parts if type(part) is Token]
        last = parts[-1]  # call arguments, or one bare argument (`x is sameas false`)
        args = last if type(last) is tuple else (last,)
        return Test(".".join(names), names[0].start_pos, None, args)

    def test_name(self, *names):
        return Test(".".join(names), names[0].start_pos, None, ())

    def apply_filter(self, operand, applied):
        return applied._replace(operand=operand)

    apply_test = apply_filter

    # statements

    def target_name(self, token):
        return (token.value,)

    def targets(self, *parts):
        return tuple(chain.from_iterable(parts))

    def namespace_target(self, namespace, _attribute):
        return Name(namespace.value, namespace.start_pos)

    def set_targets(self, *parts):
        return parts

    def param(self, token):
        return (token.value, None)

    def default_param(self, token, default):
        return (token.value, default)

    def params(self, *params):
        return params

    def with_assign(self, names, value):
        return names, value

    def callee(self, target, args):
        return Call(target, args)

    def if_stmt(self, test):
        return _Statement("if", (test,), opens_block=True)

    def elif_stmt(self, test):
        return _Statement("elif", (test,))

    def else_stmt(self):
        return _Statement("else")

    def for_stmt(self, names, iterable, *loop_filter):
        return _Statement(
            "for",
            (iterable,),
            opens_block=True,
            block_locals=names + ("loop",),
            block_expressions=loop_filter,
        )

    def set_stmt(self, targets, value):
        names, namespaces = _names_and_namespaces(targets)
        return _Statement("set", namespaces + (value,), binds=names)

    def set_block_stmt(self, targets, *filters):
        names, namespaces = _names_and_namespaces(targets)
        return _Statement(
            "set", namespaces + _chain_filters(filters), opens_block=True, binds_at_end=names
        )

    def macro_stmt(self, name, params=()):
        defaults, names = _signature(params)
        return _Statement(
            "macro", defaults, binds=(name.value,), opens_block=True, block_locals=names
        )

    def call_stmt(self, *parts):
        params, callee = (parts[0] if len(parts) == 2 else ()), parts[-1]
        defaults, names = _signature(params)
        return _Statement("call", (callee,) + defaults, opens_block=True, block_locals=names)

    def filter_stmt(self, *filters):
        return _Statement("filter", _chain_filters(filters), opens_block=True)

    def with_stmt(self, *assignments):
        names = tuple(chain.from_iterable(names for names, _ in assignments))
        return _Statement(
            "with", tuple(value for _, value in assignments), opens_block=True, block_locals=names
        )

    def end_stmt(self, token):
        return _Statement(token.value)


def _grammar_text() -> str:
    """The grammar from the source checkout, else from the installed package data."""
    in_checkout = Path(__file__).resolve().parents[2] / "grammar" / "jinja_expr.lark"
    if in_checkout.is_file():
        return in_checkout.read_text(encoding="utf-8")
    installed = resources.files("noetl_compile.grammar").joinpath("jinja_expr.lark")
    return installed.read_text(encoding="utf-8")


def parser_cache_path(grammar: str) -> str | bool:
    """Where Lark keeps the analysed grammar: a file in the user's own cache folder, named by the
    grammar's and Lark's version, or False (no cache). Never `cache=True`: Lark would unpickle a
    file of a predictable name in the shared temporary folder, which another user could plant."""
    import hashlib
    import os

    import lark

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "noetlc"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = base.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            return False  # a folder someone else owns or may write into: no cache
    except OSError:
        return False
    digest = hashlib.sha256(f"{lark.__version__}\n{grammar}".encode()).hexdigest()[:16]
    return str(base / f"jinja_expr-{digest}.lark-cache")


_GRAMMAR = _grammar_text()
_PARSER = Lark(
    _GRAMMAR,
    parser="lalr",
    lexer="contextual",
    start=["expression", "statement"],
    maybe_placeholders=False,
    transformer=_Builder(),
    cache=parser_cache_path(_GRAMMAR),
)


# Three tags in four are a bare dotted name (`{{ workload.api_url }}`). This regex recognises
# that subset of the grammar's language and builds the same tree without a parser run, which
# costs far more than the regex. (`not` is a keyword there, so `{{ not }}` goes to the parser.)
_DOTTED_NAME = re.compile(r"\s*+(?!not\b)([^\W\d]\w*+)((?:\.[^\W\d]\w*+)*+)\s*+")


def _parse(kind: str, source: str) -> tuple[object | None, int | None]:
    """(tree, None), or (None, offset in `source` where the parse failed, None if unknown)."""
    if kind == "expression" and (dotted := _DOTTED_NAME.fullmatch(source)) is not None:
        root = dotted.group(1)
        node = Const(_CONSTANTS[root]) if root in _CONSTANTS else Name(root, dotted.start(1))
        for attribute in dotted.group(2).split(".")[1:]:
            node = Attr(node, attribute)
        return node, None
    return _parse_with_grammar(kind, source)


# Tags recur across the steps and files of a run (`{{ x | tojson }}`); trees are immutable and
# their offsets are relative to the tag body, so one parse serves every occurrence.
@functools.lru_cache(maxsize=4096)
def _parse_with_grammar(kind: str, source: str) -> tuple[object | None, int | None]:
    try:
        return _PARSER.parse(source, start=kind), None
    except UnexpectedToken as failure:
        return None, len(source) if failure.token.type == "$END" else failure.token.start_pos
    except UnexpectedInput as failure:  # an unexpected character, or the end of the input
        position = failure.pos_in_stream
        return None, position if position is not None and position >= 0 else len(source)
    except _Rejected as failure:
        return None, failure.offset


# ----------------------------------------------------------------------------- tag scanner


class _Tag(NamedTuple):
    kind: str  # "expression" or "statement" (the grammar's start symbols), or "broken"
    body_start: int
    body_end: int
    end: int  # after the closing mark; -1 when the tag is not closed


_TAG_OPEN = re.compile(r"\{([{%#])[-+]?")
# Jinja's own patterns for raw blocks (a `+` is not allowed before the first `%}`).
_RAW_OPEN = re.compile(r"\{%[-+]?+\s*+raw\s*+(?:-%\}|%\})")
_RAW_CLOSE = re.compile(r"\{%[-+]?+\s*+endraw\s*+[-+]?+%\}")
_CLOSE = {"expression": re.compile(r"-?\}\}"), "statement": re.compile(r"[-+]?%\}")}
# One step through a tag: a string literal, or a run of characters that cannot start a closing
# mark, a bracket or a string, or any single character.
_TAG_CONTENT = re.compile(
    r"""'(?:[^'\\]++|\\.)*+'|"(?:[^"\\]++|\\.)*+"|[^'"()\[\]{}%}+\-]++|.""", re.DOTALL
)
_CLOSING_BRACKET = {"(": ")", "[": "]", "{": "}"}


def _split_tags(text: str) -> Iterator[_Tag]:
    """The `{{ }}` and `{% %}` tags of a template, skipping comments and raw blocks.

    Stops after a tag that is not closed (the text ends inside it, or a bracket in it does not
    match: then its body ends at that bracket) and after an unclosed comment or raw block (a
    "broken" tag with an empty body): like Jinja's lexer, nothing after that can be trusted.
    """
    position = 0
    while (opening := _TAG_OPEN.search(text, position)) is not None:
        start = opening.start()
        if opening.group(1) == "#":
            close = text.find("#}", opening.end())
            if close < 0:
                yield _Tag("broken", start, start, -1)
                return
            position = close + 2
            continue
        if opening.group(1) == "%" and (raw := _RAW_OPEN.match(text, start)) is not None:
            close = _RAW_CLOSE.search(text, raw.end())
            if close is None:
                yield _Tag("broken", start, start, -1)
                return
            position = close.end()
            continue
        kind = "expression" if opening.group(1) == "{" else "statement"
        tag = _scan_tag(kind, text, opening.end())
        yield tag
        if tag.end < 0:
            return
        position = tag.end


def _scan_tag(kind: str, text: str, body_start: int) -> _Tag:
    # As in Jinja, a closing mark only counts where brackets are balanced: `{{ {'a': 1}}}`.
    close_mark = _CLOSE[kind]
    expected: list[str] = []
    position = body_start
    while True:
        if not expected and (close := close_mark.match(text, position)) is not None:
            return _Tag(kind, body_start, position, close.end())
        step = _TAG_CONTENT.match(text, position)
        if step is None:
            return _Tag(kind, body_start, len(text), -1)
        char = text[position]
        if char in _CLOSING_BRACKET:
            expected.append(_CLOSING_BRACKET[char])
        elif char in ")]}" and (not expected or expected.pop() != char):
            return _Tag(kind, body_start, position, -1)
        position = step.end()


# Statements that load another template: the runtime (like NoETL's engine) renders playbook
# strings in an environment without a loader, so each of them fails every time it renders.
LOADER_STATEMENTS = frozenset({"include", "extends", "import", "from"})
_STATEMENT_KEYWORD = re.compile(r"\s*+(\w+)")


def loader_statements(text: str) -> tuple[tuple[str, int], ...]:
    """(keyword, offset of the keyword) of every `include`/`extends`/`import`/`from` tag."""
    found = []
    for tag in _split_tags(text):
        if tag.kind != "statement":
            continue
        keyword = _STATEMENT_KEYWORD.match(text, tag.body_start, tag.body_end)
        if keyword is not None and keyword.group(1) in LOADER_STATEMENTS:
            found.append((keyword.group(1), keyword.start(1)))
    return tuple(found)


# ----------------------------------------------------------------------------- Jinja fallback

_ENV = jinja2.Environment()


class _Locator:
    """Offsets for words of a tag found in Jinja's AST, which only knows line numbers: the next
    standalone occurrence of the word in the tag body (best effort)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.cursor: dict[str, int] = {}

    def __call__(self, word: str) -> int:
        standalone = re.compile(rf"(?<![\w.]){re.escape(word)}(?!\w)")
        found = standalone.search(self.source, self.cursor.get(word, 0))
        if found is None:
            return 0
        self.cursor[word] = found.end()
        return found.start()


def _from_jinja(node: jinja_nodes.Node, locate: _Locator) -> object:
    """Jinja's AST of an expression as the tree the grammar builds."""

    def convert(child):
        return _from_jinja(child, locate)

    if isinstance(node, (jinja_nodes.Name, jinja_nodes.NSRef)):
        return Name(node.name, locate(node.name))
    if isinstance(node, jinja_nodes.Const):
        return Const(node.value)
    if isinstance(node, jinja_nodes.Getattr):
        return Attr(convert(node.node), node.attr)
    if isinstance(node, jinja_nodes.Getitem):
        return Item(convert(node.node), convert(node.arg))
    if isinstance(node, (jinja_nodes.Call, jinja_nodes.Filter, jinja_nodes.Test)):
        operand = None if node.node is None else convert(node.node)
        args = tuple(convert(child) for child in node.iter_child_nodes() if child is not node.node)
        if isinstance(node, jinja_nodes.Call):
            return Call(operand, args)
        kind = Filter if isinstance(node, jinja_nodes.Filter) else Test
        return kind(node.name, locate(node.name), operand, args)
    return Group(tuple(convert(child) for child in node.iter_child_nodes()))


def _stored_names(target: jinja_nodes.Node) -> tuple[str, ...]:
    if isinstance(target, jinja_nodes.Name):
        return (target.name,)
    return tuple(name.name for name in target.find_all(jinja_nodes.Name))


def _is_target(node: jinja_nodes.Node) -> bool:
    is_name_or_tuple = isinstance(node, (jinja_nodes.Name, jinja_nodes.Tuple))
    return is_name_or_tuple and node.ctx in ("store", "param")


def _jinja_template(source: str) -> jinja_nodes.Template | None:
    try:
        return _ENV.parse(source)
    except Exception:  # noqa: BLE001 - a syntax error, or Jinja failing on absurd input
        return None


def _expression_via_jinja(source: str) -> object | None:
    template = _jinja_template("{{ " + source + " }}")
    return None if template is None else _from_jinja(template.body[0].nodes[0], _Locator(source))


_KEYWORD = re.compile(r"\s*+(\w*+)")


def _statement_via_jinja(source: str) -> _Statement | None:
    keyword = _KEYWORD.match(source).group(1)
    if keyword.startswith("end"):
        return _Statement(keyword)
    if keyword == "elif":
        test = _expression_via_jinja(source[source.index("elif") + 4 :])
        return None if test is None else _Statement("elif", (test,))
    # Jinja parses whole templates only: try the statement alone, then as a block.
    for suffix, opens_block in (("", False), (f"{{% end{keyword} %}}", True)):
        template = _jinja_template("{% " + source + " %}" + suffix)
        if template is not None:
            return _statement_from_jinja(keyword, template.body[0], opens_block, _Locator(source))
    return None


def _statement_from_jinja(
    keyword: str, node: jinja_nodes.Node, opens_block: bool, locate: _Locator
) -> _Statement:
    def convert(child):
        return _from_jinja(child, locate)

    if isinstance(node, jinja_nodes.For):
        return _Statement(
            "for",
            (convert(node.iter),),
            opens_block=True,
            block_locals=_stored_names(node.target) + ("loop",),
            block_expressions=() if node.test is None else (convert(node.test),),
        )
    if isinstance(node, (jinja_nodes.Macro, jinja_nodes.CallBlock)):
        callee = (convert(node.call),) if isinstance(node, jinja_nodes.CallBlock) else ()
        return _Statement(
            keyword,
            callee + tuple(map(convert, node.defaults)),
            binds=(node.name,) if isinstance(node, jinja_nodes.Macro) else (),
            opens_block=True,
            block_locals=tuple(arg.name for arg in node.args) + _MACRO_LOCALS,
        )
    if isinstance(node, jinja_nodes.AssignBlock):
        filters = () if node.filter is None else (convert(node.filter),)
        return _Statement("set", filters, opens_block=True, binds_at_end=_stored_names(node.target))
    if isinstance(node, jinja_nodes.Import):
        return _Statement(keyword, (convert(node.template),), binds=(node.target,))
    if isinstance(node, jinja_nodes.FromImport):
        names = tuple(name if isinstance(name, str) else name[1] for name in node.names)
        return _Statement(keyword, (convert(node.template),), binds=names)
    # Everything else (set, with, filter, print, include, ...): targets bind, the rest is read.
    children = [child for child in node.iter_child_nodes() if isinstance(child, jinja_nodes.Expr)]
    targets = [child for child in children if _is_target(child)]
    names = tuple(chain.from_iterable(_stored_names(target) for target in targets))
    expressions = tuple(convert(child) for child in children if not _is_target(child))
    if opens_block:
        return _Statement(keyword, expressions, opens_block=True, block_locals=names)
    return _Statement(keyword, expressions, binds=names)


def _jinja_syntax_error(text: str) -> jinja2.TemplateSyntaxError | None:
    try:
        _ENV.parse(text)
    except jinja2.TemplateSyntaxError as error:
        return error
    except Exception as error:  # noqa: BLE001 - Jinja failing on absurd input is an error too
        return jinja2.TemplateSyntaxError(str(error) or type(error).__name__, None)
    return None


# Jinja parses and compiles nesting by recursion, so a deep template fails there with a
# RecursionError (or Python's own compiler refuses Jinja's output) where the LALR parse above
# copes. Every token that nests a node in Jinja's tree counts: brackets, signs and operators
# (a chain `a * b * c` nests left), filters, attributes (`a.b.c`), `not`, `and`/`or`, tests and
# inline `if`; and every block statement around the tag (Python refuses more than 20 nested
# loops). A template with a tag past either bound is compiled by Jinja itself, with fewer frames
# than a worker rendering it has left (Python's default limit is 1000). Counted per tag, not
# per template: ten thousand small tags in one string are no deeper than one.
_NESTING_TOKEN = re.compile(r"[(\[{.|*/%~+-]|\b(?:not|if|and|or|is|in)\b")
_NESTING_CHARS = "([{.|*/%~+-"
_NESTING_WORDS = ("not", "if", "and", "or", "is", "in")
_NESTING_SUSPECT = 40  # tokens in one tag before the template is worth asking Jinja about
_BLOCKS_SUSPECT = 6  # block statements open at once
_JINJA_FRAMES = 700


def _looks_deep(body: str) -> bool:
    """Whether one tag's body holds more nesting tokens than _NESTING_SUSPECT."""
    # Counting characters and words is far cheaper than the token search and never counts fewer
    # (each token holds one of them): nearly every tag stops here.
    bound = sum(map(body.count, _NESTING_CHARS)) + sum(map(body.count, _NESTING_WORDS))
    if bound <= _NESTING_SUSPECT:
        return False
    return any(count > _NESTING_SUSPECT for count, _ in enumerate(_NESTING_TOKEN.finditer(body), 1))


def _jinja_depth_error(text: str) -> jinja2.TemplateSyntaxError | None:
    import sys

    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(min(limit, depth + _JINJA_FRAMES))
    try:
        _ENV.compile(text)
    except RecursionError:
        return jinja2.TemplateSyntaxError(
            "template is nested too deeply: Jinja exceeds Python's recursion limit on it", None
        )
    except jinja2.TemplateSyntaxError as error:
        return error
    except Exception as error:  # noqa: BLE001 - Python's own compiler refusing Jinja's output
        return jinja2.TemplateSyntaxError(
            " ".join(str(error).split()) or type(error).__name__, None
        )
    finally:
        sys.setrecursionlimit(limit)
    return None


# ----------------------------------------------------------------------------- error offsets

_NEWLINE = re.compile(r"\r\n|\r|\n")  # Jinja's line breaks
# Jinja's `unexpected char {char!r} at {pos}`: the repr of one character, quoted either way.
_UNEXPECTED_CHAR = re.compile(r"""unexpected char (?:'[^']{1,12}+'|"[^"]{1,12}+") at (\d++)""")
_UNEXPECTED_BRACKET = re.compile(r"unexpected '([)\]}])'")


def _line_number(text: str, offset: int) -> int:
    return 1 + sum(1 for _ in _NEWLINE.finditer(text, 0, offset))


def _line_start(text: str, line: int) -> int:
    """Offset of the first non-blank character of 1-based `line`."""
    starts = [0] + [match.end() for match in _NEWLINE.finditer(text)]
    start = starts[min(max(line, 1), len(starts)) - 1]
    return re.compile(r"[ \t]*+").match(text, start).end()


def _error_offset(text: str, error: jinja2.TemplateSyntaxError, candidates: list[int]) -> int:
    """Where Jinja's error is: Jinja gives a line only, so pick the place on that line where the
    scan itself stumbled (the offending token), or else the start of the line."""
    if error.lineno is None:  # Jinja failed without saying where: trust the scan
        return candidates[0]
    message = error.message or ""
    # Jinja's lexer gives the position itself, counted in text with normalised line breaks.
    char = _UNEXPECTED_CHAR.fullmatch(message)
    if char is not None and "\r" not in text:
        return int(char.group(1))
    bracket = _UNEXPECTED_BRACKET.match(message)
    if bracket is not None:
        at_bracket = [offset for offset in candidates if text.startswith(bracket.group(1), offset)]
        candidates = at_bracket or candidates
    at_end = "end of template" in message
    for offset in candidates:
        if offset == len(text):
            # Jinja reports the end of the template on the line of the last token before it.
            if at_end or _line_number(text, len(text.rstrip())) == error.lineno:
                return offset
        elif _line_number(text, offset) == error.lineno:
            return offset
    return _line_start(text, error.lineno)


# ----------------------------------------------------------------------------- the scan


# Jinja reads the word after a bare test name as the test's argument: `x is a is b` is an error
# there, and `x is defined if y` / `x is none in y` are errors (or odd reads) where the grammar
# sees a conditional and a membership test. Tags like that are left to Jinja; the match ends where
# Jinja stumbles: at that `is`, or at the token after `if` / `in`.
_BARE_TEST_ARGUMENT = re.compile(
    r"\bis\s++(?:not\s++)?+[^\W\d]\w*+(?:\s*+\.\s*+\w++)*+\s++(?:(?=is\b)|(?:if|in)\b\s*+)"
)


@dataclass(slots=True)
class _Block:
    keyword: str
    middles: tuple[str, ...]  # tags that may still continue it (elif / else)
    scoped: bool  # pushed a scope of its own
    binds_at_end: tuple[str, ...]


_UNCHECKED = object()


@dataclass(slots=True)
class _Scan:
    """One pass over a template: parses tags in order, tracks scopes and block nesting."""

    text: str
    scopes: list[set[str]] = field(default_factory=lambda: [set()])
    blocks: list[_Block] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    filters: list[tuple[str, int]] = field(default_factory=list)
    tests: list[tuple[str, int]] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)
    # Offsets where the template looked broken to the scan: candidates for Jinja's error.
    problems: list[int] = field(default_factory=list)
    jinja_verdict: object = _UNCHECKED

    def run(self) -> TemplateScan:
        deep = False
        for tag in _split_tags(self.text):
            if tag.kind == "broken":
                self.problems.append(tag.body_start)
            else:
                self._tag(tag)
                deep = deep or (
                    len(self.blocks) > _BLOCKS_SUSPECT
                    or _looks_deep(self.text[tag.body_start : tag.body_end])
                )
        if self.blocks:
            self.problems.append(len(self.text))
        error = self._jinja_error() if self.problems else None
        if error is None and deep:
            error = _jinja_depth_error(self.text)
            if error is not None:
                self.problems.append(_TAG_OPEN.search(self.text).start())
        return TemplateScan(
            references=tuple(sorted(self.references, key=lambda reference: reference.offset)),
            filters=tuple(sorted(self.filters, key=lambda item: item[1])),
            tests=tuple(sorted(self.tests, key=lambda item: item[1])),
            error=None
            if error is None
            else TemplateSyntaxProblem(
                error.message or str(error), _error_offset(self.text, error, self.problems)
            ),
            unparsed=tuple(self.unparsed),
        )

    def _jinja_error(self) -> jinja2.TemplateSyntaxError | None:
        if self.jinja_verdict is _UNCHECKED:
            self.jinja_verdict = _jinja_syntax_error(self.text)
        return self.jinja_verdict

    def _tag(self, tag: _Tag) -> None:
        source = self.text[tag.body_start : tag.body_end]
        first_token = tag.body_start + len(source) - len(source.lstrip())
        tree, failed_at = _parse(tag.kind, source)
        quirk = _BARE_TEST_ARGUMENT.search(source)
        if quirk is not None and (failed_at is None or quirk.end() < failed_at):
            tree, failed_at = None, quirk.end()
        if tag.end < 0:
            # Jinja fails on the body's first bad token, or on what stopped the body (the end of
            # the text, or a bracket that does not match, which its lexer may meet first).
            if failed_at is not None and failed_at < len(source):
                self.problems.append(tag.body_start + failed_at)
            self.problems.append(tag.body_end)
            return
        if tree is None:
            self.problems.append(first_token if failed_at is None else tag.body_start + failed_at)
            if self._jinja_error() is not None:
                return
            # A gap in the grammar: analyse the tag from Jinja's AST instead.
            self.unparsed.append(source.strip())
            via_jinja = _expression_via_jinja if tag.kind == "expression" else _statement_via_jinja
            tree = via_jinja(source)
            if tree is None:
                return
        if tag.kind == "expression":
            self._read(tree, tag.body_start, False)
        else:
            self._statement(tree, tag.body_start, first_token)

    # -- statements: scopes and block nesting

    def _statement(self, statement: _Statement, base: int, keyword_offset: int) -> None:
        keyword = statement.keyword
        if keyword.startswith("end"):
            self._close(keyword[3:], keyword_offset)
            return
        if keyword in ("elif", "else") and not self._continue(keyword):
            self.problems.append(keyword_offset)
            return
        for expression in statement.expressions:
            self._read(expression, base, False)
        self.scopes[-1].update(statement.binds)
        if statement.opens_block:
            # `if` blocks share the enclosing scope: a `set` inside one is visible after it.
            scoped = keyword != "if"
            middles = _MIDDLE_TAGS.get(keyword, ())
            self.blocks.append(_Block(keyword, middles, scoped, statement.binds_at_end))
            if scoped:
                self.scopes.append(set(statement.block_locals))
            for expression in statement.block_expressions:
                self._read(expression, base, False)

    def _continue(self, keyword: str) -> bool:
        block = self.blocks[-1] if self.blocks else None
        if block is None or keyword not in block.middles:
            return False
        if keyword == "else":
            block.middles = ()
            if block.scoped:  # a for loop's else branch does not see the loop variables
                self.scopes[-1] = set()
        return True

    def _close(self, keyword: str, offset: int) -> None:
        if not self.blocks or self.blocks[-1].keyword != keyword:
            self.problems.append(offset)
            return
        block = self.blocks.pop()
        if block.scoped:
            self.scopes.pop()
        self.scopes[-1].update(block.binds_at_end)

    # -- expressions: references, filters, tests

    def _read(self, node: object, base: int, guarded: bool) -> None:
        kind = type(node)
        if kind is Name or kind is Attr or kind is Item:
            self._reference(node, base, guarded)
        elif kind is Filter or kind is Test:
            (self.filters if kind is Filter else self.tests).append((node.name, base + node.offset))
            if node.operand is not None:
                guards = _GUARD_FILTERS if kind is Filter else _GUARD_TESTS
                self._read(node.operand, base, node.name in guards)
            for arg in node.args:
                self._read(arg, base, False)
        elif kind is Call:
            # In `x.get('a')` the attribute names a method, not data: the reference is `x`.
            callee = node.obj
            self._read(callee.obj if type(callee) is Attr else callee, base, False)
            for arg in node.args:
                self._read(arg, base, False)
        elif kind is Group:
            for item in node.items:
                self._read(item, base, False)

    def _reference(self, node: object, base: int, guarded: bool) -> None:
        # Unwind `root.a[0][i].b` from the outside in; a dynamic subscript cuts the static path
        # (everything collected after it so far is dropped) and is itself read.
        path: list[str | int] = []
        dynamic = []
        while True:
            kind = type(node)
            if kind is Attr:
                path.append(node.key)
            elif kind is Item:
                key = node.key
                if type(key) is Const and type(key.value) in (str, int):
                    path.append(key.value)
                else:
                    path.clear()
                    dynamic.append(key)
            else:
                break
            node = node.obj
        if type(node) is Name:
            name = node.name
            if name not in BUILTIN_GLOBALS and not any(name in scope for scope in self.scopes):
                path.reverse()
                self.references.append(Reference(name, tuple(path), base + node.offset, guarded))
        else:  # the chain starts at a call, a literal, a parenthesised expression...
            self._read(node, base, False)
        for key in dynamic:
            self._read(key, base, False)


_NOT_TEMPLATED = TemplateScan((), (), (), None, ())


def scan_template(text: str) -> TemplateScan:
    """References, filters, tests and the syntax error (if any) of a templated string.

    Never raises. Memoised on the loaded string itself (check, then compile, ask for the same
    strings several times each), and by text: playbooks repeat the same templates a lot.
    """
    scan = getattr(text, "template_scan", None)
    if scan is None:
        scan = _scan_text(text)
        if type(text) is YStr:
            text.template_scan = scan
    return scan


@functools.lru_cache(maxsize=4096)
def _scan_text(text: str) -> TemplateScan:
    if not is_templated(text):
        return _NOT_TEMPLATED
    try:
        return _Scan(text).run()
    except RecursionError:  # absurdly deep nesting, for the scan as for Jinja itself
        problem = TemplateSyntaxProblem("template is nested too deeply", 0)
        return TemplateScan((), (), (), problem, ())


def _clear_scan_caches() -> None:
    _scan_text.cache_clear()
    _parse_with_grammar.cache_clear()


scan_template.cache_clear = _clear_scan_caches  # type: ignore[attr-defined]  # benches: cold scans


def template_tags(text: str) -> tuple[str, ...]:
    """The bodies of the `{{ }}` and `{% %}` tags of a template, in order (comments and raw
    blocks skipped; the scan stops at a tag that is not closed)."""
    tags = _split_tags(text)
    return tuple(text[tag.body_start : tag.body_end] for tag in tags if tag.kind != "broken")
