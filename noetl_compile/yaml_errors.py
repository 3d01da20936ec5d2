"""What YAML text is refused before it is built, and where a parser's error is (Y001).

Refused before composing: characters YAML forbids, and nesting deep enough to overflow libyaml's
recursive composer (scanned event by event where the text could hold it). A composer error is
reported at the construct left open (a quote, a bracket) rather than where the parser gave up.
"""

from __future__ import annotations

import functools
import re

import yaml

from .diagnostics import Diagnostic, Position, Severity

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# No playbook nests anywhere near this deep; below it every recursive stage is safe.
MAX_DEPTH = 100
# libyaml composes recursively in C and overflows the C stack (SIGSEGV) somewhere past 20,000
# levels. Nesting depth cannot exceed the bracket count plus the longest line, so only texts
# where that bound is high are scanned event by event (the parser itself is not recursive).
_COMPOSE_SAFE_BOUND = 4000
# Characters YAML forbids in a stream (YAML 1.1 c-printable); libyaml reports them as an offset.
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")


def one_line(text: str) -> str:
    return " ".join(text.split())


def _position(text: str, index: int) -> Position:
    line = text.count("\n", 0, index) + 1
    return Position(line, index - (text.rfind("\n", 0, index) + 1) + 1)


# The printable ASCII characters plus tab, LF and CR: the ASCII characters YAML allows.
_ALLOWED_ASCII = bytes(range(0x20, 0x7F)) + b"\t\n\r"


def forbidden_character(path: str, text: str) -> Diagnostic | None:
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
    if LOADER is yaml.SafeLoader:
        return True  # the pure-Python composer: RecursionError, which load_text reports
    try:
        for _ in yaml.parse("[" * 1001 + "]" * 1001, Loader=LOADER):
            pass
    except yaml.YAMLError as error:
        return libyaml_nesting_limit(error)
    return False


def too_deep_for_composer(path: str, text: str) -> Diagnostic | None:
    """Y001 where nesting passes MAX_DEPTH, for texts where libyaml's composer might overflow."""
    if _libyaml_limits_nesting():
        return None  # compose stops first; load_text then finds the depth with too_deep_pure
    brackets = text.count("[") + text.count("{")
    if brackets + len(text) < _COMPOSE_SAFE_BOUND:
        return None  # no line is longer than the text: skip splitting it
    if brackets + max(map(len, text.splitlines()), default=0) < _COMPOSE_SAFE_BOUND:
        return None  # shallow enough for the composer; the builder checks MAX_DEPTH itself
    try:
        return _first_too_deep(path, text, LOADER)
    except yaml.YAMLError as error:
        if not libyaml_nesting_limit(error):
            return None  # compose reports the syntax error with its own position
    return too_deep_pure(path, text)


def libyaml_nesting_limit(error: yaml.YAMLError) -> bool:
    # libyaml >= 0.2.6 (in PyYAML 6.0.4's wheels) has a nesting limit of its own (1000 levels), and
    # its scanner's look-ahead can trip it before the parser hands over event MAX_DEPTH + 1.
    return "maximum nesting depth" in str(error)


def too_deep_pure(path: str, text: str) -> Diagnostic | None:
    """The depth check with PyYAML's pure-Python parser: no limit and no recursion, so the
    diagnostic and its position are the same whatever libyaml is installed. A syntax error
    before the first level too deep is reported instead: it is the first mistake in the text
    (libyaml's look-ahead can trip its limit before its parser reaches that error)."""
    try:
        return _first_too_deep(path, text, yaml.SafeLoader)
    except yaml.YAMLError as error:
        return yaml_error(path, error, text)


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


def yaml_error(path: str, exc: yaml.YAMLError, text: str) -> Diagnostic:
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
    message = one_line(f"{context}, {problem}" if context else str(problem))
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
