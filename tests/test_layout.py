"""The compiler is a stack of stages: no module of `noetl_compile` imports, at any depth and
even inside a function, a module that imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "noetl_compile"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of the package that ``name`` imports (top level, in functions, under TYPE_CHECKING)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            found |= {f"{target}.{alias.name}" for alias in node.names}
    # `from .x import y` names module x (and x.y only when that is a module too).
    return {m for m in found if m in known and m != name}


def test_no_import_circles_in_the_compiler() -> None:
    modules = _modules()
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target in _imports(name, path, set(modules)):
            # A package's own __init__ re-exporting its submodules is not a stage running back up.
            if name.startswith(target + ".") and modules[target].name == "__init__.py":
                continue
            graph.add_edge(name, target)
    cycles = sorted(sorted(c) for c in nx.simple_cycles(graph))
    assert cycles == [], f"import circles: {cycles}"


def test_the_circles_this_test_exists_for_would_be_caught() -> None:
    # The detector itself: an edge back from a lower stage makes a circle it reports.
    modules = _modules()
    graph = nx.DiGraph(
        (name, target)
        for name, path in modules.items()
        for target in _imports(name, path, set(modules))
    )
    assert graph.has_edge("noetl_compile.compile", "noetl_compile.check")
    assert graph.has_edge("noetl_compile.diagnostics", "noetl_compile.rules")
    graph.add_edge("noetl_compile.rules", "noetl_compile.diagnostics")
    assert list(nx.simple_cycles(graph))
