"""Jinja, consulted only where the grammar stops (``expressions.py``): its verdict on a template's
syntax, its AST of a tag the grammar cannot read (as the tree ``template_parse.py`` builds), the
depth check for templates Jinja would fail on by recursion, and the offset of Jinja's error."""

from __future__ import annotations

import re
from itertools import chain

import jinja2
from jinja2 import nodes as jinja_nodes

from .template_parse import (
    MACRO_LOCALS,
    Attr,
    Call,
    Const,
    Filter,
    Group,
    Item,
    Name,
    Statement,
    Test,
)

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


def expression_via_jinja(source: str) -> object | None:
    template = _jinja_template("{{ " + source + " }}")
    return None if template is None else _from_jinja(template.body[0].nodes[0], _Locator(source))


_KEYWORD = re.compile(r"\s*+(\w*+)")


def statement_via_jinja(source: str) -> Statement | None:
    keyword = _KEYWORD.match(source).group(1)
    if keyword.startswith("end"):
        return Statement(keyword)
    if keyword == "elif":
        test = expression_via_jinja(source[source.index("elif") + 4 :])
        return None if test is None else Statement("elif", (test,))
    # Jinja parses whole templates only: try the statement alone, then as a block.
    for suffix, opens_block in (("", False), (f"{{% end{keyword} %}}", True)):
        template = _jinja_template("{% " + source + " %}" + suffix)
        if template is not None:
            return _statement_from_jinja(keyword, template.body[0], opens_block, _Locator(source))
    return None


def _statement_from_jinja(
    keyword: str, node: jinja_nodes.Node, opens_block: bool, locate: _Locator
) -> Statement:
    def convert(child):
        return _from_jinja(child, locate)

    if isinstance(node, jinja_nodes.For):
        return Statement(
            "for",
            (convert(node.iter),),
            opens_block=True,
            block_locals=_stored_names(node.target) + ("loop",),
            block_expressions=() if node.test is None else (convert(node.test),),
        )
    if isinstance(node, (jinja_nodes.Macro, jinja_nodes.CallBlock)):
        callee = (convert(node.call),) if isinstance(node, jinja_nodes.CallBlock) else ()
        return Statement(
            keyword,
            callee + tuple(map(convert, node.defaults)),
            binds=(node.name,) if isinstance(node, jinja_nodes.Macro) else (),
            opens_block=True,
            block_locals=tuple(arg.name for arg in node.args) + MACRO_LOCALS,
        )
    if isinstance(node, jinja_nodes.AssignBlock):
        filters = () if node.filter is None else (convert(node.filter),)
        return Statement("set", filters, opens_block=True, binds_at_end=_stored_names(node.target))
    if isinstance(node, jinja_nodes.Import):
        return Statement(keyword, (convert(node.template),), binds=(node.target,))
    if isinstance(node, jinja_nodes.FromImport):
        names = tuple(name if isinstance(name, str) else name[1] for name in node.names)
        return Statement(keyword, (convert(node.template),), binds=names)
    # Everything else (set, with, filter, print, include, ...): targets bind, the rest is read.
    children = [child for child in node.iter_child_nodes() if isinstance(child, jinja_nodes.Expr)]
    targets = [child for child in children if _is_target(child)]
    names = tuple(chain.from_iterable(_stored_names(target) for target in targets))
    expressions = tuple(convert(child) for child in children if not _is_target(child))
    if opens_block:
        return Statement(keyword, expressions, opens_block=True, block_locals=names)
    return Statement(keyword, expressions, binds=names)


def jinja_syntax_error(text: str) -> jinja2.TemplateSyntaxError | None:
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
BLOCKS_SUSPECT = 6  # block statements open at once
_JINJA_FRAMES = 700


def looks_deep(body: str) -> bool:
    """Whether one tag's body holds more nesting tokens than _NESTING_SUSPECT."""
    # Counting characters and words is far cheaper than the token search and never counts fewer
    # (each token holds one of them): nearly every tag stops here.
    bound = sum(map(body.count, _NESTING_CHARS)) + sum(map(body.count, _NESTING_WORDS))
    if bound <= _NESTING_SUSPECT:
        return False
    return any(count > _NESTING_SUSPECT for count, _ in enumerate(_NESTING_TOKEN.finditer(body), 1))


def jinja_depth_error(text: str) -> jinja2.TemplateSyntaxError | None:
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


def error_offset(text: str, error: jinja2.TemplateSyntaxError, candidates: list[int]) -> int:
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
