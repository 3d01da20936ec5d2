"""Variable references, filters and tests in the Jinja templates of playbook strings.

A template is split into tags by a small scanner that mirrors Jinja's lexer where it matters
(string literals, bracket balancing, whitespace-control marks, comments, raw blocks). Each tag
body is parsed with the LALR grammar `grammar/jinja_expr.lark`, and the statements are replayed
in order to tell free names from locals (set, for targets, macro parameters, `loop`).

The parser is ``template_parse.py``, the tag scanner ``template_tags.py``, what Jinja is asked
``template_jinja.py``; this module replays the tags and holds the results.

Jinja stays the authority on syntax but is only consulted when this fast path meets something it
cannot parse: then Jinja's verdict tells a real syntax error (reported with Jinja's message and
the offset of the offending token) from a gap in the grammar (then that tag is analysed from
Jinja's own AST and listed in `unparsed`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import jinja2

from ..load import YStr
from .template_jinja import (
    BLOCKS_SUSPECT,
    error_offset,
    expression_via_jinja,
    jinja_depth_error,
    jinja_syntax_error,
    looks_deep,
    statement_via_jinja,
)
from .template_parse import (
    Attr,
    Call,
    Const,
    Filter,
    Group,
    Item,
    Name,
    Statement,
    Test,
    parse_tag,
    parse_with_grammar,
)
from .template_tags import (
    LOADER_STATEMENTS,
    TAG_OPEN,
    Tag,
    loader_statements,
    split_tags,
    template_tags,
)

__all__ = [
    "BUILTIN_GLOBALS",
    "LOADER_STATEMENTS",
    "Reference",
    "TemplateScan",
    "TemplateSyntaxProblem",
    "is_templated",
    "loader_statements",
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
# Tags that may continue an open block, before its end tag.
_MIDDLE_TAGS = {"if": ("elif", "else"), "for": ("else",)}


def is_templated(text: str) -> bool:
    """Jinja would read this string as a template (a comment alone counts: `{#` must close)."""
    return "{{" in text or "{%" in text or "{#" in text


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
        for tag in split_tags(self.text):
            if tag.kind == "broken":
                self.problems.append(tag.body_start)
            else:
                self._tag(tag)
                deep = deep or (
                    len(self.blocks) > BLOCKS_SUSPECT
                    or looks_deep(self.text[tag.body_start : tag.body_end])
                )
        if self.blocks:
            self.problems.append(len(self.text))
        error = self._jinja_error() if self.problems else None
        if error is None and deep:
            error = jinja_depth_error(self.text)
            if error is not None:
                self.problems.append(TAG_OPEN.search(self.text).start())
        return TemplateScan(
            references=tuple(sorted(self.references, key=lambda reference: reference.offset)),
            filters=tuple(sorted(self.filters, key=lambda item: item[1])),
            tests=tuple(sorted(self.tests, key=lambda item: item[1])),
            error=None
            if error is None
            else TemplateSyntaxProblem(
                error.message or str(error), error_offset(self.text, error, self.problems)
            ),
            unparsed=tuple(self.unparsed),
        )

    def _jinja_error(self) -> jinja2.TemplateSyntaxError | None:
        if self.jinja_verdict is _UNCHECKED:
            self.jinja_verdict = jinja_syntax_error(self.text)
        return self.jinja_verdict

    def _tag(self, tag: Tag) -> None:
        source = self.text[tag.body_start : tag.body_end]
        first_token = tag.body_start + len(source) - len(source.lstrip())
        tree, failed_at = parse_tag(tag.kind, source)
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
            via_jinja = expression_via_jinja if tag.kind == "expression" else statement_via_jinja
            tree = via_jinja(source)
            if tree is None:
                return
        if tag.kind == "expression":
            self._read(tree, tag.body_start, False)
        else:
            self._statement(tree, tag.body_start, first_token)

    # -- statements: scopes and block nesting

    def _statement(self, statement: Statement, base: int, keyword_offset: int) -> None:
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
    parse_with_grammar.cache_clear()


scan_template.cache_clear = _clear_scan_caches  # type: ignore[attr-defined]  # benches: cold scans
