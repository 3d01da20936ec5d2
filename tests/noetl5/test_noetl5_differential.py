"""Live differential run: every playbook of ``tests/noetl5/playbooks/`` (NoETL 5 canonical, the
tools NoETL 5's local runtime runs: shell, http, playbook, sink) run by both engines, compared.

The forms are those a migrating team writes, found by running them on the CLI: routing (`next`
lists, arcs with `when`, `{when, then}` blocks, `case`, target `args`, step `when`, `vars`),
workload templating and filters, step results read by name, loops, failures. The CLI's local
runtime (5.3.2) runs only shell, http, playbook and its own `sink` (python, postgres, noop and
the other kinds are "not supported in local execution mode": the run ends at that step), and
does not parse a pipeline (`tool:` as a list): those forms are compared with NoETL 5's sources
instead (``tests/noetl5/cases/``).

* **NoETL 5**: ``noetl run FILE -r local --json`` of the pinned PyPI package (``conftest.py``),
  all files at once in a thread pool (the binary starts in well under a second).
* **noetlc**: ``noetlc run FILE --json`` as a user types it (``tests/harness/run_cli.py``), one
  managed Airflow home per xdist worker.

Both get the same environment (``NOETL5_TEST_MARK``), the same working directory and, for the
http playbooks, the same local HTTP server (``--set base=URL``). Compared: the final status
(NoETL's ``ok`` / an error exit against ``success`` / ``failed``), the steps that ran (as sets:
NoETL walks branches depth first, Airflow by readiness) and each step's result as NoETL reports
it: for shell the last command's stdout (our ``result`` field), for http ``{status, body}``
(our ``status_code`` and ``data``).

Where the two differ on purpose, :data:`DIFFERENCES` says what NoETL 5 does, what noetlc does
and why (the rows of ``docs/semantics.md``), and the test asserts both sides of that difference:
a change on either side fails it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.run_cli import ROOT, noetlc_run, report_of

PLAYBOOKS = ROOT / "tests" / "noetl5" / "playbooks"
FILES = sorted(PLAYBOOKS.glob("*.yaml"))
ENV = {"NOETL5_TEST_MARK": "noetl5-mark"}


@dataclass
class Outcome:
    """One engine's run, in NoETL 5's terms."""

    status: str  # success | failed
    steps: set[str] = field(default_factory=set)
    results: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    report: dict[str, Any] = field(default_factory=dict)  # noetlc's whole report


def _kinds(path: Path) -> dict[str, str]:
    doc = yaml.safe_load(path.read_text())
    return {s["step"]: (s.get("tool") or {}).get("kind") for s in doc["workflow"]}


# Workload values given on the command line (to both engines), by playbook.
SETS = {
    "shell_secret_masked": ["--set", "api_token=tok-9f8e7d6c5b4a"],
    "workload_set_override": ["--set", "user=bob", "--set", "count=7"],
}
# Playbooks noetlc cannot run yet (issue 20 owns it): strict xfails, so a fix shows up.
GAPS = {
    "sink_file": "NoETL 5's local `kind: sink` tool (target file/duckdb/gcs) has no executor: "
    "check says C515 with what to use instead (a step `sink` block, a shell/python step)",
}


def _sets(path: Path, base_url: str) -> list[str]:
    workload = yaml.safe_load(path.read_text()).get("workload") or {}
    sets = ["--set", f"base={base_url}"] if "base" in workload else []
    return sets + SETS.get(path.stem, [])


def _noetl_run(noetl: Path, path: Path, base_url: str) -> Outcome:
    done = subprocess.run(
        [str(noetl), "run", str(path), "-r", "local", "--json", *_sets(path, base_url)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, **ENV},
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
        return Outcome("failed", error="\n".join(errors) or done.stderr[-2000:])
    report = json.loads(done.stdout)
    assert report["status"] == "ok", report
    kinds = _kinds(path)
    results = {
        step: json.loads(value) if kinds.get(step) == "http" else value
        for step, value in report["step_results"].items()
    }
    return Outcome("success", set(report["executed_steps"]), results)


def _project(result: Any) -> Any:
    """Our step result as NoETL 5's local runtime reports it."""
    if isinstance(result, dict) and "exit_code" in result and "result" in result:
        return result["result"]
    if isinstance(result, dict) and "status_code" in result:
        return {"status": result["status_code"], "body": result.get("data")}
    return result


def _noetlc_outcome(report: dict[str, Any]) -> Outcome:
    steps = {
        name: step
        for name, step in report["steps"].items()
        if step["state"] in ("success", "failed")
    }
    errors = [f"{name}: {step['error']}" for name, step in steps.items() if step.get("error")]
    return Outcome(
        "success" if report["state"] == "success" else "failed",
        set(steps),
        {name: _project(step["result"]) for name, step in steps.items()},
        "\n".join(errors),
        report,
    )


@pytest.fixture(scope="session")
def noetl_outcomes(noetl5: Path, http_server: str) -> dict[str, Outcome]:
    """NoETL 5's outcome of every playbook (one batch for the session)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {p.stem: pool.submit(_noetl_run, noetl5, p, http_server) for p in FILES}
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="session")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("noetl5-home")


def _noetlc(home: Path, path: Path, base_url: str) -> Outcome:
    done = noetlc_run(home, path, "--json", *_sets(path, base_url), env=ENV)
    return _noetlc_outcome(report_of(done))


# -- the documented differences (docs/semantics.md) ----------------------------------------------


@dataclass(frozen=True)
class Difference:
    behaviour: str
    noetl: str
    noetlc: str
    why: str
    check: Callable[[Outcome, Outcome], None]


def _error_arc(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.status == "failed" and "exit code: Some(2)" in theirs.error
    assert {"start", "recover"} <= ours.steps and "proceed" not in ours.steps
    assert ours.status == "failed"  # NoETL's engine: failed whenever a call failed
    assert ours.results["recover"] == "recovered"
    start = ours.report["steps"]["start"]
    assert start["result"]["exit_code"] == 2 and start["result"]["stderr"] == "boom\n"


def _env_block(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.results == {"start": "greeting=unset"}
    assert ours.status == "success" and ours.results == {"start": "greeting=hi-from-env"}


def _secret(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.results == {"start": "calling with tok-9f8e7d6c5b4a"}
    assert ours.status == "success" and ours.results == {"start": "calling with ***"}
    assert "tok-9f8e7d6c5b4a" not in json.dumps(ours.report)


def _timeout(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.status == "success" and theirs.results == {"start": "late"}
    assert ours.status == "failed"
    result = ours.report["steps"]["start"]["result"]
    assert "timed out after 1 seconds" in ours.error, ours.error
    # The failed step's result reaches the report (a failed step pushes it, as NoETL records
    # it) with the shell tool's own status: `timeout`, no exit code.
    assert result["status"] == "timeout" and result["exit_code"] is None, result
    assert result["error"]["type"] == "TimeoutError"


def _undefined(theirs: Outcome, ours: Outcome) -> None:
    # NoETL 5 substitutes the names it knows and runs the rest as written; noetlc refuses the
    # playbook before running it: a `workload.` path the workload does not declare is a typo
    # (T307, positioned, with the declared key it is closest to), never a silent pass.
    assert theirs.results == {"start": "here and {{ workload.unknown }}"}
    assert ours.status == "failed" and ours.steps == set()
    found = json.dumps(ours.report)
    assert "T307" in found and "workload.unknown" in found and "did you mean 'known'" in found


def _end_step(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.status == ours.status == "success"
    assert theirs.steps == {"start"} and ours.steps == {"start", "end"}
    assert theirs.results["start"] == ours.results["start"] == "working"


def _end_with_tool(theirs: Outcome, ours: Outcome) -> None:
    _end_step(theirs, ours)
    assert ours.results["end"] == "finishing"


def _nested(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.status == ours.status == "success"
    assert theirs.steps == {"start", "after"}
    assert ours.steps == {"start", "call_child", "after"}
    assert theirs.results == {k: ours.results[k] for k in ("start", "after")}


def _not_found(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.status == "success" and theirs.results["start"]["status"] == 404
    assert theirs.results["after"] == "after"
    # A failed call goes on along its unconditional arc (NoETL's canonical engine) and the run
    # ends failed, naming the 404.
    assert ours.status == "failed" and ours.results["after"] == "after"
    assert "404" in ours.error


def _case_then_list(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.status == ours.status == "success"
    assert theirs.steps == {"start"}  # the matching case ran nothing, and `next` was not taken
    assert ours.steps == {"start", "prod"} and ours.results["prod"] == "prod"


def _loop(theirs: Outcome, ours: Outcome) -> None:
    # NoETL 5's CLI leaves `loop:` unread: the tool runs once, its item tag as text.
    assert theirs.status == ours.status == "success"
    assert theirs.steps == ours.steps == {"start", "after"}
    assert theirs.results == {"start": "item-{{ it }}", "after": "after"}
    aggregate = ours.report["steps"]["start"]["result"]
    assert [r["result"] for r in aggregate["results"]] == ["item-a", "item-b", "item-c"]
    assert aggregate["stats"] == {"total": 3, "success": 3, "failed": 0}
    assert ours.results["after"] == "after"


def _next_names(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.status == ours.status == "success"
    assert theirs.steps == {"start"}  # the plain names route nowhere: the branch ends
    assert ours.steps == {"start", "left", "right"}
    assert ours.results["left"] == "left" and ours.results["right"] == "right"


def _args_templated(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.status == ours.status == "success"
    assert theirs.results["deploy"] == "region={{ workload.region }}"
    assert ours.results["deploy"] == "region=eu"


def _template_expressions(theirs: Outcome, ours: Outcome) -> None:
    # The list `| length` reads is spliced in as YAML lines, each run as a command: `- b` is
    # no command (127). noetlc renders each expression as Jinja (NoETL 5's minijinja renderer).
    assert theirs.status == "failed" and "exit code: Some(127)" in theirs.error, theirs.error
    assert ours.status == "success", ours.error
    assert ours.results == {"start": "region=eu", "count": "count=3", "fallback": "tier=free"}


def _compound_guards(theirs: Outcome, ours: Outcome) -> None:
    # NoETL 5's CLI: `not workload.enabled` holds for a true value, so `disabled` runs and its
    # branch ends; noetlc evaluates each guard as Jinja.
    assert theirs.status == ours.status == "success"
    assert theirs.steps == {"start", "disabled"}
    assert ours.steps == {"start", "enabled", "no_tier", "scaled"}


def _http_fields(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.status == ours.status == "success"
    assert theirs.results["start"] == {"status": 200, "body": ours.results["start"]["body"]}
    assert theirs.steps == {"start", "unknown"}  # `start.body.id == 3` did not hold
    assert ours.steps == {"start", "known"} and ours.results["known"] == "name=Test User 3"


def _nested_result(theirs: Outcome, ours: Outcome) -> None:
    # NoETL 5's CLI runs the child but keeps no result for the calling step: it is not listed
    # and `{{ start.result }}` stays as text.
    assert theirs.status == ours.status == "success"
    assert theirs.steps == {"after"} and theirs.results == {"after": "got={{ start.result }}"}
    assert ours.steps == {"start", "after"}
    assert ours.results == {"start": "child-of-parent", "after": "got=child-of-parent"}


DIFFERENCES: dict[str, Difference] = {
    "route_case_then_list": Difference(
        "a local `case` whose `then` is a list of steps",
        "the case matches and nothing runs: the CLI's `then` deserialises a list as a single "
        "action and finds no `next` in it (NoETL 5.3.2), so the branch ends",
        "the listed steps are the case's targets (as `then: {next: [...]}` and `next` lists mean)",
        "a matching case that silently runs nothing is a bug of the CLI's parsing, not a "
        "meaning anyone writes",
        _case_then_list,
    ),
    "shell_error_arc": Difference(
        "a failing command routed by an error arc (`when: event.name == 'call.error'`)",
        "the run stops at the failing command (`Command failed with exit code`); error arcs "
        "never fire and the recovery step never runs",
        "the call fails with `exit_code`/`stderr` in its result, the error arc routes to the "
        "recovery step, which runs; the run still ends failed, as NoETL's engine ends it",
        "NoETL's engine and docs route `call.error` (its distributed runtime does); a recovery "
        "step that never runs is a local-runtime gap nobody relies on",
        _error_arc,
    ),
    "shell_env_block": Difference(
        "`env:` of a shell tool",
        "ignored by the local runtime (its shell config has only `cmds`)",
        "the variables are set for the commands, over the task's environment",
        "NoETL 5's Rust shell tool and its Python worker both honour `env`",
        _env_block,
    ),
    "shell_secret_masked": Difference(
        "a command that prints a secret (here a workload value under a secret-looking key)",
        "the value is in the step result and the console",
        "stdout/stderr/result go through Airflow's masker: `***`",
        "secrets never reach an XCom, an event or a log line",
        _secret,
    ),
    "shell_timeout": Difference(
        "`timeout_seconds` of a shell tool",
        "ignored by the local runtime: the command runs to its end",
        "the command's process group is killed; the call fails with status `timeout` "
        "(retryable), routable by an error arc",
        "NoETL 5's Rust shell tool and Python worker enforce it; a limit that is silently "
        "ignored is a bug",
        _timeout,
    ),
    "shell_undefined_name": Difference(
        "a command naming an undefined variable",
        "the names it knows are substituted, the unknown tag stays as text",
        "the whole command keeps its template text (lenient rendering, as NoETL's Python "
        "worker) and a TemplateWarning names the field; `--strict` fails the step",
        "a half-rendered command runs something the author did not write; noetlc says so",
        _undefined,
    ),
    "route_end_step": Difference(
        "a step named `end`",
        'never executed and not listed in `executed_steps` ("terminal end step")',
        "runs like any other step (a noop here) and is reported",
        "NoETL's distributed engine runs an `end` step's tool; only the local runtime skips it",
        _end_step,
    ),
    "route_end_with_tool": Difference(
        "a step named `end` that has a tool",
        "its tool never runs",
        "its tool runs",
        "an `end` step doing the final work (a report, a cleanup) is what its author wrote",
        _end_with_tool,
    ),
    "nested_playbook": Difference(
        "a nested `kind: playbook` step",
        "runs the child, but the step is not listed in `executed_steps` (it has no result)",
        "the step is reported with the child's result",
        "the step ran; listing only steps with a result hides it",
        _nested,
    ),
    "http_not_found": Difference(
        "an HTTP 4xx/5xx response",
        "a success whose result is `{status: 404, body}`; the run goes on",
        "a failed call (`HTTPStatusError`): the run goes on along the arc and ends failed",
        "NoETL 5's Rust http tool and its distributed runtime mark 4xx/5xx as errors; the local "
        "bridge reshapes them into successes",
        _not_found,
    ),
    "loop_workload_list": Difference(
        "a step `loop:` (`in`, `iterator`)",
        "NoETL 5's CLI does not read `loop:`: the tool runs once with the item's tag as text "
        "(`item-{{ it }}`) and the run goes on",
        "one call per item (`it` bound to each); the step's result is the loop's aggregate "
        "`{results, stats, omitted_results_count}`",
        "NoETL 5's server runs the loop (its orchestrator issues one command per item); a loop "
        "the CLI silently runs once is a gap of that runtime (`noetlc check` says so, D963)",
        _loop,
    ),
    "route_next_names": Difference(
        "a local `next` list of plain step names (`next: [left, right]`)",
        "NoETL 5's CLI routes to none of them: the branch ends after the step",
        "the names are targets, routed by `spec.next_mode` (inclusive here: both run)",
        "NoETL 5's server reads the list as `NextSpec::List` and runs every named step; a list "
        "of targets that routes nowhere is a parsing gap of the CLI",
        _next_names,
    ),
    "route_arc_args_templated": Difference(
        "a template in a `next` target's `args` (`args: {region: '{{ workload.region }}'}`)",
        "the target gets the template's text: neither the CLI nor the server renders target "
        "`args` (noetl/server orchestrator.rs:1483, `with_params`: a plain merge)",
        "the value is rendered where the arc is taken (`region=eu`)",
        "a template handed on as its own text is never what `args: {region: ...}` means "
        "(`noetlc check` says so, D962, at the value)",
        _args_templated,
    ),
    "shell_template_expressions": Difference(
        "a template expression beyond a top-level name (a nested field, `| length`, "
        "`| default`) in a shell command",
        "NoETL 5's CLI substitutes `{{ workload.key }}`-style names only: a nested field and "
        "`| default` stay as text, `| length` is ignored and the list is spliced in as YAML "
        "lines, each run as a command (`- b`: exit 127)",
        "each expression is rendered (`region=eu`, `count=3`, `tier=free`)",
        "NoETL 5's shell tool renders commands with minijinja (noetl/tools template/engine.rs), "
        "as noetlc does with Jinja; only the CLI's local substitution lacks expressions",
        _template_expressions,
    ),
    "route_when_compound": Difference(
        "an arc guard with `not`, `is defined`, or a `>` comparison joined by `or`",
        "NoETL 5's CLI evaluates `not workload.enabled` as true for a true value, "
        "`workload.tier is defined` as true for a missing key, and `a == 'x' or n > 2` as false "
        "where `n > 2` holds",
        "Jinja's meaning: false, false, true",
        "NoETL 5's server evaluates guards with minijinja, which agrees with noetlc; the CLI's "
        "own condition evaluator gets these wrong",
        _compound_guards,
    ),
    "http_result_fields": Difference(
        "a field of an http step's result read by name (`{{ start.body.name }}`, a guard "
        "`start.body.id == 3`)",
        "NoETL 5's CLI keeps the result as JSON text `{status, body}`: the tag stays as text "
        "and the guard does not hold",
        "the result is a mapping (`body`, `data`, `status_code`, `headers`): the field is read",
        "NoETL 5's http tool returns a mapping the server's templates read field by field "
        "(`http_result_keys`); only the CLI's local bridge flattens it to text",
        _http_fields,
    ),
    "nested_return_result": Difference(
        "the result of a nested `playbook` call with `return_result: true`, read downstream",
        "NoETL 5's CLI runs the child but keeps no result for the calling step: it is not "
        "listed and `{{ start.result }}` stays as text",
        "the call's result is the child's last step's result (`child-of-parent`), read by name",
        "NoETL 5's playbook tool returns the child's result when it waits (noetl/tools "
        "playbook.rs:279; case `nested/playbook_result_read_downstream`); the CLI drops it",
        _nested_result,
    ),
}


# Differences documented before the section-1 rows cited their playbook (docs/shell-tool.md's
# table and docs/noetl5.md say them).
DOCUMENTED_ELSEWHERE = {
    "route_case_then_list", "shell_error_arc", "shell_env_block", "shell_secret_masked",
    "shell_timeout", "shell_undefined_name", "route_end_step", "route_end_with_tool",
    "nested_playbook", "http_not_found",
}  # fmt: skip


def test_enough_playbooks_and_shell_cases() -> None:
    assert len(FILES) >= 55
    assert sum(p.stem.startswith("shell_") for p in FILES) >= 15
    assert sum(p.stem.startswith("route_") for p in FILES) >= 20
    assert set(DIFFERENCES) <= {p.stem for p in FILES}


def test_every_new_difference_is_a_row_of_docs_semantics() -> None:
    semantics = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
    for name in set(DIFFERENCES) - DOCUMENTED_ELSEWHERE:
        assert f"`tests/noetl5/playbooks/{name}.yaml` (live)" in semantics, name


def test_the_cli_is_the_pinned_noetl_5(noetl5: Path) -> None:
    done = subprocess.run([str(noetl5), "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "noetl 5.3.2"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=pytest.mark.xfail(reason=GAPS[p.stem], strict=True))
        if p.stem in GAPS
        else p
        for p in FILES
    ],
    ids=[p.stem for p in FILES],
)
def test_noetl5_and_noetlc_agree(
    path: Path, noetl_outcomes: dict[str, Outcome], home: Path, http_server: str
) -> None:
    theirs = noetl_outcomes[path.stem]
    ours = _noetlc(home, path, http_server)
    difference = DIFFERENCES.get(path.stem)
    if difference is not None:
        difference.check(theirs, ours)
        return
    assert ours.status == theirs.status, (ours.error, theirs.error)
    if theirs.status == "failed":
        # NoETL prints no report for a failed run: compare what failed, by exit code.
        code = theirs.error.rsplit("Some(", 1)[-1].rstrip(")")
        assert f"Command exited with code {code}" in ours.error, (ours.error, theirs.error)
        return
    assert ours.steps == theirs.steps
    assert {step: ours.results[step] for step in theirs.results} == theirs.results
