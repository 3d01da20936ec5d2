"""NoETL 5, the current generation of the canonical dialect, and its local dialect.

The playbooks under tests/noetl5_dsl/playbooks/ are ours, one or more per construct NoETL 5
added; they check with no error, compile and import. The same files read as the April 2026
generation (`--dialect canonical`) get that engine's verdicts, which are the false rejects this
generation must not repeat (their runs on Airflow: test_noetl5_dsl_runs.py).
tests/noetl5_dsl/schema_paths.json records the property paths of NoETL's playbook JSON Schema
(noetl/noetl@3badb77a); every one must be known to the reader.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from noetl_compile.check import check_paths, check_text, read_file
from noetl_compile.compile import compile_result
from tests.noetl5_dsl_support import (
    PLAYBOOKS,
    ROOT,
    SERVER_FORMS,
    code_counts,
    error_lines,
)


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
        assert not error_lines(result), (name, error_lines(result))
        if name.endswith((".subscription.yaml", ".mcp.yaml")):
            assert result.playbook is None
            assert [d.code for d in result.diagnostics] == ["E003"]
            continue
        assert result.playbook.dialect == "canonical"
        assert result.playbook.generation == "noetl5", name
        # Nothing of NoETL 5's vocabulary is an unknown key, a foreign form or an unknown name.
        unexpected = {"S103", "S107", "S110", "S114", "T302", "T304", "T307", "C501", "C503"}
        assert not unexpected & set(code_counts(result)), (name, code_counts(result))
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
        found = set(code_counts(before))
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
    assert "C501" not in code_counts(good)
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
    assert not error_lines(result) and "S116" not in code_counts(result)
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
    assert not error_lines(result) and "S114" not in code_counts(result)
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
    assert not error_lines(result) and "S116" not in code_counts(result)
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
    assert not error_lines(result)
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
    assert not error_lines(result)
    assert result.playbook.step("gated").guard == "{{ workload.go }}"
    assert result.playbook.step("drain").guard is None
    (s116,) = [d for d in result.diagnostics if d.code == "S116"]
    assert (s116.position.line, s116.position.col) == (15, 5)  # `when` of `drain`
    assert "cursor loop" in s116.message and "guard the arc" in s116.message
    (checked,), _ = check_paths([str(path)])
    compiled, _ = compile_result(checked, path.name)
    assert '"guard": "{{ workload.go }}"' in compiled


# One file per construct, no marker; (line of the construct, what the April engine says there).
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
    assert code_counts(forced) == Counter({"S114": 3, "C501": 3, "S102": 2, "T301": 1, "D901": 1})


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
    assert not error_lines(beside)
    # Step args alone reach the tool on both engines: nothing to say.
    alone = check_text(_ARGS_BESIDE.replace("TOOL_ARGS", ""))
    assert "S125" not in code_counts(alone), alone.diagnostics
