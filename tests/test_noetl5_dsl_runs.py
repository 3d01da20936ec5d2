"""NoETL 5 playbooks of tests/noetl5_dsl/ run on a real local Airflow through `noetlc run`: the
local dialect's routing, the python convention, task `set` and filters, policies, a python
failure's shape, the server's forms and `next` lists; and a waiting nested call's poke interval."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetl_compile.check import check_paths, check_text
from noetl_compile.compile import compile_result
from tests.noetl5_dsl_support import (
    PLAYBOOKS,
    SERVER_FORMS,
    code_counts,
    error_lines,
)


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
        assert not error_lines(result) and "S116" not in code_counts(result), result.diagnostics
        text, _ = compile_result(result, "waits.yaml")
        (folder / "waits.py").write_text(text, encoding="utf-8")
        bag = _dagbag(folder)
        assert not bag.import_errors, bag.import_errors
        intervals[name] = bag.dags["tests.noetl5.waits"].get_task("start").poke_interval
    # Without the key: the operator's own 5 s (Airflow's 60 s would delay every nested call).
    assert intervals == {"given": 1, "zero": 1, "none": 5}
