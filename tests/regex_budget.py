"""Every regular expression of noetl_compile and airflow_plugin, and adversarial inputs for each.

Patterns are found two ways, so a new one is covered without being listed: every compiled
pattern reachable from a module's globals (also inside tuples, lists, dicts and sets), and every
``re.<function>("literal", ...)`` call in the source (compiled here from its literal). A call whose
pattern is not a literal (built at run time) must be named in ``DYNAMIC`` with the test that
covers it; an unnamed one fails the budget test.

Inputs are built from each pattern's own parse tree, the classic way to find super-linear
backtracking: for every repetition in the pattern, a prefix that reaches it, its body pumped to
``LENGTH`` characters, then a character that makes the rest fail; the same unit repeated end to
end (many near matches); and plain runs of every character the pattern mentions.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import sys
from pathlib import Path
from re import _constants as C
from re import _parser

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("noetl_compile", "airflow_plugin")
LENGTH = 100_000

# Modules that run when imported (alembic's env, `python -m` entry points).
SCRIPTS = ("env", "__main__")

# Sites that compile a pattern built at run time: (path, function) -> the test that bounds it.
DYNAMIC = {
    # `(?<![\w.])` + re.escape(word) + `(?!\w)`: a literal between two one-character looks.
    ("noetl_compile/analyze/template_jinja.py", "__call__"): "literal word",
    # `^\s*dag_id="` + re.escape(dag_id) + `"`, MULTILINE: a literal after a line's indentation.
    ("airflow_plugin/runtime/catalog.py", "_file_for"): "literal dag id",
    # fnmatch's translation of one `[...]`: a one-character class.
    ("noetl_compile/discover.py", "_glob_tokens"): "test_gitignore_globs_are_linear",
    # `^` + a route's literal regex + `$`: the demo HTTP API's own routes (literal paths, at most
    # a `[^/]+` segment or an alternation of words), fullmatched against one request path.
    ("airflow_plugin/local/demo/http_core.py", "route"): "literal route paths",
    # re.escape(`step.command_0`) + `(?![\w])`: a literal and a one-character look-ahead.
    ("noetl_compile/upgrade/__init__.py", "upgrade_text"): "literal read",
    # re.escape(loop) + `_results\s*\|\s*map\(\s*attribute\s*=\s*(['"])` + re.escape(body)
    # + `\1\s*\)`: literals between single whitespace runs, none overlapping the next literal.
    ("noetl_compile/upgrade/v1_loop.py", "_results_of"): "literal loop results read",
}


def _walk(value, seen, out, where):
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, re.Pattern):
        if isinstance(value.pattern, str):
            out.setdefault((value.pattern, value.flags), where)
    elif isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            _walk(item, seen, out, where)
    elif isinstance(value, dict):
        for item in value.values():
            _walk(item, seen, out, where)


def module_names() -> list[str]:
    names = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        names.append(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            names.append(info.name)
    return sorted(names)


def source_calls() -> tuple[dict, list]:
    """{(pattern, flags): where} of literal calls, and [(path, function, line)] of dynamic ones."""
    found, dynamic = {}, []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            relative = path.relative_to(ROOT).as_posix()
            functions = {}
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for inner in ast.walk(node):
                        functions.setdefault(id(inner), node.name)
            for node in ast.walk(tree):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re"
                    and node.func.attr
                    in (
                        "compile",
                        "search",
                        "match",
                        "fullmatch",
                        "sub",
                        "subn",
                        "findall",
                        "finditer",
                        "split",
                    )
                    and node.args
                ):
                    continue
                try:
                    pattern = ast.literal_eval(node.args[0])
                except ValueError:
                    pattern = _folded(node.args[0])
                if not isinstance(pattern, str):
                    dynamic.append((relative, functions.get(id(node), "<module>"), node.lineno))
                    continue
                flags = 0
                flag_node = None
                if node.func.attr == "compile" and len(node.args) > 1:
                    flag_node = node.args[1]
                for keyword in node.keywords:
                    if keyword.arg == "flags":
                        flag_node = keyword.value
                if flag_node is not None:
                    flags = eval(compile(ast.Expression(flag_node), relative, "eval"), {"re": re})
                # as a compiled pattern reports them (re.UNICODE added for str patterns)
                flags = re.compile(pattern, flags).flags
                found.setdefault((pattern, flags), f"{relative}:{node.lineno}")
    return found, dynamic


def _folded(node):
    """A pattern written as adjacent literals joined with ``+`` (no names), else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded(node.left), _folded(node.right)
        return left + right if isinstance(left, str) and isinstance(right, str) else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _assigned(path: Path) -> set[str]:
    """Names a module assigns at its top level (imported names belong to their own package)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            if isinstance(target, ast.Name):
                names.add(target.id)
    return names


def all_patterns() -> dict[tuple[str, int], str]:
    """{(pattern, flags): where it is defined} for both packages."""
    out: dict = {}
    for name in module_names():
        if name.rsplit(".", 1)[-1] in SCRIPTS:
            continue  # run by a tool, not importable (their literal patterns are read below)
        module = sys.modules.get(name) or importlib.import_module(name)
        seen: set = set()
        for attribute in _assigned(Path(module.__file__)):
            if attribute in vars(module):
                _walk(vars(module)[attribute], seen, out, f"{name}.{attribute}")
    literal, _ = source_calls()
    for key, where in literal.items():
        out.setdefault(key, where)
    return out


# ---- inputs from the parse tree ---------------------------------------------------------------

_CATEGORY_CHAR = {
    C.CATEGORY_DIGIT: "7",
    C.CATEGORY_NOT_DIGIT: "a",
    C.CATEGORY_SPACE: " ",
    C.CATEGORY_NOT_SPACE: "a",
    C.CATEGORY_WORD: "a",
    C.CATEGORY_NOT_WORD: " ",
    C.CATEGORY_LINEBREAK: "\n",
    C.CATEGORY_NOT_LINEBREAK: "a",
}


def _set_chars(items) -> list[str]:
    """Characters inside a ``[...]`` set (or outside it, when negated)."""
    negate = any(op is C.NEGATE for op, _ in items)
    inside: list[str] = []
    for op, arg in items:
        if op is C.LITERAL:
            inside.append(chr(arg))
        elif op is C.RANGE:
            inside.extend({chr(arg[0]), chr(arg[1]), chr((arg[0] + arg[1]) // 2)})
        elif op is C.CATEGORY:
            inside.append(_CATEGORY_CHAR.get(arg, "a"))
    if not negate:
        return inside or ["a"]
    pool = " \ta0A_.-/:=@'\"x\n"
    members = set()
    for op, arg in items:
        if op is C.LITERAL:
            members.add(chr(arg))
        elif op is C.RANGE:
            members.update(chr(c) for c in range(arg[0], arg[1] + 1))
        elif op is C.CATEGORY:
            members.update(ch for ch in pool if re.match(_category_regex(arg), ch))
    return [ch for ch in pool if ch not in members][:3] or ["\x01"]


def _category_regex(category) -> str:
    return {
        C.CATEGORY_DIGIT: r"\d",
        C.CATEGORY_NOT_DIGIT: r"\D",
        C.CATEGORY_SPACE: r"\s",
        C.CATEGORY_NOT_SPACE: r"\S",
        C.CATEGORY_WORD: r"\w",
        C.CATEGORY_NOT_WORD: r"\W",
        C.CATEGORY_LINEBREAK: r"\n",
        C.CATEGORY_NOT_LINEBREAK: r"[^\n]",
    }[category]


class _Sampler:
    """A short string each node matches, and the pumpable repetitions met on the way."""

    def __init__(self) -> None:
        self.groups: dict[int, str] = {}
        self.chars: set[str] = set()

    def sample(self, items) -> str:
        return "".join(self.node(op, arg) for op, arg in items)

    def node(self, op, arg) -> str:
        if op is C.LITERAL:
            self.chars.add(chr(arg))
            return chr(arg)
        if op is C.NOT_LITERAL:
            return "a" if chr(arg) != "a" else "b"
        if op is C.ANY:
            return "a"
        if op is C.IN:
            chars = _set_chars(arg)
            self.chars.update(chars)
            return chars[0]
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            low, _high, body = arg
            return self.sample(body) * max(low, 1 if low == 0 else low)
        if op is C.SUBPATTERN:
            group, _add, _del, body = arg
            text = self.sample(body)
            if group:
                self.groups[group] = text
            return text
        if op is C.ATOMIC_GROUP:
            return self.sample(arg)
        if op is C.BRANCH:
            return self.sample(arg[1][0])
        if op is C.GROUPREF:
            return self.groups.get(arg, "")
        if op is C.GROUPREF_EXISTS:
            return self.sample(arg[1])
        if op in (C.ASSERT, C.ASSERT_NOT, C.AT):
            return ""
        if op is C.CATEGORY:
            return _CATEGORY_CHAR.get(arg, "a")
        return ""


def _repeats(items, path=()):
    """(path to each repetition, its body) in the parse tree, outermost first."""
    for index, (op, arg) in enumerate(items):
        here = path + (index,)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            yield here, arg
            yield from _repeats(arg[2], here + ("body",))
        elif op is C.SUBPATTERN:
            yield from _repeats(arg[3], here + ("sub",))
        elif op is C.ATOMIC_GROUP:
            yield from _repeats(arg, here + ("atomic",))
        elif op is C.BRANCH:
            for number, branch in enumerate(arg[1]):
                yield from _repeats(branch, here + ("branch", number))
        elif op in (C.ASSERT, C.ASSERT_NOT):
            yield from _repeats(arg[1], here + ("assert",))


def _split(items, path):
    """(text before, the repeat node, text after) for the repetition at ``path``, as samples."""
    sampler = _Sampler()
    before, after = [], []
    target = None

    def visit(nodes, rest_path, out_before, out_after):
        nonlocal target
        index = rest_path[0]
        for position, (op, arg) in enumerate(nodes):
            if position < index:
                out_before.append(sampler.node(op, arg))
            elif position > index:
                out_after.append((op, arg))
        op, arg = nodes[index]
        tail = rest_path[1:]
        if not tail:
            target = arg
            return
        kind = tail[0]
        if kind == "body":
            visit(arg[2], tail[1:], out_before, out_after)
        elif kind == "sub":
            visit(arg[3], tail[1:], out_before, out_after)
        elif kind == "atomic":
            visit(arg, tail[1:], out_before, out_after)
        elif kind == "branch":
            visit(arg[1][tail[1]], tail[2:], out_before, out_after)
        elif kind == "assert":
            visit(arg[1], tail[1:], out_before, out_after)

    visit(list(items), path, before, after)
    prefix = "".join(before)
    pump = sampler.sample(target[2]) or "a"
    suffix = "".join(sampler.node(op, arg) for op, arg in reversed(after))
    return prefix, pump, suffix, sampler.chars


def inputs(pattern: str, flags: int = 0, length: int = LENGTH, most: int = 48) -> list[str]:
    """Adversarial strings of about ``length`` characters for ``pattern``, the pumped
    repetitions first, at most ``most`` of them."""
    tree = _parser.parse(pattern, flags)
    sampler = _Sampler()
    whole = sampler.sample(tree) or "a"
    out: list[str] = []
    for path, (low, high, _body) in _repeats(tree):
        prefix, pump, suffix, more = _split(tree, path)
        out.append(prefix + pump * (length // len(pump)) + "\x01")
        out.append(prefix + pump * (length // len(pump)) + suffix[:-1])
        bounded = min(high, 4096) if high is not C.MAXREPEAT else 4096
        unit = prefix + pump * max(bounded, low, 1) + "!"
        out.append(unit * (length // len(unit) + 1))
        if prefix:
            out.append(prefix * (length // len(prefix)) + pump * 64 + "\x01")
        out.extend(prefix + char * length for char in sorted(more))
    out.append(whole * (length // len(whole) + 1))
    if len(whole) > 1:
        out.append((whole[:-1] + "\x01") * (length // len(whole) + 1))
    for char in sorted(set(sampler.chars) | {" ", "a", "0", "\n", "'"}):
        out.append(char * length)
        out.append(whole[: len(whole) // 2 + 1] + char * length)
    unique = list(dict.fromkeys(text[: length + 64] for text in out if text))
    return unique[:most]


_USE = re.compile(
    r"\b(?P<name>[A-Za-z_]\w*)\.(?P<method>search|match|fullmatch|sub|subn|findall|finditer|split)\("
)


def anchored_only() -> set[str]:
    """Names of module-level patterns that the packages only ever use with ``match`` or
    ``fullmatch`` (anchored where the caller says): searching them is not how they run."""
    methods: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for use in _USE.finditer(path.read_text(encoding="utf-8")):
                methods.setdefault(use["name"], set()).add(use["method"])
    return {name for name, used in methods.items() if used <= {"match", "fullmatch"}}


def modes(where: str, anchored: set[str]) -> tuple[str, ...]:
    """How a pattern defined at ``where`` is run: always match and fullmatch; search and
    finditer (the costliest of each pair) unless the pattern's name is only ever matched at a given position."""
    # fullmatch explores at least what match does from the first position (it cannot stop at a
    # shorter match), and finditer at least what search does (it goes on after the first match).
    name = where.rsplit(".", 1)[-1] if ":" not in where else ""
    if name in anchored:
        return ("fullmatch",)
    return ("fullmatch", "finditer")


def run(pattern: re.Pattern[str], mode: str, text: str) -> None:
    if mode == "finditer":
        for _ in pattern.finditer(text):
            pass
    else:
        getattr(pattern, mode)(text)
