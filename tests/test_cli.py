"""The `noetlc` command line: exit codes, formats, selection, explain, and the import boundary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from noetl_compile.cli import main
from noetl_compile.rules import RULES

ROOT = Path(__file__).resolve().parents[1]

VALID = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: ok, path: tests/ok}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""
BROKEN = VALID.replace("{step: end}", "{step: ned}").replace("result = 1", "result = 1")
WARNING_ONLY = VALID.replace(
    "    tool: {kind: noop}\n", "    tool: {kind: noop}\n    descr: the end\n"
)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "ok.yaml").write_text(VALID)
    (tmp_path / "broken.yaml").write_text(BROKEN)
    (tmp_path / "warn.yaml").write_text(WARNING_ONLY)
    return tmp_path


def run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr()


def test_clean_file_exits_zero(files, capsys):
    code, out = run(capsys, "check", str(files / "ok.yaml"))
    assert code == 0
    assert out.out == "All checks passed: 1 playbook.\n"


def test_an_in_process_caller_gets_its_garbage_collector_back(files, capsys, tmp_path):
    """The CLI turns the cyclic collector off while it runs; a test or a bench that calls it and
    then runs DAGs must not keep it off (uncollected asyncio tasks made every later run slower)."""
    import gc

    assert gc.isenabled()
    assert main(["check", str(files / "ok.yaml")]) == 0
    assert gc.isenabled()
    assert main(["compile", str(files / "ok.yaml"), "-o", str(tmp_path / "out")]) == 0
    assert gc.isenabled()
    gc.disable()
    try:
        main(["check", str(files / "ok.yaml")])
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()
    capsys.readouterr()


def test_error_exits_one_with_concise_line(files, capsys):
    code, out = run(capsys, "check", str(files / "broken.yaml"), "--quiet")
    assert code == 1
    assert (
        out.out
        == f"{files / 'broken.yaml'}:7:26: R201 [error] step 'start' routes to unknown step 'ned'; "
        "did you mean 'end'?\n"
    )


def test_warnings_fail_only_with_strict(files, capsys):
    assert run(capsys, "check", str(files / "warn.yaml"))[0] == 0
    code, out = run(capsys, "check", str(files / "warn.yaml"), "--strict", "--quiet")
    assert code == 1
    assert "S103 [warning] unknown key 'descr'" in out.out and "did you mean 'desc'" in out.out


def test_one_bad_file_never_hides_the_others(files, capsys):
    (files / "yaml.yaml").write_text("workflow: [\n")
    code, out = run(capsys, "check", str(files), "--quiet")
    assert code == 1
    assert "R201" in out.out and "Y001" in out.out and "S103" in out.out


def test_select_and_ignore(files, capsys):
    assert run(capsys, "check", str(files), "--select", "S1", "--quiet")[1].out.count("R201") == 0
    code, out = run(capsys, "check", str(files), "--ignore", "R", "--quiet")
    assert code == 0 and "R201" not in out.out


def test_full_format_shows_the_line_and_a_caret(files, capsys):
    out = run(capsys, "check", str(files / "broken.yaml"), "--format", "full", "--quiet")[1].out
    assert "7 |     next: {arcs: [{step: ned}]}" in out
    assert out.splitlines()[3] == "  | " + " " * 25 + "^"


def test_full_format_caret_stays_under_the_column_past_escapes_and_cuts(tmp_path, capsys):
    # A bidi control (printed escaped, six characters for one) and a line cut to a window
    # before the column: the caret still points at the unknown step.
    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: p}\nworkflow:\n"
        "  - step: start\n    tool: {kind: noop}\n"
        '    next: {arcs: [{step: "' + "a" * 300 + '\u202e"}, {step: nope}]}\n',
        encoding="utf-8",
    )
    out = run(capsys, "check", str(path), "--format", "full", "--quiet")[1].out.splitlines()
    quoted = next(i for i, line in enumerate(out) if "{step: nope}" in line)
    caret = out[quoted + 1].index("^")
    assert out[quoted][caret:].startswith("nope}]}")
    assert out[quoted].startswith("7 | ...") and len(out[quoted]) < 140


def test_json_github_and_sarif(files, capsys):
    path = str(files / "broken.yaml")
    items = json.loads(run(capsys, "check", path, "--format", "json")[1].out)
    assert items[0] | {"message": None} == {
        "path": path,
        "line": 7,
        "column": 26,
        "code": "R201",
        "severity": "error",
        "message": None,
        "hint": None,
    }
    github = run(capsys, "check", path, "--format", "github")[1].out
    assert github.startswith(f"::error file={path},line=7,col=26,title=R201::R201 step")
    sarif = json.loads(run(capsys, "check", path, "--format", "sarif")[1].out)
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == "R201"
    assert result["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 7,
        "startColumn": 26,
    }


def test_missing_path_is_a_diagnostic_and_usage_errors_exit_two(files, capsys):
    code, out = run(capsys, "check", str(files / "nope"), "--quiet")
    assert code == 2 and "E001 [error] no such file or directory" in out.out
    with pytest.raises(SystemExit) as exc:
        main(["check", str(files), "--format", "xml"])
    assert exc.value.code == 2


def test_explain_every_code(capsys):
    for code in RULES:
        status, out = run(capsys, "explain", code.lower())
        assert (
            status == 0
            and out.out.startswith(f"{code} (")
            and "Why:" in out.out
            and "Fix:" in out.out
        )
    assert run(capsys, "explain", "Z999")[0] == 2


def test_check_imports_no_airflow(files):
    script = (
        "import sys\n"
        "from noetl_compile.cli import main\n"
        f"main(['check', {str(files)!r}, '--quiet'])\n"
        "loaded = sorted(m for m in sys.modules if m == 'airflow' or m.startswith(('airflow.', 'airflow_plugin')))\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.corpus
def test_parallel_run_reports_exactly_what_a_serial_run_does(capsys):
    from tests.corpus import CORPUS

    serial = run(capsys, "check", str(CORPUS), "--quiet", "-j", "1")
    parallel = run(capsys, "check", str(CORPUS), "--quiet", "-j", "2")
    assert serial[0] == parallel[0] == 1
    assert serial[1].out == parallel[1].out
    assert "R204" in parallel[1].out  # nested calls are resolved across the workers' chunks


@pytest.mark.parametrize(
    ("api", "target", "severity"),
    [
        # The canonical and case-v2 engines skip an arc to a step that does not exist.
        ("noetl.io/v2", "nowhere", "warning"),
        # A near miss of a step's name is a typo: skipping it would silently take another route.
        ("noetl.io/v2", "ned", "error"),
        # v1 (no engine recorded) keeps every unknown target an error.
        ("noetl.io/v1", "nowhere", "error"),
    ],
)
def test_unknown_arc_target_is_a_warning_where_the_engine_skips_it(
    tmp_path, capsys, api, target, severity
):
    path = tmp_path / "p.yaml"
    path.write_text(
        f"apiVersion: {api}\nkind: Playbook\nmetadata: {{name: p, path: t/p}}\nworkflow:\n"
        "  - step: start\n    tool: {kind: python, code: 'result = 1'}\n"
        f"    next: [{{step: {target}}}, {{step: end}}]\n"
        "  - step: end\n    tool: {kind: python, code: 'result = 2'}\n"
    )
    code, out = run(capsys, "check", str(path), "--quiet", "--select", "R201")
    assert f":7:19: R201 [{severity}] step 'start' routes to unknown step '{target}'" in out.out
    assert code == (1 if severity == "error" else 0)
    if severity == "warning":
        assert "the engine skips this arc" in out.out
        compiled = tmp_path / "out"
        assert main(["compile", str(path), "-o", str(compiled)]) == 0
        # The arc is left out: `end` is the step's only route, as NoETL's engine takes it.
        dag = next(compiled.glob("*.py")).read_text()
        assert "'nowhere'" not in dag and '"nowhere"' not in dag


def test_a_gate_is_refused_for_airflow_3_0_at_check_and_compile(tmp_path, capsys):
    gates = str(ROOT / "playbooks" / "gates.yaml")
    code, out = run(capsys, "check", gates, "--quiet", "--airflow-version", "3.0")
    lines = out.out.splitlines()
    assert code == 1 and lines and all(" C518 [error] " in line for line in lines)
    assert all("cannot run on Airflow 3.0" in line for line in lines)
    assert run(capsys, "check", gates, "--quiet", "--airflow-version", "3.1.8")[0] == 0
    code, out = run(
        capsys, "compile", gates, "-o", str(tmp_path / "30"), "--airflow-version", "3.0"
    )
    assert code == 1 and " C518 " in out.out
    assert not list((tmp_path / "30").glob("*.py"))
    # The files are the same for every version that can run them: the version is checked, not
    # written (a folder compiled under 3.1 stays current under 3.3: `compile --check`).
    for version in ("3.1", "3.3"):
        code, out = run(
            capsys, "compile", gates, "-o", str(tmp_path / version), "--airflow-version", version
        )
        assert code == 0, out.out
    written = {p.name: p.read_bytes() for p in (tmp_path / "3.1").glob("*.py")}
    assert written and written == {p.name: p.read_bytes() for p in (tmp_path / "3.3").glob("*.py")}


def test_an_unsupported_airflow_version_is_a_usage_error(files, capsys):
    for text, message in (
        ("2.10", "Airflow 2.10 is not supported (supported: 3.0, 3.1, 3.2, 3.3)"),
        ("3", "'3' is not an Airflow version (X.Y or X.Y.Z)"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(["check", str(files), "--airflow-version", text])
        assert exc.value.code == 2 and message in capsys.readouterr().err
