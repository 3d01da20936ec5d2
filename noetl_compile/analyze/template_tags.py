"""The `{{ }}` and `{% %}` tags of a template: a small scanner that mirrors Jinja's lexer where
it matters (string literals, bracket balancing, whitespace-control marks, comments, raw blocks)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple


class Tag(NamedTuple):
    kind: str  # "expression" or "statement" (the grammar's start symbols), or "broken"
    body_start: int
    body_end: int
    end: int  # after the closing mark; -1 when the tag is not closed


TAG_OPEN = re.compile(r"\{([{%#])[-+]?")
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


def split_tags(text: str) -> Iterator[Tag]:
    """The `{{ }}` and `{% %}` tags of a template, skipping comments and raw blocks.

    Stops after a tag that is not closed (the text ends inside it, or a bracket in it does not
    match: then its body ends at that bracket) and after an unclosed comment or raw block (a
    "broken" tag with an empty body): like Jinja's lexer, nothing after that can be trusted.
    """
    position = 0
    while (opening := TAG_OPEN.search(text, position)) is not None:
        start = opening.start()
        if opening.group(1) == "#":
            close = text.find("#}", opening.end())
            if close < 0:
                yield Tag("broken", start, start, -1)
                return
            position = close + 2
            continue
        if opening.group(1) == "%" and (raw := _RAW_OPEN.match(text, start)) is not None:
            close = _RAW_CLOSE.search(text, raw.end())
            if close is None:
                yield Tag("broken", start, start, -1)
                return
            position = close.end()
            continue
        kind = "expression" if opening.group(1) == "{" else "statement"
        tag = _scan_tag(kind, text, opening.end())
        yield tag
        if tag.end < 0:
            return
        position = tag.end


def _scan_tag(kind: str, text: str, body_start: int) -> Tag:
    # As in Jinja, a closing mark only counts where brackets are balanced: `{{ {'a': 1}}}`.
    close_mark = _CLOSE[kind]
    expected: list[str] = []
    position = body_start
    while True:
        if not expected and (close := close_mark.match(text, position)) is not None:
            return Tag(kind, body_start, position, close.end())
        step = _TAG_CONTENT.match(text, position)
        if step is None:
            return Tag(kind, body_start, len(text), -1)
        char = text[position]
        if char in _CLOSING_BRACKET:
            expected.append(_CLOSING_BRACKET[char])
        elif char in ")]}" and (not expected or expected.pop() != char):
            return Tag(kind, body_start, position, -1)
        position = step.end()


# Statements that load another template: the runtime (like NoETL's engine) renders playbook
# strings in an environment without a loader, so each of them fails every time it renders.
LOADER_STATEMENTS = frozenset({"include", "extends", "import", "from"})
_STATEMENT_KEYWORD = re.compile(r"\s*+(\w+)")


def loader_statements(text: str) -> tuple[tuple[str, int], ...]:
    """(keyword, offset of the keyword) of every `include`/`extends`/`import`/`from` tag."""
    found = []
    for tag in split_tags(text):
        if tag.kind != "statement":
            continue
        keyword = _STATEMENT_KEYWORD.match(text, tag.body_start, tag.body_end)
        if keyword is not None and keyword.group(1) in LOADER_STATEMENTS:
            found.append((keyword.group(1), keyword.start(1)))
    return tuple(found)


def template_tags(text: str) -> tuple[str, ...]:
    """The bodies of the `{{ }}` and `{% %}` tags of a template, in order (comments and raw
    blocks skipped; the scan stops at a tag that is not closed)."""
    tags = split_tags(text)
    return tuple(text[tag.body_start : tag.body_end] for tag in tags if tag.kind != "broken")
