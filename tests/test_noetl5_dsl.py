"""NoETL 5, the current generation of the canonical dialect, and its local dialect.

The playbooks under tests/noetl5_dsl/playbooks/ are ours, one or more per construct NoETL 5
added; they check with no error, compile and import. The same files read as the April 2026
generation (`--dialect canonical`) get that engine's verdicts, which are the false rejects this
generation must not repeat. tests/noetl5_dsl/schema_paths.json records the property paths of
NoETL's playbook JSON Schema (noetl/noetl@3badb77a); every one must be known to the reader.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from noetl_compile.check import check_paths, check_text, read_file
from noetl_compile.compile import compile_result
from noetl_compile.read import detect_dialect
from noetl_compile.read.noetl5 import NOT_EXECUTED, SCHEMA_READ

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "tests" / "noetl5_dsl"
PLAYBOOKS = FOLDER / "playbooks"
SERVER_FORMS = FOLDER / "server_forms"
SCHEMA = json.loads((FOLDER / "schema_paths.json").read_text(encoding="utf-8"))


def _codes(result) -> Counter:
    return Counter(d.code for d in result.diagnostics)


def _errors(result) -> list[str]:
    return [
        f"{d.position.line}:{d.code} {d.message}" for d in result.diagnostics if d.severity >= 3
    ]


def test_folder_checks_with_no_error_and_is_read_as_noetl5() -> None:
    results, _ = check_paths([str(PLAYBOOKS)])
    by_name = {Path(r.path).name: r for r in results}
    assert set(by_name) == {
        "schema_keys.yaml",
        "local_router.yaml",
        "local_run.yaml",
        "python_convention.yaml",
        "python_run.yaml",
        "subscription_tool.yaml",
        "orders.subscription.yaml",
        "tools.mcp.yaml",
        "parent.yaml",
        "child.yaml",
        "policies_run.yaml",
        "python_error_run.yaml",
    }
    for name, result in by_name.items():
        assert not _errors(result), (name, _errors(result))
        if name.endswith((".subscription.yaml", ".mcp.yaml")):
            assert result.playbook is None
            assert [d.code for d in result.diagnostics] == ["E003"]
            continue
        assert result.playbook.dialect == "canonical"
        assert result.playbook.generation == "noetl5", name
        # Nothing of NoETL 5's vocabulary is an unknown key, a foreign form or an unknown name.
        unexpected = {"S103", "S107", "S110", "S114", "T302", "T304", "T307", "C501", "C503"}
        assert not unexpected & set(_codes(result)), (name, _codes(result))
    assert by_name["local_router.yaml"].playbook.profile == "local"
    assert by_name["schema_keys.yaml"].playbook.profile == "distributed"


def test_the_april_generation_rejects_what_noetl5_accepts() -> None:
    """Before/after: read as the April 2026 engine (`--dialect canonical`), the same files get
    the verdicts that were false rejects of NoETL 5 playbooks."""
    expected = {
        # step vars, next lists with then, next_mode
        "local_router.yaml": {"S114"},
        # top-level return (C501), credential (C503), task set names and filters (T302/T304)
        "python_convention.yaml": {"C501", "C503", "T304"},
        "subscription_tool.yaml": {"S110", "S103"},  # the kind; next.spec.on_no_match
        "schema_keys.yaml": {"S103", "C501", "S107"},  # exposes_as_mcp, return, tool-less end
    }
    for name, codes in expected.items():
        (before,), _ = check_paths([str(PLAYBOOKS / name)], dialect="canonical")
        found = set(_codes(before))
        assert codes <= found, (name, found)
        (after,), _ = check_paths([str(PLAYBOOKS / name)])
        assert not codes & {d.code for d in after.diagnostics if d.severity >= 2} - {"S116"}, name


def test_compiles_and_imports(tmp_path: Path) -> None:
    pytest.importorskip("airflow")
    from tests.test_compiles_imports import _dagbag

    results, _ = check_paths([str(PLAYBOOKS)])
    compiled = [r for r in results if r.playbook is not None]
    assert len(compiled) == 10
    for index, result in enumerate(compiled):
        text, _ = compile_result(result, Path(result.path).name)
        # Each step payload tells the runtime the generation whose semantics apply.
        assert '"generation": "noetl5"' in text
        (tmp_path / f"noetl5_{index}.py").write_text(text, encoding="utf-8")
    bag = _dagbag(tmp_path)
    assert not bag.import_errors, bag.import_errors
    assert len(bag.dags) == 10
    parent = bag.dags["tests.noetl5.nested.parent"]
    # Nested calls by file path trigger the DAG of the playbook in that file.
    triggers = {t.task_id: getattr(t, "trigger_dag_id", None) for t in parent.tasks}
    assert triggers["start"] == "tests.noetl5.nested.child"
    assert triggers["call_sibling"] == "tests.noetl5.local_router"


def test_local_dialect_routing_is_read_with_the_clis_meaning() -> None:
    playbook = read_file(str(PLAYBOOKS / "local_router.yaml")).playbook
    assert playbook.entry == "begin"  # the CLI starts at the first step
    begin = playbook.step("begin")
    assert set(begin.vars) == {"env", "replicas"}
    assert begin.router.mode == "exclusive"
    arcs = [(a.target, a.group, a.when is not None, a.args is not None) for a in begin.router.arcs]
    assert arcs == [
        ("prod_setup", 0, True, False),
        ("staging_setup", 2, True, True),
        ("dev_setup", 4, False, False),
    ]
    fan_out = playbook.step("fan_out")
    assert fan_out.tool is None and fan_out.pipeline is None  # a pure router
    assert fan_out.router.mode == "inclusive"  # spec.next_mode
    assert [a.target for a in fan_out.router.arcs] == ["report", "audit"]
    assert playbook.step("audit").router.arcs == []  # a terminal step


def test_exclusive_then_list_runs_its_first_entry_only() -> None:
    """The CLI routes a `then` list with the step's mode: under `exclusive` its first entry runs,
    so each entry is a group of its own; under `inclusive` they fire together."""
    text = _local(
        """
  - step: start
    tool: {kind: noop}
    spec: {next_mode: MODE}
    next:
      - when: "{{ workload.go }}"
        then: [a, b]
  - step: a
  - step: b
"""
    )
    exclusive = check_text(text.replace("MODE", "exclusive"), "x.yaml").playbook.step("start")
    inclusive = check_text(text.replace("MODE", "inclusive"), "x.yaml").playbook.step("start")
    assert [a.group for a in exclusive.router.arcs] == [0, 1]
    assert exclusive.router.mode == "exclusive"
    assert [a.group for a in inclusive.router.arcs] == [0, 0]


def _local(steps: str) -> str:
    return (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t}\n"
        "executor: {profile: local}\nworkload: {go: true}\nworkflow:" + steps
    )


def test_python_convention_and_real_syntax_errors() -> None:
    """NoETL 5 runs the code as a function body: `return` is fine, a real syntax error is still
    C501 at its own line."""
    base = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t, exposes_as_mcp: true}\n"
        "workflow:\n  - step: start\n    tool:\n      kind: python\n      code: |\n"
    )
    good = check_text(
        base + "        x = input_data.get('a')\n        return {'x': x, 'n': args}\n"
    )
    assert good.playbook.generation == "noetl5"
    assert "C501" not in _codes(good)
    bad = check_text(base + "        x = 1\n        return {'x': x\n")
    c501 = [d for d in bad.diagnostics if d.code == "C501"]
    assert len(c501) == 1 and c501[0].position.line == 10, c501
    assert "'return' outside function" not in c501[0].message


def test_nested_call_to_a_missing_file_is_r204_with_the_resolved_path(tmp_path: Path) -> None:
    parent = tmp_path / "parent.yaml"
    parent.write_text(
        _local("\n  - step: start\n    tool: {kind: playbook, path: ./missing.yaml}\n"),
        encoding="utf-8",
    )
    (result,), _ = check_paths([str(parent)])
    r204 = [d for d in result.diagnostics if d.code == "R204"]
    assert len(r204) == 1
    assert str(tmp_path / "missing.yaml") in r204[0].message
    assert r204[0].position.line == 8  # the `path` value


_TYPO_BASE = [
    "apiVersion: noetl.io/v2",
    "kind: Playbook",
    "metadata: {name: t, path: t}",
    "workflow:",
    "  - step: start",
    "    tool: {kind: noop}",
    "    next: {spec: {on_no_match: quiet}, arcs: [{step: done}]}",
    "  - step: done",
]


@pytest.mark.parametrize(
    ("where", "fragment", "word", "suggestion"),
    [
        (
            "metadata",
            "metadata: {name: t, path: t, exposes_as_mpc: true}",
            "exposes_as_mpc",
            "exposes_as_mcp",
        ),
        (
            "executor",
            "executor: {profile: auto, spec: {final_stp: done}}",
            "final_stp",
            "final_step",
        ),
        (
            "next",
            "    next: {spec: {on_no_mach: quiet}, arcs: [{step: done}]}",
            "on_no_mach",
            "on_no_match",
        ),
        (
            "done",
            "    loop: {in: '{{ [1] }}', iterator: i, spec: {frame: {lease_second: 5}}}",
            "lease_second",
            "lease_seconds",
        ),
        ("done", "    tool: {kind: noop, output: {selct: []}}", "selct", "select"),
        ("done", "    spec: {policy: {admitt: {}}}", "admitt", "admit"),
    ],
)
def test_typos_in_noetl5_keys_are_positioned_with_a_suggestion(
    where: str, fragment: str, word: str, suggestion: str
) -> None:
    lines = list(_TYPO_BASE)
    if where == "metadata":
        lines[2] = fragment
    elif where == "executor":
        lines.insert(3, fragment)
    elif where == "next":
        lines[6] = fragment
    else:
        lines.append(fragment)
    text = "\n".join(lines) + "\n"
    result = check_text(text, "typo.yaml", dialect="noetl5")
    found = [d for d in result.diagnostics if d.code == "S103" and word in d.message]
    assert len(found) == 1, [d.message for d in result.diagnostics]
    line = next(i for i, t in enumerate(lines, 1) if word in t)
    assert found[0].position.line == line
    assert found[0].position.col == lines[line - 1].index(word) + 1
    assert f"did you mean {suggestion!r}" in found[0].message


def test_every_schema_property_is_known_to_the_reader() -> None:
    """Each property of each object of NoETL's schema is in the key set the reader checks that
    object against; the recorded objects are exactly the schema's."""
    assert set(SCHEMA["objects"]) == set(SCHEMA_READ)
    missing = [
        f"{obj}.{key}"
        for obj, keys in SCHEMA["objects"].items()
        for key in keys
        if key not in SCHEMA_READ[obj]
    ]
    assert not missing, f"schema keys the reader does not know: {missing}"
    for entry in NOT_EXECUTED:  # no stale reason: each names a schema key (or the local guard)
        obj, key = entry.split(".")
        assert key in SCHEMA["objects"].get(obj, []) or entry == "Step.when", entry


def _paths(value, prefix: str = "") -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            found.add(path)
            found |= _paths(item, path)
    elif isinstance(value, list):
        for item in value:
            found |= _paths(item, prefix + "[]")
    return found


def test_schema_keys_playbook_uses_every_schema_path_and_each_is_read_or_reported() -> None:
    """schema_keys.yaml holds every property path of the schema; checking it gives no unknown-key
    or foreign-form diagnostic, and an S116 for each key the Airflow runtime does not execute."""
    text = (PLAYBOOKS / "schema_keys.yaml").read_text(encoding="utf-8")
    used = _paths(yaml.safe_load(text))
    missing = sorted(set(SCHEMA["paths"]) - used)
    assert not missing, f"schema paths the test playbook does not use: {missing}"
    result = check_text(text, str(PLAYBOOKS / "schema_keys.yaml"))
    assert not {"S103", "S114"} & set(_codes(result))
    reported = {d.message.split("`")[1] for d in result.diagnostics if d.code == "S116"}
    expected = {entry.split(".")[1] for entry in NOT_EXECUTED if entry != "Step.when"}
    # Reported only for the value the runtime does not follow: `no_next_is_error: true` and
    # `on_no_match: quiet` (the file holds false and `complete`, which is the runtime's behaviour).
    expected -= {"no_next_is_error", "on_no_match"}
    assert expected <= reported, sorted(expected - reported)


def test_other_document_kinds_are_skipped_with_a_note() -> None:
    for name, kind in (("orders.subscription.yaml", "Subscription"), ("tools.mcp.yaml", "Mcp")):
        result = read_file(str(PLAYBOOKS / name))
        assert result.playbook is None and not result.has_errors
        (note,) = result.diagnostics
        assert note.code == "E003" and f"kind: {kind}" in note.message
        assert note.position.line == 3


def test_detection_needs_a_marker_or_a_construct_only_noetl5_reads() -> None:
    """The generations share apiVersion and shape: only a NoETL 5 marker, or a construct only
    NoETL 5 reads (below and test_a_construct_only_noetl5_reads_decides_...), makes a file
    NoETL 5."""
    plain = {"apiVersion": "noetl.io/v2", "workflow": [{"step": "start", "tool": {"kind": "noop"}}]}
    assert detect_dialect(plain) == "canonical"
    assert detect_dialect({**plain, "executor": {"profile": "local"}}) == "noetl5"
    assert detect_dialect({**plain, "executor": {"profile": "auto"}}) == "canonical"
    assert detect_dialect({**plain, "metadata": {"exposes_as_mcp": True}}) == "noetl5"
    piped = {
        "apiVersion": "noetl.io/v2",
        "workflow": [{"step": "start", "tool": [{"kind": "noop", "set": {"x": 1}}]}],
    }
    assert detect_dialect(piped) == "noetl5"
    scoped = {
        "apiVersion": "noetl.io/v2",
        "workflow": [{"step": "start", "tool": [{"kind": "noop", "set": {"ctx.x": 1}}]}],
    }
    assert detect_dialect(scoped) == "canonical"
    by_file = {
        "apiVersion": "noetl.io/v2",
        "workflow": [{"step": "start", "tool": {"kind": "playbook", "path": "./child.yaml"}}],
    }
    assert detect_dialect(by_file) == "noetl5"
    by_catalog = {
        "apiVersion": "noetl.io/v2",
        "workflow": [{"step": "start", "tool": {"kind": "playbook", "path": "tests/child"}}],
    }
    assert detect_dialect(by_catalog) == "canonical"
    # Values of any shape: a list as a kind is the reader's S102, never a crash of detection.
    odd = {"apiVersion": "noetl.io/v2", "workflow": [{"step": "s", "tool": {"kind": []}}]}
    assert detect_dialect(odd) == "canonical"


def test_unreachable_step_of_a_local_playbook_names_the_target_step_run() -> None:
    text = _local(
        "\n  - step: start\n    tool: {kind: noop}\n  - step: status\n    tool: {kind: noop}\n"
    )
    result = check_text(text, "local.yaml")
    (f401,) = [d for d in result.diagnostics if d.code == "F401"]
    assert f401.position.line == 9  # `- step: status`
    assert "target step" in f401.message


def test_cli_dialect_noetl5_reads_a_file_without_markers_as_noetl5(tmp_path: Path, capsys) -> None:
    """A NoETL 5 playbook with no marker: its top-level `return` makes it NoETL 5 (S119, info);
    `--dialect canonical` forces the April reading, which rejects the `return` (C501), and
    `--dialect noetl5` reads it as NoETL 5 runs it."""
    from noetl_compile.cli import main

    path = tmp_path / "plain.yaml"
    path.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: plain, path: plain}\n"
        "workflow:\n  - step: start\n    tool:\n      kind: python\n      code: |\n"
        "        return {'n': len(input_data)}\n",
        encoding="utf-8",
    )
    assert main(["check", str(path)]) == 0
    assert "S119 [info] read as NoETL 5" in capsys.readouterr().out
    assert main(["check", str(path), "--quiet", "--dialect", "canonical"]) == 1
    assert "C501" in capsys.readouterr().out
    assert main(["check", str(path), "--quiet", "--dialect", "noetl5"]) == 0
    assert capsys.readouterr().out == ""


def test_local_dialect_routing_runs_on_airflow(tmp_path_factory) -> None:
    """`noetlc run` on a real local Airflow: vars from the step result, the `{when, then}` list
    (first match only), the arc's args, a tool-less inclusive router and terminal step."""
    pytest.importorskip("airflow")
    from tests.harness.run_cli import noetlc_run, report_of

    home = tmp_path_factory.mktemp("noetl5-run-home")
    result = noetlc_run(home, PLAYBOOKS / "local_run.yaml", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    steps = report_of(result)["steps"]
    assert {name: step["state"] for name, step in steps.items()} == {
        "begin": "success",
        "broken": "skipped",
        "dev": "skipped",
        "staging": "success",
        "router": "success",
        "left": "success",
        "right": "success",
    }
    # NoETL 5's noop result (noetl/tools noop.rs:60).
    assert steps["begin"]["result"] == {"status": "ok", "message": "noop"}
    assert steps["left"]["result"] == {"status": "ok", "message": "noop"}
    assert steps["router"]["result"] is None and steps["right"]["result"] is None


def test_python_convention_task_set_and_filters_run_on_airflow(tmp_path_factory) -> None:
    """`noetlc run` on a real local Airflow: NoETL 5's python convention (a top-level `return`
    reading `input_data`/`args`), a pipeline task's `set` name read by the next task, `main`,
    printed output as the result, and the filters NoETL 5's renderers add."""
    pytest.importorskip("airflow")
    from tests.harness.run_cli import noetlc_run, report_of

    home = tmp_path_factory.mktemp("noetl5-python-home")
    result = noetlc_run(home, PLAYBOOKS / "python_run.yaml", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    steps = report_of(result)["steps"]
    assert {name: step["state"] for name, step in steps.items()} == dict.fromkeys(
        ("start", "with_main", "printed", "end"), "success"
    )
    start = steps["start"]["result"]
    # NoETL 5's pipeline result: the task results by label, flat (task_sequence.rs:838).
    assert start["split_names"] == {
        "names": ["alpha", "beta", "gamma"],
        "count": 3,
        "same": True,
    }
    assert start["describe"] == {
        "count": 3,  # `extracted`, the first task's `set`
        "first": "alpha",
        "keys": ["mode", "depth"],
        "values": ["fast", 2],
        "mode": "fast",
        "missing": "unset",
        "width": 3,
    }
    assert steps["with_main"]["result"] == {"doubled": 6, "rest": {"label": "main"}}
    assert steps["printed"]["result"] == {"stdout": "doubled is 6\n", "stderr": ""}


def test_now_is_no_function_of_noetl5_and_check_says_so() -> None:
    """NoETL 5's renderers (minijinja, noetl/server and noetl/tools) register filters and no
    functions: `{{ now() }}` fails there, so check does not accept it as NoETL 5's."""
    text = _local("\n  - step: start\n    tool: {kind: shell, cmds: ['echo {{ now() }}']}\n")
    result = check_text(text, "now.yaml")
    (found,) = [d for d in result.diagnostics if "'now'" in d.message]
    assert found.code == "T302" and found.position.line == 8
    assert "define no such function" in found.hint


def test_final_step_is_routed_to_where_each_branch_ends() -> None:
    """`executor.spec.final_step`: a step without arcs and an exclusive router (after its own
    arcs) route to the final step; its own branch and inclusive routers do not."""
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t}\n"
        "executor: {profile: local, spec: {final_step: cleanup}}\nworkload: {go: true}\n"
        "workflow:\n"
        "  - step: start\n    tool: {kind: noop}\n"
        "    next: {arcs: [{step: a, when: '{{ workload.go }}'}]}\n"
        "  - step: a\n    tool: {kind: noop}\n"
        "    next: {spec: {mode: inclusive}, arcs: [{step: b, when: '{{ workload.go }}'}]}\n"
        "  - step: b\n    tool: {kind: noop}\n"
        "  - step: cleanup\n    tool: {kind: noop}\n    next: {arcs: [{step: after}]}\n"
        "  - step: after\n    tool: {kind: noop}\n"
    )
    result = check_text(text, "final.yaml")
    assert not _errors(result) and "S116" not in _codes(result)
    playbook = result.playbook

    def targets(name: str) -> list[tuple[str, int, bool]]:
        return [(a.target, a.group, a.when is None) for a in playbook.step(name).router.arcs]

    assert targets("start") == [("a", 0, False), ("cleanup", 1, True)]
    assert targets("a") == [("b", 0, False)]  # inclusive: an extra arc would always fire
    assert targets("b") == [("cleanup", 0, True)]
    assert targets("cleanup") == [("after", 0, True)]
    assert targets("after") == []  # the final step's own branch does not loop back


def test_local_case_blocks_route_before_next_and_report_what_does_not_run() -> None:
    """The CLI's `case` blocks: the first matching case's `then.next` steps (exclusive), else
    `next`; a Rhai condition, an `else` branch and a `pipe` block are S116 at their key."""
    text = _local(
        "\n  - step: start\n    tool: {kind: noop}\n    case:\n"
        "      - when: '{{ workload.go }}'\n        then: {next: [{step: a}]}\n"
        "      - rhai: 'true'\n        then: {next: b}\n"
        "      - when: '{{ not workload.go }}'\n        then: {next: [b], pipe: {}}\n"
        "        else: [{step: a}]\n"
        "    next: [{step: b}]\n  - step: a\n  - step: b\n"
    )
    result = check_text(text, "case.yaml")
    assert not _errors(result) and "S114" not in _codes(result)
    start = result.playbook.step("start")
    assert start.router.mode == "exclusive"
    assert [(a.target, a.group, a.when) for a in start.router.arcs] == [
        ("a", 0, "{{ workload.go }}"),
        ("b", 1, "{{ not workload.go }}"),
        # the third case's `else` (a) with `next` (b), both unguarded: they fire together
        ("a", 2, None),
        ("b", 2, None),
        ("a", 3, None),
        ("b", 4, None),
    ]
    s116 = {
        (d.position.line, d.message.split("`")[1]) for d in result.diagnostics if d.code == "S116"
    }
    assert s116 == {(12, "rhai"), (15, "pipe")}


def test_case_else_runs_the_first_else_step_and_next_and_stops_the_cases() -> None:
    """The CLI's `else` (noetl/cli playbook_runner.rs; compared live in
    tests/noetl5/playbooks/route_case_else.yaml): once a case's `when` fails, the first `else`
    step whose `when` holds and the first matching `next` arc both run; later cases are never
    evaluated. Exclusive groups in order: each (else, next) pair guarded by both, each else
    step alone, each next arc alone."""
    text = _local(
        "\n  - step: start\n    tool: {kind: noop}\n    case:\n"
        "      - when: '{{ not workload.go }}'\n        then: {next: [{step: a}]}\n"
        "        else:\n          - {step: b, when: '{{ workload.go }}'}\n          - c\n"
        "      - when: '{{ true }}'\n        then: {next: [{step: late}]}\n"
        "    next: [{step: d, when: '{{ workload.go == 2 }}'}, {step: e}]\n"
        "  - step: a\n  - step: b\n  - step: c\n  - step: d\n  - step: e\n  - step: late\n"
    )
    result = check_text(text, "else.yaml")
    assert not _errors(result) and "S116" not in _codes(result)
    start = result.playbook.step("start")
    assert start.router.mode == "exclusive"
    both = "{{ (workload.go) and (workload.go == 2) }}"
    assert [(a.target, a.group, a.when) for a in start.router.arcs] == [
        ("a", 0, "{{ not workload.go }}"),
        ("b", 1, both),
        ("d", 1, both),
        ("b", 2, "{{ workload.go }}"),
        ("e", 2, "{{ workload.go }}"),
        ("b", 3, "{{ workload.go }}"),
        ("c", 4, "{{ workload.go == 2 }}"),
        ("d", 4, "{{ workload.go == 2 }}"),
        ("c", 5, None),
        ("e", 5, None),
        ("c", 6, None),
        ("d", 7, "{{ workload.go == 2 }}"),
        ("e", 8, None),
    ]
    # `late` is never routed to: the CLI stops at the case with `else`.
    assert any(d.code == "F401" and "'late'" in d.message for d in result.diagnostics)


def test_c515_is_said_once_per_kind_and_file_with_what_the_kind_needs() -> None:
    """NoETL 5 projects use many engine-only kinds: C515 once per kind and file, at its first
    use, counting the others, with what would make it run (a provider's hook, or NoETL)."""
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: c, path: c, exposes_as_mcp: "
        "false}\nworkflow:\n"
        "  - step: start\n    tool: {kind: snowflake, command: 'select 1'}\n"
        "    next: {arcs: [{step: b}]}\n"
        "  - step: b\n    tool: {kind: snowflake, command: 'select 2'}\n"
        "    next: {arcs: [{step: c}]}\n"
        "  - step: c\n    tool: {kind: agent}\n"
    )
    found = [d for d in check_text(text, "c515.yaml").diagnostics if d.code == "C515"]
    assert [(d.position.line, d.position.col) for d in found] == [(6, 18), (12, 18)]
    assert "'snowflake' (step 'start' and 1 more in this file)" in found[0].message
    assert "SnowflakeHook" in found[0].hint
    assert "run this playbook on NoETL" in found[1].hint
    # The older generations keep one C515 per site.
    older = text.replace(", exposes_as_mcp: false", "")
    assert sum(d.code == "C515" for d in check_text(older, "c515.yaml").diagnostics) == 3


def test_keys_no_noetl5_engine_acts_on_are_s116_at_their_position_with_the_reason() -> None:
    """policies_run.yaml: each key NoETL 5's engines do not act on (noetl/server, noetl/worker,
    noetl/cli) is S116 at its key, the reason naming that; a store kind that needs an outside
    service names the service at its value; `on_no_match: complete` is read with its meaning."""
    path = PLAYBOOKS / "policies_run.yaml"
    lines = path.read_text(encoding="utf-8").splitlines()
    result = check_text("\n".join(lines) + "\n", str(path))
    assert not _errors(result)
    found = {(d.position.line, d.position.col): d.message for d in result.diagnostics}
    assert {d.code for d in result.diagnostics} == {"S116"}

    def at(text: str) -> tuple[int, int]:
        line = next(i for i, t in enumerate(lines, 1) if t.strip().startswith(text))
        return line, lines[line - 1].index(text) + 1

    for key, says in (
        ("admit:", "no NoETL 5 engine evaluates admission"),
        ("as: summary", "no NoETL 5 engine binds the name"),
        ("select:", "noetl/worker and noetl/cli do not read `tool.output`"),
        ("scope:", "noetl/worker and noetl/cli do not read `tool.output`"),
        ("store:", "noetl/worker and noetl/cli do not read it"),
    ):
        assert says in found.pop(at(key)), key
    kv_line, _ = at("store:")
    kv = found.pop((kv_line, lines[kv_line - 1].index("kv") + 1))
    assert "`output.store.kind: kv`" in kv and "NATS JetStream key-value bucket" in kv
    exec_line, _ = at("policy: {exec")
    assert "drops `loop.spec.policy`" in found.pop(
        (exec_line, lines[exec_line - 1].index("exec") + 1)
    )
    assert not found, found  # nothing else: `on_no_match: complete` and max_in_flight run


def test_on_no_match_quiet_is_reported_and_complete_is_not() -> None:
    text = "\n".join(_TYPO_BASE).replace("quiet", "VALUE") + "\n"
    quiet = check_text(text.replace("VALUE", "quiet"), "q.yaml", dialect="noetl5")
    (s116,) = [d for d in quiet.diagnostics if d.code == "S116"]
    assert (s116.position.line, s116.position.col) == (7, 19)
    assert "NoETL 5's engines do not read it" in s116.message
    assert "which is `complete`" in s116.message
    complete = check_text(text.replace("VALUE", "complete"), "c.yaml", dialect="noetl5")
    assert not [d for d in complete.diagnostics if d.code == "S116"]
    assert complete.playbook.step("start").router.on_no_match == "complete"


def test_policies_run_on_airflow(tmp_path_factory) -> None:
    """`noetlc run` on a real local Airflow: the keys reported S116 change nothing (the whole
    result, not a `select`ed path, under the step's name), a templated `max_in_flight` of 2 runs
    two iterations at once and never more (from the iterations' event timestamps), and a router
    with `on_no_match: complete` none of whose arcs matches completes the run."""
    pytest.importorskip("airflow")

    from airflow_plugin.events.projection import in_flight_peak
    from tests.harness.run_cli import loop_timeline, noetlc_run, report_of

    home = tmp_path_factory.mktemp("noetl5-policies-home")
    result = noetlc_run(home, PLAYBOOKS / "policies_run.yaml", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = report_of(result)
    steps = report["steps"]
    assert {name: step["state"] for name, step in steps.items()} == {
        "start": "success",
        "square": "success",
        "report": "success",
        "never": "skipped",
    }
    assert steps["start"]["result"] == {"total": 10, "count": 4}
    square = steps["square"]["result"]
    assert square["results"] == [{"square": n * n} for n in (1, 2, 3, 4)]
    assert square["stats"] == {"total": 4, "success": 4, "failed": 0}
    assert steps["report"]["result"] == {"total": 10}
    rows = loop_timeline(home, report["execution_id"])
    assert in_flight_peak(rows, "square") == 2


def test_a_python_failure_has_noetl5s_shape_and_routes_by_its_error_arc(tmp_path_factory) -> None:
    """`noetlc run` on a real local Airflow: the raised exception is NoETL 5's process result
    (exit code 1, printed stdout, the traceback on stderr), the `call.error` arc routes it and
    the handler reads those fields; the run ends failed, as a canonical run with a failed call
    does (the outcome task)."""
    pytest.importorskip("airflow")
    from tests.harness.run_cli import noetlc_run, report_of

    home = tmp_path_factory.mktemp("noetl5-pyerror-home")
    result = noetlc_run(home, PLAYBOOKS / "python_error_run.yaml", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    steps = report_of(result)["steps"]
    assert {name: step["state"] for name, step in steps.items()} == {
        "start": "failed",
        "handled": "success",
        "fine": "skipped",
    }
    start = steps["start"]["result"]
    assert (start["status"], start["exit_code"], start["stdout"]) == ("error", 1, "checking 3\n")
    assert start["stderr"].startswith("Traceback (most recent call last):")
    assert start["stderr"].endswith("ValueError: limit too small\n")
    assert "airflow_plugin" not in start["stderr"]
    assert steps["handled"]["result"] == {
        "code": 1,
        "printed": "checking 3\n",
        "says": True,
        "status": "error",
    }


def test_a_loop_steps_when_guards_the_loop_and_a_cursor_loops_is_reported(tmp_path: Path) -> None:
    """A loop step's `when` is evaluated by the loop's head (false: the loop and its branch are
    skipped; compared live in tests/noetl5/playbooks/route_loop_when.yaml); a cursor loop's
    head does not evaluate it: S116 at the key, naming what to do instead."""
    text = _local(
        "\n  - step: start\n    tool: {kind: noop}\n    next: [{step: gated}, {step: drain}]\n"
        "  - step: gated\n    when: '{{ workload.go }}'\n"
        "    loop: {in: '{{ [1, 2] }}', iterator: it}\n    tool: {kind: noop}\n"
        "  - step: drain\n    when: '{{ workload.go }}'\n"
        "    loop:\n      cursor: {kind: postgres, auth: pg, claim: 'select 1'}\n"
        "      iterator: row\n      spec: {mode: cursor}\n    tool: {kind: noop}\n"
    )
    path = tmp_path / "loop_when.yaml"
    path.write_text(text, encoding="utf-8")
    result = read_file(str(path))
    assert not _errors(result)
    assert result.playbook.step("gated").guard == "{{ workload.go }}"
    assert result.playbook.step("drain").guard is None
    (s116,) = [d for d in result.diagnostics if d.code == "S116"]
    assert (s116.position.line, s116.position.col) == (15, 5)  # `when` of `drain`
    assert "cursor loop" in s116.message and "guard the arc" in s116.message
    (checked,), _ = check_paths([str(path)])
    compiled, _ = compile_result(checked, path.name)
    assert '"guard": "{{ workload.go }}"' in compiled


# One file per construct, no marker; (line of the construct, what the April engine says there).
_HEAD = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t}\nworkflow:\n"
_END = "        - step: end\n  - step: end\n    tool: {kind: noop}\n"
CONSTRUCTS = {
    "when": (
        "  - step: start\n    when: '{{ 1 > 2 }}'\n    tool: {kind: noop}\n"
        "    next:\n      arcs:\n" + _END,
        (6, 5),
        "S114",
    ),
    "args": (
        "  - step: start\n    args: {n: 3}\n    tool: {kind: noop}\n"
        "    next:\n      arcs:\n" + _END,
        (6, 5),
        "S114",
    ),
    "return": (
        "  - step: start\n    tool:\n      kind: python\n      code: |\n"
        "        n = len(args)\n        return {'n': n}\n"
        "    next:\n      arcs:\n" + _END,
        (8, 7),
        "C501",
    ),
    "label form": (
        "  - step: start\n    tool:\n      - fetch: {kind: noop}\n    next:\n      arcs:\n" + _END,
        (7, 9),
        "S102",
    ),
    "next_mode": (
        "  - step: start\n    spec: {next_mode: inclusive}\n    tool: {kind: noop}\n"
        "    next: [{step: end}]\n  - step: end\n    tool: {kind: noop}\n",
        (6, 12),
        "S114",
    ),
    # Alone, a `next` list target's `args` is case-v2's form (read so); beside a canonical mark
    # (a scoped `set`) it is NoETL 5's NextSpec::Targets.
    "next target args": (
        "  - step: start\n    tool: {kind: noop}\n    set: {ctx.x: 1}\n"
        "    next: [{step: end, args: {n: 1}}]\n  - step: end\n    tool: {kind: noop}\n",
        (8, 24),
        "S114",
    ),
    "tool key": (
        "  - step: start\n    tool: {kind: postgres, host: db.internal, command: select 1}\n"
        "    next:\n      arcs:\n" + _END,
        (6, 28),
        "C503",  # NoETL 5's postgres connects by `host`; the April one needs `auth`
    ),
}


@pytest.mark.parametrize("construct", sorted(CONSTRUCTS))
def test_a_construct_only_noetl5_reads_decides_and_s118_says_so_at_it(construct: str) -> None:
    """Without --dialect, a file whose only NoETL 5 mark is the construct is read as NoETL 5 and
    checks clean, with S119 (info) at the construct; `--dialect canonical` still forces the April
    engine's reading, which rejects it (the false reject this detection removes)."""
    body, (line, col), april = CONSTRUCTS[construct]
    result = check_text(_HEAD + body, "t.yaml")
    assert result.playbook.generation == "noetl5"
    assert [(d.code, d.position.line, d.position.col) for d in result.diagnostics] == [
        ("S119", line, col)
    ]
    assert "read as NoETL 5" in result.diagnostics[0].message
    forced = check_text(_HEAD + body, "t.yaml", dialect="canonical")
    assert forced.playbook.generation is None
    assert april in {d.code for d in forced.diagnostics}, _codes(forced)
    assert "S119" not in _codes(forced)


def test_server_forms_check_clean_and_the_april_engine_rejects_them() -> None:
    (result,), _ = check_paths([str(SERVER_FORMS / "forms_run.yaml")])
    assert result.playbook.generation == "noetl5"
    assert [(d.code, d.position.line) for d in result.diagnostics] == [("S119", 26)]
    piped = result.playbook.step("piped")
    assert [task.name for task in piped.pipeline] == ["double", "label"]
    assert result.playbook.step("with_args").input == {"n": 3, "unit": "km"}
    (forced,), _ = check_paths([str(SERVER_FORMS / "forms_run.yaml")], dialect="canonical")
    # D901: read as the April engine's, step 'piped' (NoETL 5's label-form pipeline, S114) has
    # no tool it knows, so it is a tool-less router there.
    assert _codes(forced) == Counter({"S114": 3, "C501": 3, "S102": 2, "T301": 1, "D901": 1})


def test_server_forms_run_on_airflow(tmp_path_factory) -> None:
    """`noetlc run` on a real local Airflow: a false step `when` skips the step and the walk goes
    on along its arc (NoETL 5's server), a true one runs it; step `args` reach the python tool;
    the label form names the pipeline task; the workload's `{{ }}` stays text."""
    pytest.importorskip("airflow")
    from tests.harness.run_cli import noetlc_run, report_of

    (checked,), _ = check_paths([str(SERVER_FORMS / "forms_run.yaml")])
    compiled, _ = compile_result(checked, "forms_run.yaml")
    assert '"guard_walks_on": True' in compiled
    home = tmp_path_factory.mktemp("noetl5-forms-home")
    result = noetlc_run(home, SERVER_FORMS / "forms_run.yaml", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = report_of(result)
    steps = report["steps"]
    assert {name: step["state"] for name, step in steps.items()} == dict.fromkeys(
        ("start", "gated", "with_args", "piped", "unguarded", "end"), "success"
    )
    assert steps["gated"]["result"] is None  # skipped: its code never ran
    assert steps["with_args"]["result"] == {"n": 6, "unit": "km"}
    # By label (task_sequence.rs:838); the bare noop task's result is NoETL 5's (noop.rs:60).
    assert steps["piped"]["result"] == {
        "double": {"x": 42},
        "label": {"status": "ok", "message": "noop"},
    }
    assert steps["unguarded"]["result"] == {"ran": True}
    assert report["ctx"]["letter"] == "Dear {{ customer | }},"


def test_a_next_list_routes_by_next_mode_and_passes_target_args_on_airflow(tmp_path_factory):
    """NoETL 5's server routes a `next` list of `{step, when, args}` targets by the step's
    `spec.next_mode` (evaluator.rs evaluate_next_transitions): `inclusive` starts every matching
    target, and a target's `args` reach the step it starts."""
    pytest.importorskip("airflow")
    from tests.harness.run_cli import noetlc_run, report_of

    (checked,), _ = check_paths([str(SERVER_FORMS / "next_mode_run.yaml")])
    assert [(d.code, d.position.line) for d in checked.diagnostics] == [("S119", 14)]
    assert checked.playbook.step("start").router.mode == "inclusive"
    home = tmp_path_factory.mktemp("noetl5-next-mode-home")
    result = noetlc_run(home, SERVER_FORMS / "next_mode_run.yaml", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    steps = report_of(result)["steps"]
    assert {name: step["state"] for name, step in steps.items()} == {
        "start": "success",
        "left": "success",
        "right": "success",
        "never": "skipped",
    }
    assert steps["left"]["result"] == {"side": "L"}


_ARGS_BESIDE = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: t}
workflow:
  - step: start
    args: {n: 9}
    tool: {kind: python, TOOL_ARGS code: "return {'n': n}"}
"""


def test_step_args_beside_a_tools_own_args_is_s125_at_the_step_args() -> None:
    """NoETL 5 drops the step's `args` when the tool declares its own (worker command.rs:612);
    noetlc lays them over: a warning at the step's `args`, naming the semantics row."""
    beside = check_text(_ARGS_BESIDE.replace("TOOL_ARGS", "args: {n: 1},"))
    found = [d for d in beside.diagnostics if d.code == "S125"]
    assert len(found) == 1 and found[0].severity == 2, beside.diagnostics
    assert found[0].position.line == 6
    assert "Step `args` beside a tool's own `args` on NoETL 5" in found[0].message
    assert "Step `args` beside a tool's own `args` on NoETL 5" in (
        ROOT / "docs" / "semantics.md"
    ).read_text(encoding="utf-8")
    assert not _errors(beside)
    # Step args alone reach the tool on both engines: nothing to say.
    alone = check_text(_ARGS_BESIDE.replace("TOOL_ARGS", ""))
    assert "S125" not in _codes(alone), alone.diagnostics


_WAITING_CALL = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: waits, path: tests/noetl5/waits}
workflow:
  - step: start
    tool: {kind: playbook, path: tests/noetl5/child, return_result: true POLL}
"""


def test_poll_interval_is_the_child_waits_poke_interval(tmp_path: Path) -> None:
    """playbook.rs:402: a waiting call looks at its child every `poll_interval` seconds (at
    least 1); deployed that is the deferred wait's poke interval. No S116 for it any more."""
    pytest.importorskip("airflow")
    from tests.test_compiles_imports import _dagbag

    intervals = {}
    for name, poll in (
        ("given", ", poll_interval: 1"),
        ("zero", ", poll_interval: 0"),
        ("none", ""),
    ):
        folder = tmp_path / name
        folder.mkdir()
        source = folder / "waits.yaml"
        source.write_text(_WAITING_CALL.replace("POLL", poll), encoding="utf-8")
        result = check_text(source.read_text(), str(source), dialect="noetl5")
        assert not _errors(result) and "S116" not in _codes(result), result.diagnostics
        text, _ = compile_result(result, "waits.yaml")
        (folder / "waits.py").write_text(text, encoding="utf-8")
        bag = _dagbag(folder)
        assert not bag.import_errors, bag.import_errors
        intervals[name] = bag.dags["tests.noetl5.waits"].get_task("start").poke_interval
    # Without the key: the operator's own 5 s (Airflow's 60 s would delay every nested call).
    assert intervals == {"given": 1, "zero": 1, "none": 5}
