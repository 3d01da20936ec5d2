"""One tag body of a template -> the small tree the analysis reads (``expressions.py``).

The LALR grammar `grammar/jinja_expr.lark` parses each `{{ }}` or `{% %}` body; Lark's
callbacks (``_Builder``) build the tree during the parse. A bare dotted name, three tags in
four, skips the parser. Jinja is not consulted here: a body the grammar refuses comes back with
the offset where it failed, and ``template_jinja.py`` decides what that means.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from itertools import chain
from pathlib import Path
from typing import NamedTuple

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, UnexpectedToken

_CONSTANTS = {
    "true": True,
    "True": True,
    "false": False,
    "False": False,
    "none": None,
    "None": None,
}
# Names a macro body (and a call block's body, which is a macro) gets implicitly.
MACRO_LOCALS = ("varargs", "kwargs", "caller")


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
class Statement:
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
    return defaults, tuple(name for name, _ in params) + MACRO_LOCALS


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
        return Statement("if", (test,), opens_block=True)

    def elif_stmt(self, test):
        return Statement("elif", (test,))

    def else_stmt(self):
        return Statement("else")

    def for_stmt(self, names, iterable, *loop_filter):
        return Statement(
            "for",
            (iterable,),
            opens_block=True,
            block_locals=names + ("loop",),
            block_expressions=loop_filter,
        )

    def set_stmt(self, targets, value):
        names, namespaces = _names_and_namespaces(targets)
        return Statement("set", namespaces + (value,), binds=names)

    def set_block_stmt(self, targets, *filters):
        names, namespaces = _names_and_namespaces(targets)
        return Statement(
            "set", namespaces + _chain_filters(filters), opens_block=True, binds_at_end=names
        )

    def macro_stmt(self, name, params=()):
        defaults, names = _signature(params)
        return Statement(
            "macro", defaults, binds=(name.value,), opens_block=True, block_locals=names
        )

    def call_stmt(self, *parts):
        params, callee = (parts[0] if len(parts) == 2 else ()), parts[-1]
        defaults, names = _signature(params)
        return Statement("call", (callee,) + defaults, opens_block=True, block_locals=names)

    def filter_stmt(self, *filters):
        return Statement("filter", _chain_filters(filters), opens_block=True)

    def with_stmt(self, *assignments):
        names = tuple(chain.from_iterable(names for names, _ in assignments))
        return Statement(
            "with", tuple(value for _, value in assignments), opens_block=True, block_locals=names
        )

    def end_stmt(self, token):
        return Statement(token.value)


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


def parse_tag(kind: str, source: str) -> tuple[object | None, int | None]:
    """(tree, None), or (None, offset in `source` where the parse failed, None if unknown)."""
    if kind == "expression" and (dotted := _DOTTED_NAME.fullmatch(source)) is not None:
        root = dotted.group(1)
        node = Const(_CONSTANTS[root]) if root in _CONSTANTS else Name(root, dotted.start(1))
        for attribute in dotted.group(2).split(".")[1:]:
            node = Attr(node, attribute)
        return node, None
    return parse_with_grammar(kind, source)


# Tags recur across the steps and files of a run (`{{ x | tojson }}`); trees are immutable and
# their offsets are relative to the tag body, so one parse serves every occurrence.
@functools.lru_cache(maxsize=4096)
def parse_with_grammar(kind: str, source: str) -> tuple[object | None, int | None]:
    try:
        return _PARSER.parse(source, start=kind), None
    except UnexpectedToken as failure:
        return None, len(source) if failure.token.type == "$END" else failure.token.start_pos
    except UnexpectedInput as failure:  # an unexpected character, or the end of the input
        position = failure.pos_in_stream
        return None, position if position is not None and position >= 0 else len(source)
    except _Rejected as failure:
        return None, failure.offset
