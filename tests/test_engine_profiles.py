"""Engine profiles (noetl_compile/engine_profiles.py): the runtime reads NoETL engine differences
off a profile and never compares an engine's name; every behaviour cites its source; the engine
table of docs/semantics.md is the profiles' own."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from noetl_compile.engine_behaviours import EngineProfile, Source, behaviours
from noetl_compile.engine_profiles import CANONICAL, CASE_V2, NOETL5, PROFILES, V1, profile_for
from noetl_compile.engine_table import engine_table, with_engine_table

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "airflow_plugin"
SEMANTICS = ROOT / "docs" / "semantics.md"
ENGINE_NAMES = frozenset(PROFILES)
BEGIN, END = "<!-- engine-table:begin -->", "<!-- engine-table:end -->"


def _names_in(node: ast.AST) -> bool:
    """Whether ``node`` is an engine's name as a literal, or a literal collection holding one."""
    if isinstance(node, ast.Constant):
        return node.value in ENGINE_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_in(element) for element in node.elts)
    return False


def engine_name_tests(source: str, filename: str = "<source>") -> list[str]:
    """Every place ``source`` asks which engine it is in: a comparison (``==``, ``!=``, ``in``,
    ``not in``, ``is``) with an engine's name, a lookup keyed by one (``x["v1"]``,
    ``x.get("v1")``, ``{"v1": ...}``) and a ``match`` case on one; as ``file:line``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        hit = (
            (
                isinstance(node, ast.Compare)
                and any(_names_in(operand) for operand in (node.left, *node.comparators))
            )
            or (isinstance(node, ast.Subscript) and _names_in(node.slice))
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get", "pop", "setdefault")
                and any(_names_in(arg) for arg in node.args[:1])
            )
            or (isinstance(node, ast.Dict) and any(key and _names_in(key) for key in node.keys))
            or (isinstance(node, ast.MatchValue) and _names_in(node.value))
        )
        if hit:
            found.append(f"{filename}:{node.lineno}")
    return found


def test_the_plugin_never_asks_which_engine_it_runs_for() -> None:
    found = [
        hit
        for path in sorted(PLUGIN.rglob("*.py"))
        for hit in engine_name_tests(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == [], (
        "compare no engine name in airflow_plugin: read a field of the payload's "
        f"EngineProfile (noetl_compile/engine_profiles.py, profile_for) instead: {found}"
    )


@pytest.mark.parametrize(
    "planted",
    [
        'if payload.get("dialect") == "case-v2":\n    pass\n',
        'ok = dialect != "v1"\n',
        'ok = generation in ("noetl5", "x")\n',
        'ok = dialect not in ["canonical"]\n',
        'ok = "canonical" == dialect\n',
        'fallbacks = {"v1": (), "canonical": ()}.get(dialect)\n',
        'fallbacks = TABLE["case-v2"]\n',
        'fallbacks = TABLE.get("noetl5")\n',
        'match dialect:\n    case "v1":\n        pass\n',
    ],
)
def test_the_scan_finds_a_planted_engine_name_test(planted: str) -> None:
    assert engine_name_tests(planted, "planted.py") != []


def test_the_scan_leaves_other_strings_alone() -> None:
    clean = (
        'x = payload.get("dialect") or profile.name\n'
        'if profile.loop_results_capped and kind == "postgres":\n    pass\n'
        'y = {"postgresql": 1}["postgresql"]\n'
    )
    assert engine_name_tests(clean) == []


# -- the profiles ------------------------------------------------------------------------------


def test_four_profiles_one_per_engine() -> None:
    assert list(PROFILES) == ["v1", "case-v2", "canonical", "noetl5"]
    assert [V1, CASE_V2, CANONICAL, NOETL5] == list(PROFILES.values())
    for profile in PROFILES.values():
        assert all(re.fullmatch(r"[0-9a-f]{40}", sha) for sha in profile.commits.values())
    assert set(NOETL5.commits) == {"noetl/server", "noetl/worker", "noetl/tools"}


def test_every_behaviour_cites_a_source_line_in_every_profile() -> None:
    assert len(behaviours()) >= 20
    for profile in PROFILES.values():
        assert set(profile.sources) == set(behaviours())
        for name, source in profile.sources.items():
            parts = source.where.split(":")
            assert len(parts) in (2, 3), (profile.name, name, source.where)
            if len(parts) == 3:  # an engine of several repositories names the one
                assert parts[0] in profile.commits, (profile.name, name)
            assert re.fullmatch(r"[\w./-]+\.(py|rs)", parts[-2]), (profile.name, name)
            assert int(parts[-1]) >= 1 and source.says, (profile.name, name)
    field = {f.name: f for f in dataclasses.fields(EngineProfile)}
    for name in behaviours():
        assert field[name].metadata["doc"] and field[name].metadata["airflow"]


def test_a_profile_without_a_source_for_a_behaviour_is_refused() -> None:
    sources = dict(CANONICAL.sources)
    del sources["loop_results_capped"]
    with pytest.raises(ValueError, match="loop_results_capped"):
        dataclasses.replace(CANONICAL, sources=sources)
    with pytest.raises(ValueError, match="unknown"):
        dataclasses.replace(CANONICAL, sources={**CANONICAL.sources, "typo": Source("a.py:1", "x")})


def test_profiles_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        CANONICAL.loop_results_capped = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        CANONICAL.sources["x"] = Source("a.py:1", "x")  # type: ignore[index]


@pytest.mark.parametrize(
    ("payload", "profile"),
    [
        ({"step": "s"}, CANONICAL),
        ({"step": "s", "dialect": "canonical"}, CANONICAL),
        ({"step": "s", "dialect": "v1"}, V1),
        ({"step": "s", "dialect": "case-v2"}, CASE_V2),
        ({"step": "s", "dialect": "canonical", "generation": "noetl5"}, NOETL5),
        ({"step": "s", "dialect": None}, CANONICAL),
    ],
)
def test_profile_for_reads_the_payloads_generation_then_its_dialect(payload, profile) -> None:
    assert profile_for(payload) is profile


# -- docs/semantics.md ---------------------------------------------------------------------------


def test_the_engine_table_of_docs_semantics_is_generated_from_the_profiles() -> None:
    page = SEMANTICS.read_text()
    assert page.count(BEGIN) == 1 and page.count(END) == 1, "markers around the engine table"
    assert with_engine_table(page) == page, (
        "docs/semantics.md's engine table differs from noetl_compile/engine_profiles.py: "
        "regenerate it with `python -m noetl_compile.engine_table docs/semantics.md`"
    )
    # the page's other sections stay as they are
    assert page.index("## 1. Where noetlc deliberately") < page.index(BEGIN)
    stale = page.replace("| `loop_results_capped`", "| `loop_results_kept`", 1)
    assert with_engine_table(stale) == page


def test_the_table_has_a_row_per_behaviour_naming_each_source() -> None:
    table = engine_table()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(behaviours())
    for profile in PROFILES.values():
        for source in profile.sources.values():
            assert source.where.split(":", source.where.count(":") - 1)[-1] in table
    # the table is the objects': a changed value or source shows in it
    changed = dataclasses.replace(CANONICAL, loop_results_capped=False)
    assert (
        "canonical: no"
        in engine_table([V1, CASE_V2, changed, NOETL5])
        .split("`loop_results_capped`")[1]
        .splitlines()[0]
    )
    assert "canonical: yes" in table.split("`loop_results_capped`")[1].splitlines()[0]


@pytest.mark.parametrize(
    ("playbook", "profile"),
    [
        ("playbooks/hello_world.yaml", "canonical"),
        ("tests/noetl5_dsl/playbooks/python_run.yaml", "noetl5"),
    ],
)
def test_the_dag_file_names_the_profile_it_runs_under(
    playbook: str, profile: str, tmp_path
) -> None:
    # The compiler resolves the playbook's profile (its generation, else its dialect) and writes
    # it in the file's header and the DAG's docs; the step payloads carry what resolves it.
    import subprocess
    import sys

    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "noetl_compile",
            "compile",
            str(ROOT / playbook),
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (text,) = [p.read_text() for p in tmp_path.glob("*.py")]
    assert f"\nEngine profile: {profile}\n" in text
    assert f"- Engine profile: {profile} (" in text
    payloads = text.split("PAYLOADS = ", 1)[1].split("\n\n", 1)[0]
    key = "generation" if profile == "noetl5" else "dialect"
    assert f'"{key}": "{profile}"' in payloads
