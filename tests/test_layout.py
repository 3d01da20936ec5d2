"""Both packages are stacks: no module imports, at any depth and even inside a function, a
module that imports it back; ``airflow_plugin`` is a declared order of floors that no import
climbs; the compiler reaches the plugin through one seam, the plugin takes from the compiler
only its standard-library leaves (and, in one named place, the compile step of `noetlc run`).
No module of either package is longer than ``MAX_LINES``: past that, it is split along a seam."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]

# airflow_plugin's floors, bottom up. A module may import its own package and any package of a
# lower floor; packages on one floor stand beside each other and never import one another.
FLOORS: tuple[tuple[str, ...], ...] = (
    # NoetlRuntimeError and its families | every difference between the supported Airflow
    # versions (it imports Airflow lazily, so the hooks use it without Airflow installed)
    ("errors", "compat"),
    ("hooks",),  # connections, secrets, database pools, SQL text, values, state folder
    ("templating",),  # what a template sees: proxy, render, context, ids
    ("tools", "events", "drivers"),  # tool executors | the event log | cursor drivers
    ("runtime",),  # payload, pipeline, step, loop, cursor, interpreter, nested playbooks
    ("operators", "web"),  # Airflow operators | the NoETL view in the Airflow UI
    (
        "",
        "plugin",
        "local",
        "deploy",
    ),  # the package root (DAG files' import) | the plugin entry point | noetlc run | the stack
)
# What airflow_plugin may take from the compiler: standard-library leaves.
COMPILER_LEAVES = {
    "noetl_compile.airflow_versions",  # the supported Airflow versions and what each runs
    "noetl_compile.dag_ids",
    "noetl_compile.secret_names",
    "noetl_compile.lookalike",  # read by secret_names: NFKC and Unicode's confusables
    "noetl_compile.engine_behaviours",
    "noetl_compile.engine_profiles",
    "noetl_compile.engine_case_v2",
    "noetl_compile.engine_noetl5",
    "noetl_compile.engine_v1",
    "noetl_compile.python_surface",
    "noetl_compile.quantum_surface",
    "noetl_compile.shell_surface",
    "noetl_compile.step_contract",
    "noetl_compile.runtime_support",  # what the runtime executes; its sink's event-log kinds
    "noetl_compile.step_model",  # the typed step
    "noetl_compile.step_decode",  # its one decode
}
SEAM = "noetl_compile.plugin_seam"
# The one way back: the compile step of `noetlc run`, a public module below the CLI. The warm
# runner of `noetlc run --warm` is the CLI's process kept alive, and each forked run compiles
# exactly as the CLI does (inside a function, after the fork). Named here with its one caller so
# that no other module can start doing the same; it reaches neither the CLI nor the seam, so the
# import closes no circle across the packages.
COMPILER_ENTRY = "noetl_compile.run_compile"
COMPILER_ENTRY_CALLERS = {"airflow_plugin.local.warm"}


# Lines (newline characters, as `wc -l` counts them) a module of either package may hold.
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(*packages: str) -> dict[str, Path]:
    return {_module_name(p): p for package in packages for p in (ROOT / package).rglob("*.py")}


ALL = _modules("noetl_compile", "airflow_plugin")


def _imports(name: str, path: Path, known: set[str]) -> dict[str, bool]:
    """Modules of ``known`` that ``name`` imports (top level, in functions, under TYPE_CHECKING)
    -> whether some import of it is at module level."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    found: dict[str, bool] = {}

    def add(module: str, node: ast.AST) -> None:
        found[module] = found.get(module, False) or id(node) in top

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            add(target, node)
            for alias in node.names:
                add(f"{target}.{alias.name}", node)
    # `from .x import y` names module x (and x.y only when that is a module too).
    return {m: level for m, level in found.items() if m in known and m != name}


def _graph(modules: dict[str, Path]) -> nx.DiGraph:
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target, top in _imports(name, path, set(ALL)).items():
            # A package's own __init__ re-exporting its submodules is not a floor running back up.
            if name.startswith(target + ".") and ALL[target].name == "__init__.py":
                continue
            graph.add_edge(name, target, top=top)
    return graph


def _circles(graph: nx.DiGraph, package: str) -> list[list[str]]:
    inside = graph.subgraph(n for n in graph if n.split(".")[0] == package)
    return sorted(sorted(c) for c in nx.simple_cycles(inside))


def _floor_of(module: str) -> tuple[int, str]:
    parts = module.split(".")
    package = parts[1] if len(parts) > 1 else ""
    for number, floor in enumerate(FLOORS):
        if package in floor:
            return number, package
    raise AssertionError(f"{module}: its package {package!r} is on no floor of FLOORS")


def _climbs(graph: nx.DiGraph) -> list[str]:
    """Imports inside airflow_plugin that go up a floor or sideways to a neighbour."""
    wrong = []
    for source, target in graph.edges:
        if not (source.startswith("airflow_plugin") and target.startswith("airflow_plugin")):
            continue
        (low, here), (high, there) = _floor_of(source), _floor_of(target)
        if here != there and high >= low:
            side = "beside it" if high == low else "above it"
            wrong.append(f"{source} -> {target} ({there or 'the root'} is {side})")
    return sorted(wrong)


def _too_long(modules: dict[str, Path], limit: int = MAX_LINES) -> list[str]:
    """The modules past ``limit`` lines, each with its count, by name."""
    counts = {name: path.read_bytes().count(b"\n") for name, path in modules.items()}
    return [f"{name}: {lines} lines" for name, lines in sorted(counts.items()) if lines > limit]


GRAPH = _graph(ALL)


def test_no_import_circles_in_the_compiler() -> None:
    assert _circles(GRAPH, "noetl_compile") == []


def test_no_import_circles_in_the_plugin() -> None:
    assert _circles(GRAPH, "airflow_plugin") == []


def test_every_plugin_package_is_on_a_floor() -> None:
    packages = {_floor_of(m)[1] for m in ALL if m.startswith("airflow_plugin")}
    assert packages == {p for floor in FLOORS for p in floor}


def test_no_plugin_import_climbs_a_floor() -> None:
    assert _climbs(GRAPH) == []


def test_the_compiler_reaches_the_plugin_only_through_the_seam() -> None:
    reaching = {
        (source, target, GRAPH.edges[source, target]["top"])
        for source, target in GRAPH.edges
        if source.startswith("noetl_compile") and target.startswith("airflow_plugin")
    }
    assert {source for source, _, _ in reaching} == {SEAM}
    assert [edge for edge in reaching if edge[2]] == [], "the seam imports the plugin lazily"


def _taken_from_the_compiler(graph: nx.DiGraph) -> set[tuple[str, str]]:
    return {
        (source, target)
        for source, target in graph.edges
        if source.startswith("airflow_plugin") and target.startswith("noetl_compile")
    }


def test_no_import_circles_across_both_packages() -> None:
    assert sorted(sorted(c) for c in nx.simple_cycles(GRAPH)) == []


def test_the_plugin_takes_only_the_compilers_leaves_and_the_run_compile_step() -> None:
    taken = _taken_from_the_compiler(GRAPH)
    assert {target for _, target in taken} - {COMPILER_ENTRY} <= COMPILER_LEAVES
    callers = {source for source, target in taken if target == COMPILER_ENTRY}
    assert callers == COMPILER_ENTRY_CALLERS
    for source in callers:  # a function-level import, never at module level
        assert not GRAPH.edges[source, COMPILER_ENTRY]["top"], source
    below = nx.descendants(GRAPH, COMPILER_ENTRY)
    assert [m for m in below if m.startswith("airflow_plugin") or m == SEAM] == []
    assert "noetl_compile.cli" not in below
    for leaf in COMPILER_LEAVES:  # a leaf: it imports nothing of either package but leaves
        assert set(GRAPH.successors(leaf)) <= COMPILER_LEAVES, leaf


def test_the_checks_would_catch_what_they_exist_for() -> None:
    # The detectors themselves: the real graph has the edges they read...
    assert GRAPH.has_edge("noetl_compile.compile", "noetl_compile.check")
    assert GRAPH.has_edge("airflow_plugin.runtime.step", "airflow_plugin.tools")
    assert GRAPH.has_edge("airflow_plugin.tools.postgres", "airflow_plugin.hooks.postgres")
    # ...a planted edge back down-to-up is a circle and a climb...
    planted = GRAPH.copy()
    planted.add_edge("noetl_compile.rules", "noetl_compile.diagnostics", top=True)
    assert _circles(planted, "noetl_compile")
    planted.add_edge("airflow_plugin.hooks.connections", "airflow_plugin.runtime.step", top=False)
    assert _climbs(planted) == [
        "airflow_plugin.hooks.connections -> airflow_plugin.runtime.step (runtime is above it)"
    ]
    # ...a sideways import between neighbours is caught, and a circle through a function body.
    sideways = GRAPH.copy()
    sideways.add_edge(
        "airflow_plugin.tools.quantum.jobs", "airflow_plugin.events.config", top=False
    )
    assert _climbs(sideways) == [
        "airflow_plugin.tools.quantum.jobs -> airflow_plugin.events.config (events is beside it)"
    ]
    sideways.add_edge("airflow_plugin.events.recorder", "airflow_plugin.events.writer", top=False)
    sideways.add_edge("airflow_plugin.events.writer", "airflow_plugin.events.recorder", top=True)
    assert _circles(sideways, "airflow_plugin")
    # A plugin module calling the CLI (what local/warm.py once did) closes a circle through the
    # seam, and is a compiler module the plugin may not take.
    back = GRAPH.copy()
    back.add_edge("airflow_plugin.local.warm", "noetl_compile.cli", top=False)
    assert any("noetl_compile.cli" in c and SEAM in c for c in nx.simple_cycles(back))
    assert ("airflow_plugin.local.warm", "noetl_compile.cli") in _taken_from_the_compiler(back)
    assert "noetl_compile.cli" not in COMPILER_LEAVES | {COMPILER_ENTRY}


def test_a_planted_import_in_a_real_file_is_read(tmp_path: Path) -> None:
    # The parser side: a function-level upward import written in a module is an edge.
    source = ROOT / "airflow_plugin" / "hooks" / "connections.py"
    planted = tmp_path / "connections.py"
    planted.write_text(
        source.read_text(encoding="utf-8") + "\n\ndef _up():\n    from ..runtime import step\n",
        encoding="utf-8",
    )
    # Read as if it stood where the original does (the package decides what `..` means).
    imports = _imports("airflow_plugin.hooks.connections", planted, set(ALL))
    assert imports.get("airflow_plugin.runtime.step") is False  # found, inside a function
    graph = GRAPH.copy()
    graph.add_edge("airflow_plugin.hooks.connections", "airflow_plugin.runtime.step", top=False)
    assert _climbs(graph)


def test_no_module_is_longer_than_the_limit() -> None:
    assert _too_long(ALL) == [], f"split these along a real seam (at most {MAX_LINES} lines)"


def test_a_planted_long_module_is_named(tmp_path: Path) -> None:
    # The detector itself: a real module one line past the limit is named with its count, and
    # one exactly at the limit is not.
    source = (ROOT / "noetl_compile" / "rules.py").read_text(encoding="utf-8")
    padding = MAX_LINES - source.count("\n")
    over, at = tmp_path / "over.py", tmp_path / "at.py"
    over.write_text(source + "\n" * (padding + 1), encoding="utf-8")
    at.write_text(source + "\n" * padding, encoding="utf-8")
    planted = {**ALL, "noetl_compile.rules": over, "airflow_plugin.errors": at}
    assert _too_long(planted) == [f"noetl_compile.rules: {MAX_LINES + 1} lines"]
    # ...and it reads the real modules: many of them are past half the limit.
    assert len(_too_long(ALL, limit=MAX_LINES // 2)) > 10
