"""`noetlc compile`: output layout, change detection, --check, orphans, diagnostics, names."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noetl_compile.cli import main
from noetl_compile.emit.literals import python_literal, str_literal
from noetl_compile.lower.names import (
    AIRFLOW_CONTEXT_KEYS,
    IdAllocator,
    dag_id_for_path,
    sanitize_id,
)

ROOT = Path(__file__).resolve().parents[1]

GOOD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: good, path: tests/good}
workload: {n: 1}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'n': 1}"}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""
BAD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: bad, path: tests/bad}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    next: {arcs: [{step: strat}]}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "playbooks" / "sub").mkdir(parents=True)
    (tmp_path / "playbooks" / "good.yaml").write_text(GOOD)
    (tmp_path / "playbooks" / "sub" / "other.yaml").write_text(
        GOOD.replace("tests/good", "tests/other")
    )
    return tmp_path


def _compile(project: Path, *extra: str) -> int:
    return main(["compile", str(project / "playbooks"), "-o", str(project / "dags"), *extra])


def test_layout_mirrors_the_source_tree(project: Path, capsys) -> None:
    assert _compile(project) == 0
    files = sorted(str(p.relative_to(project / "dags")) for p in (project / "dags").rglob("*.py"))
    assert files == ["good.py", "sub/other.py"]
    text = (project / "dags" / "good.py").read_text()
    assert "Source: playbooks/good.yaml" in text
    assert 'dag_id="tests.good"' in text
    assert "2 of 2 playbook(s) compiled; 2 written, 0 unchanged." in capsys.readouterr().out


def test_unchanged_files_are_not_rewritten_and_check_detects_staleness(
    project: Path, capsys
) -> None:
    assert _compile(project) == 0
    target = project / "dags" / "good.py"
    os.utime(target, ns=(1, 1))
    assert _compile(project) == 0
    assert target.stat().st_mtime_ns == 1  # not rewritten
    assert _compile(project, "--check") == 0
    assert "output is up to date" in capsys.readouterr().out
    # A changed playbook makes the output stale; --check writes nothing and fails.
    (project / "playbooks" / "good.yaml").write_text(GOOD.replace("n: 1", "n: 2"))
    assert _compile(project, "--check") == 1
    out = capsys.readouterr().out
    assert f"stale: {target}" in out and "output is stale" in out
    assert target.stat().st_mtime_ns == 1
    assert _compile(project) == 0
    assert "Param(2" in target.read_text()


def test_orphaned_generated_files_are_removed_hand_written_ones_kept(project: Path, capsys) -> None:
    assert _compile(project) == 0
    (project / "dags" / "mine.py").write_text("# hand-written, not ours\n")
    (project / "playbooks" / "sub" / "other.yaml").unlink()
    assert _compile(project, "--check") == 1
    assert "orphaned:" in capsys.readouterr().out
    assert _compile(project) == 0
    assert not (project / "dags" / "sub" / "other.py").exists()
    assert (project / "dags" / "mine.py").exists()


def test_a_playbook_with_check_errors_is_reported_and_others_still_compile(
    project: Path, capsys
) -> None:
    (project / "playbooks" / "bad.yaml").write_text(BAD)
    assert _compile(project) == 1
    out = capsys.readouterr().out
    bad = project / "playbooks" / "bad.yaml"
    # check's concise format: path:line:col: CODE message
    assert f"{bad}:7:" in out and " R201 " in out
    assert "2 of 3 playbook(s) compiled, 1 with errors" in out
    assert not (project / "dags" / "bad.py").exists()
    assert (project / "dags" / "good.py").exists()
    assert main(["compile", str(bad), "-o", str(project / "dags"), "--format", "json"]) == 1
    assert '"code": "R201"' in capsys.readouterr().out


def _dag_ids(folder: Path) -> list[str]:
    return sorted(
        line.strip()
        for p in folder.rglob("*.py")
        for line in p.read_text().splitlines()
        if line.strip().startswith("dag_id=")
    )


def test_two_playbooks_claiming_one_catalog_path_are_r208_naming_both(tmp_path, capsys) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    (tmp_path / "b.yaml").write_text(GOOD)
    assert main(["compile", str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert f"{a}:3:30: R208 [error] catalog path 'tests/good' is also claimed by {b}:" in out
    assert f"{b}:3:30: R208 [error] catalog path 'tests/good' is also claimed by {a}:" in out
    assert "0 of 2 playbook(s) compiled, 2 with errors" in out
    assert _dag_ids(tmp_path / "out") == []


def test_paths_that_map_to_one_dag_id_are_r208(tmp_path, capsys) -> None:
    (tmp_path / "a.yaml").write_text(GOOD.replace("tests/good", "tests/x.y"))
    (tmp_path / "b.yaml").write_text(GOOD.replace("tests/good", "tests/x/y"))
    assert main(["check", str(tmp_path), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert (
        "R208 [error] DAG id 'tests.x.y' of catalog path 'tests/x.y' is also the DAG id of" in out
    )
    assert out.count(" R208 ") == 2


def test_a_dag_id_does_not_change_when_other_files_come_and_go(tmp_path, capsys) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    assert main(["compile", str(tmp_path), "-o", str(tmp_path / "out")]) == 0
    assert _dag_ids(tmp_path / "out") == ['dag_id="tests.good",']
    (tmp_path / "b.yaml").write_text(GOOD.replace("tests/good", "tests/b"))
    assert main(["compile", str(tmp_path), "-o", str(tmp_path / "out")]) == 0
    assert _dag_ids(tmp_path / "out") == ['dag_id="tests.b",', 'dag_id="tests.good",']
    (tmp_path / "b.yaml").write_text(GOOD)  # now a twin: reported, the other id not taken over
    assert main(["compile", str(tmp_path), "-o", str(tmp_path / "out2")]) == 1
    assert " R208 " in capsys.readouterr().out


PARENT = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: parent, path: tests/parent}
workflow:
  - step: start
    tool: {kind: playbook, path: CHILD}
"""


@pytest.mark.parametrize(
    ("child_path", "code", "message"),
    [
        ("tests/good", None, None),
        # NoETL's catalog finds a playbook by its path, never by the name of one that has a path
        ("good", "R204", "nested playbook 'good' is not among the checked playbooks"),
        ("tests/twin", "R209", "nested playbook 'tests/twin' is claimed by 2 playbooks"),
    ],
)
def test_a_nested_call_resolves_to_exactly_one_playbook_by_catalog_path(
    tmp_path, capsys, child_path, code, message
) -> None:
    (tmp_path / "parent.yaml").write_text(PARENT.replace("CHILD", child_path))
    (tmp_path / "good.yaml").write_text(GOOD)
    (tmp_path / "t1.yaml").write_text(GOOD.replace("tests/good", "tests/twin"))
    (tmp_path / "t2.yaml").write_text(GOOD.replace("tests/good", "tests/twin"))
    main(["check", str(tmp_path), "--quiet"])
    # D954 (info: 138c10ed returns no step result from a playbook call) is every canonical
    # call's; this test is about resolving the call's path.
    lines = [
        line
        for line in capsys.readouterr().out.splitlines()
        if "parent.yaml" in line and " D954 " not in line
    ]
    if code is None:
        assert lines == []
    else:
        assert len(lines) == 1 and f":6:34: {code} " in lines[0] and message in lines[0]


def test_our_example_dags_are_up_to_date() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "noetl_compile", "compile", "playbooks", "-o", "dags", "--check"],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize(
    "name, expected",
    [
        ("fetch", "fetch"),
        ("tests/fixtures/hello world", "tests_fixtures_hello_world"),
        ("a.b", "a_b"),
        ("étape", "etape"),
        ("params", "params_step"),
        ("run_id", "run_id_step"),
    ],
)
def test_task_ids_are_sanitized(name: str, expected: str) -> None:
    assert sanitize_id(name) == expected


def test_task_ids_are_unique_and_valid() -> None:
    ids = IdAllocator()
    got = [ids.allocate(n) for n in ["a b", "a/b", "A_B", "日本", "日本語", "x" * 400, "x" * 401]]
    assert len({g.lower() for g in got}) == len(got)
    assert all(
        len(g) <= 120 and g.replace("_", "").replace("-", "").isalnum() and g.isascii() for g in got
    )


def test_context_keys_match_airflow() -> None:
    context = importlib.import_module("airflow.sdk.definitions.context")
    assert AIRFLOW_CONTEXT_KEYS == frozenset(context.KNOWN_CONTEXT_KEYS)


def test_dag_id_mapping_is_one_definition_for_compiler_and_runtime() -> None:
    # The compiler's trigger_dag_id and the runtime's resolution of a templated child path are
    # the same function object, so they cannot drift apart.
    nested = importlib.import_module("airflow_plugin.operators.nested")
    catalog = importlib.import_module("airflow_plugin.runtime.catalog")
    assert nested.dag_id_for_path is catalog.dag_id_for_path is dag_id_for_path
    assert dag_id_for_path("tests/fixtures/playbooks/hello_world") == (
        "tests.fixtures.playbooks.hello_world"
    )
    assert dag_id_for_path("a//b/../c") == "a.b.c"
    assert dag_id_for_path("é/ü") == "e.u"
    assert dag_id_for_path("").startswith("playbook_")
    long = dag_id_for_path("x" * 300)
    assert len(long) <= 200 and long != dag_id_for_path("x" * 301)


def test_literals_round_trip_and_stay_one_line_safe() -> None:
    import ast

    values = [
        "\u2028",
        '"""',
        "'''",
        "a\nb\rc",
        "\x00",
        "{{ x }}",
        float("inf"),
        -float("inf"),
        1e300,
        {"k\n": [1, None, True]},
        "é" * 200,
    ]
    for value in values:
        text = python_literal(value, 1, 10)
        assert ast.literal_eval(text.replace('float("inf")', "1e999")) == value
    assert str_literal("plain") == '"plain"'
    with pytest.raises(TypeError):
        python_literal(object())
    with pytest.raises(TypeError):
        python_literal({1: "non-string key"})


def test_compiling_other_inputs_into_the_same_folder_keeps_their_files(
    project: Path, tmp_path: Path
) -> None:
    assert _compile(project) == 0
    single = tmp_path / "single.yaml"
    single.write_text(GOOD.replace("tests/good", "tests/single"))
    assert main(["compile", str(single), "-o", str(project / "dags")]) == 0
    assert (project / "dags" / "good.py").exists() and (project / "dags" / "single.py").exists()
    assert _compile(project) == 0
    assert (project / "dags" / "single.py").exists()  # not an orphan of playbooks/


def test_an_ignored_x601_still_never_writes_the_secret_into_a_dag(tmp_path, capsys) -> None:
    # --ignore makes X601 silent for check's purposes. A secret in a tool config would still be
    # in the DAG file, so compile refuses that file, masking it; a secret under a credential-named
    # workload key is left out of the Param (X602) whatever X601 said.
    head = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: leaky, path: tests/leaky}\n"
    source = tmp_path / "leaky.yaml"
    source.write_text(
        head + "workflow:\n  - step: start\n    tool:\n      kind: http\n"
        "      url: http://127.0.0.1/x\n      headers: {X-Upstream: Bearer hunter2literalpw99}\n"
    )
    out = tmp_path / "dags"
    assert main(["compile", str(source), "-o", str(out), "--ignore", "X601"]) == 1
    printed = capsys.readouterr()
    assert "X601 [error] not compiled: the DAG file would hold this literal secret" in printed.out
    assert "hunter2" not in printed.out + printed.err
    assert list(out.rglob("*.py")) == []  # nothing written (no folder is fine too)

    source.write_text(
        head + 'workload:\n  db_password: "hunter2-literal-pw"\nworkflow:\n  - step: start\n'
        '    tool: {kind: python, input: {p: "{{ workload.db_password }}"}, code: "result = 1"}\n'
    )
    assert main(["compile", str(source), "-o", str(out), "--ignore", "X601"]) == 0
    printed = capsys.readouterr()
    assert "5:16: X602 [warning] `db_password` names a credential" in printed.out
    assert "hunter2" not in printed.out + printed.err
    (dag,) = out.rglob("*.py")
    text = dag.read_text()
    assert "hunter2" not in text
    assert '"db_password": Param(None, type=["null", "string"], format="password")' in text
