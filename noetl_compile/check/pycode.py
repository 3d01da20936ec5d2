"""C501: python `code` that does not compile; T305: code that looks up a stale result field.

The engine exec()s the code at module level (convention: assign `result`; v1 defines `def main`),
so we compile it the same way: a module-level `return` is a real error there. Code may itself be
a Jinja template that the engine renders first; each `{{ ... }}` is masked with text of the same
length (so line/column survive) and errors that can only come from the templating are dropped.

Code that compiles is also searched for key lookups of the fields postgres results no longer carry
(`r.get("command_0")`, `r["command_1"]`): the template rule T305 cannot see them, and such code
silently reads nothing.
"""

from __future__ import annotations

import ast
import base64
import binascii
import functools
import re
import warnings
from typing import Any

from ..analyze.expressions import scan_template
from ..python_surface import has_top_level_return
from .context import CheckContext
from .templates import STALE_DIALECTS, STALE_FIELDS

_TEMPLATE_OPEN = re.compile(r"\{([{%#])")
_TEMPLATE_CLOSE = {"{": "}}", "%": "%}", "#": "#}"}
# Maskings tried in turn: a name, a number, an empty tuple. One of them fits where the rendered
# value goes in nearly all real code (`x = {{ n }}`, `f({{ a }})`, `'{{ s }}'`, `1{{ zeros }}`).
_MASKS = (
    lambda n: "_" * n,
    lambda n: "0" * n,
    lambda n: "(" + " " * (n - 2) + ")" if n >= 2 else "_" * n,
)


_CODE_KEYS = ("code", "code_b64", "script")
_FUNCTION_HEAD = "def _noetl_main(input_data, args):\n"


def check_task_code(ctx: CheckContext, config: Any, label: str, step_raw: Any = None) -> None:
    """Compile `code` (or the decoded `code_b64`) of one python tool mapping; ``step_raw`` is
    the step whose own tool this is."""
    if not isinstance(config, dict):
        return
    # Code inside the tool's `spec` or on the step is C513's finding: where it sits.
    misplaced = any(
        isinstance(holder, dict) and any(k in holder for k in _CODE_KEYS)
        for holder in (config.get("spec"), step_raw)
    )
    if not misplaced and all(config.get(k) is None for k in _CODE_KEYS):
        where = "code" if "code" in config else "code_b64" if "code_b64" in config else None
        ctx.report(
            "C501",
            ctx.key_pos(config, where) if where else ctx.pos(config),
            f"the python tool of {label} has no code (`code`, `code_b64` or `script`): "
            "the engine fails the step every time",
        )
        return
    code = config.get("code")
    if isinstance(code, str) and code.strip():
        if scan_template(code).error is None:  # a broken template is reported once, as T301
            _check(ctx, code, code, label)
        return
    encoded = config.get("code_b64")
    if isinstance(encoded, str) and encoded.strip() and "{{" not in encoded:
        try:
            decoded = base64.b64decode(encoded, validate=False).decode("utf-8")
        except (binascii.Error, ValueError):
            ctx.report(
                "C501",
                ctx.pos(config, "code_b64"),
                f"`code_b64` of {label} is not valid base64 UTF-8 text",
            )
            return
        _check(ctx, decoded, None, label, anchor=ctx.pos(config, "code_b64"))


def _check(ctx: CheckContext, code: str, yaml_value: Any, label: str, anchor=None) -> None:
    # NoETL 5 wraps code with a top-level `return` in a function of `input_data` and `args`,
    # deciding by its own line rule (python_surface): the check decides the same way.
    noetl5 = ctx.playbook.generation == "noetl5"
    error = compile_error(code, as_function=noetl5 and has_top_level_return(code))
    if error is None:
        _check_stale_reads(ctx, code, yaml_value, label, anchor)
        return
    line, column, message = error
    offset = _offset_of(code, line, column)
    position = ctx.position_in_string(yaml_value, offset) if yaml_value is not None else anchor
    where = "of the block" if yaml_value is not None else "of the decoded `code_b64`"
    ctx.report(
        "C501",
        position,
        f"python code of {label} does not compile: {message} (line {line} {where})",
        hint=_return_hint(noetl5) if "'return' outside function" in message else None,
    )


def _return_hint(noetl5: bool) -> str:
    if noetl5:
        return (
            "NoETL 5 runs the code as a function body only when an unindented `return` comes "
            "before any top-level def/class: end the code with `return ...` at column 0, or "
            "assign `result = ...`"
        )
    return "the engine runs the code at module level: assign `result = ...` instead of `return`"


def _check_stale_reads(ctx: CheckContext, code: str, yaml_value: Any, label: str, anchor) -> None:
    if ctx.playbook.dialect not in STALE_DIALECTS:
        return  # a case-v2 postgres result holds command_N (templates.STALE_DIALECTS)
    for line, column, field in stale_reads(code):
        if yaml_value is not None:
            position = ctx.position_in_string(yaml_value, _offset_of(code, line, column))
        else:
            position = anchor
        ctx.report(
            "T305",
            position,
            f"python code of {label} looks up `{field}` of a result: no tool produces it any "
            "more (postgres returns the last statement's `rows` / `row_count`)",
        )


# A string constant equal to a stale field (`command_0`) is spelled out in the source, or built
# with an escape (`\x63`, a line continuation), or by implicit concatenation of literals: a first
# piece opening with `c`, a last one closing on the digit, and only blanks or comments between
# two literals (`'comm' 'and_0'`). Each search is linear: no pattern can backtrack far.
_ESCAPE = re.compile(r"\\[xuUN0-7\r\n]")
_ADJACENT_LITERALS = re.compile(r"""["']\s*(?:#|[rRbBuUfF]{0,2}["'])""")  # `#`: a comment between
_FIRST_PIECE = re.compile(r"""["']c""")
_LAST_PIECE = re.compile(r"""[0-3]["']""")


def _may_hold_stale_key(source: str) -> bool:
    """False when no string constant of ``source`` can equal a stale field. The maskings differ
    only in what stands for a `{{ }}`: at least 4 characters, no quote or backslash, never part
    of a field's spelling; so one masked text answers for all of them."""
    if any(field in source for field in STALE_FIELDS) or _ESCAPE.search(source):
        return True
    return bool(
        _FIRST_PIECE.search(source)
        and _LAST_PIECE.search(source)
        and _ADJACENT_LITERALS.search(source)
    )


@functools.lru_cache(maxsize=2048)
def stale_reads(code: str) -> tuple[tuple[int, int, str], ...]:
    """(line, column, field) of every `x.get("command_N")` / `x["command_N"]` in ``code``
    (1-based; the code must compile once its Jinja parts are masked)."""
    regions = _template_regions(code)
    if not _may_hold_stale_key(_masked(code, regions, _MASKS[0])):
        return ()  # parsing and walking every block cost more than all other code checks
    tree = None
    for mask in _MASKS if regions else _MASKS[:1]:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(_masked(code, regions, mask))
            break
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    if tree is None:
        return ()
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            key = node.args[0]
        if isinstance(key, ast.Constant) and key.value in STALE_FIELDS:
            found.append((key.lineno, key.col_offset + 1, key.value))
    return tuple(sorted(found))


@functools.lru_cache(maxsize=2048)  # the same code block recurs across steps and files
def compile_error(code: str, *, as_function: bool = False) -> tuple[int, int, str] | None:
    """(line, column, message) of the first syntax error, both 1-based; None when it compiles
    or when the error is only an artefact of masking the Jinja parts. ``as_function``: compiled
    as the body of a function taking `input_data` and `args`, as NoETL 5's python tool runs it
    (a top-level `return` is its result)."""
    regions = _template_regions(code)
    first_error: SyntaxError | None = None
    for mask in _MASKS if regions else _MASKS[:1]:
        source = _masked(code, regions, mask)
        if as_function:  # one line and one column more: taken back below
            source = _FUNCTION_HEAD + "\n".join(" " + line for line in source.split("\n"))
        try:
            with warnings.catch_warnings():  # user code: SyntaxWarnings are not ours to print
                warnings.simplefilter("ignore")
                compile(source, "<code>", "exec")
            return None
        except SyntaxError as exc:
            first_error = first_error or exc
        except ValueError as exc:  # NUL bytes in the source
            return 1, 1, str(exc)
        except (RecursionError, MemoryError) as exc:
            # Nesting past the parser's stack or the compiler's recursion limit: the worker's own
            # compile() fails the same way, so this is an error. Python names no line; such
            # nesting takes a long line, so point at the longest.
            lines = code.split("\n")
            longest = max(range(len(lines)), key=lambda index: len(lines[index]))
            indent = len(lines[longest]) - len(lines[longest].lstrip())
            kind = type(exc).__name__
            message = f"nested too deeply for Python's parser or compiler ({kind})"
            return longest + 1, indent + 1, message
    assert first_error is not None
    line = max((first_error.lineno or 1) - as_function, 1)
    column = max((first_error.offset or 1) - as_function, 1)
    if _caused_by_template(code, regions, line, column):
        return None
    text = code.split("\n")[line - 1] if line <= code.count("\n") + 1 else ""
    indent = len(text) - len(text.lstrip())
    if column <= indent:  # indentation errors point into the blanks; show the statement
        column = indent + 1
    return line, column, first_error.msg


def _template_regions(code: str) -> list[tuple[int, int]]:
    """Spans of `{{ }}`, `{% %}` and `{# #}` (shortest match each). Linear: a lazy regex would
    rescan to the end of the text for every opening that never closes."""
    regions: list[tuple[int, int]] = []
    unclosed: set[str] = set()  # kinds with no closing mark after some point: none later either
    position = 0
    while (opening := _TEMPLATE_OPEN.search(code, position)) is not None:
        kind = opening.group(1)
        close = -1 if kind in unclosed else code.find(_TEMPLATE_CLOSE[kind], opening.end())
        if close < 0:
            unclosed.add(kind)
            position = opening.start() + 1
            continue
        regions.append((opening.start(), close + 2))
        position = close + 2
    return regions


def _masked(code: str, regions: list[tuple[int, int]], mask) -> str:
    parts, last = [], 0
    for start, end in regions:
        parts.append(code[last:start])
        text = code[start:end]
        if text.startswith("{{") and "\n" not in text:
            parts.append(mask(end - start))
        else:  # statements, comments and multi-line expressions: blank them, keep the newlines
            parts.append(re.sub(r"[^\n]", " ", text))
        last = end
    parts.append(code[last:])
    return "".join(parts)


def _caused_by_template(code: str, regions: list[tuple[int, int]], line: int, column: int) -> bool:
    """Does the error sit on (or right after) a template, or on a line holding a `{% %}` block?"""
    offset = _offset_of(code, line, column)
    line_start = _offset_of(code, line, 1)
    line_end = code.find("\n", line_start)
    line_end = len(code) if line_end < 0 else line_end
    for start, end in regions:
        if start - 1 <= offset <= end + 1:
            return True
        overlaps_line = start <= line_end and end >= line_start
        if overlaps_line and not code.startswith("{{", start):
            return True
        if overlaps_line and "\n" in code[start:end]:
            return True
    return False


def _offset_of(code: str, line: int, column: int) -> int:
    """Character offset of a 1-based line/column inside ``code`` (clamped to the text)."""
    lines = code.split("\n")
    line = min(max(line, 1), len(lines))
    start = sum(len(text) + 1 for text in lines[: line - 1])
    return min(start + min(max(column - 1, 0), len(lines[line - 1])), len(code))


# What a python call's result is when it is not a mapping, written as a literal: a list, tuple,
# set or comprehension of one, text, a number, a boolean (None is D924's concern, not this).
_NON_MAPPING_NODES = (ast.List, ast.Tuple, ast.Set, ast.ListComp, ast.SetComp, ast.JoinedStr)


def non_mapping_result(code: str) -> int | None:
    """Offset of the first statement that makes a python call's result a list or a scalar
    literal, read as dc55c492's python tool takes the result: the return value of a top-level
    ``main`` where the code defines one (only ``main``'s own returns: a nested helper's return
    is not the result), else the module-level ``result`` variable. None when no such statement
    exists or the code does not parse (C501 says why)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    main = next(
        (
            node
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "main"
        ),
        None,
    )
    for node in _own_statements(main.body if main is not None else tree.body):
        if (
            main is not None
            and isinstance(node, ast.Return)
            or main is None
            and isinstance(node, ast.Assign)
            and _assigns_result(node)
        ):
            value = node.value
        else:
            continue
        if value is not None and _non_mapping_literal(value):
            line = code.split("\n")[node.lineno - 1]
            column = len(line.encode("utf-8")[: node.col_offset].decode("utf-8", "ignore"))
            return _offset_of(code, node.lineno, column + 1)
    return None


def _own_statements(body: list[ast.stmt]):
    """The statements of a body and of the blocks inside it (if, for, while, with, try, match),
    in source order, not those of a function or class defined in it (their scope is another)."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield node
        inner: list[ast.stmt] = []
        for field in ("body", "orelse", "finalbody"):
            inner.extend(getattr(node, field, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            inner.extend(handler.body)
        for case in getattr(node, "cases", None) or []:
            inner.extend(case.body)
        inner.sort(key=lambda s: (s.lineno, s.col_offset))
        stack.extend(reversed(inner))


def _assigns_result(node: ast.Assign) -> bool:
    return any(isinstance(target, ast.Name) and target.id == "result" for target in node.targets)


def _non_mapping_literal(value: ast.expr) -> bool:
    if isinstance(value, ast.Set) and any(isinstance(e, (ast.Set, ast.Dict)) for e in value.elts):
        return False  # `{{ x }}`: a template the engine renders first; its value is not known
    if isinstance(value, _NON_MAPPING_NODES):
        return True
    if isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Constant):
        return True
    return isinstance(value, ast.Constant) and value.value is not None and value.value is not ...
