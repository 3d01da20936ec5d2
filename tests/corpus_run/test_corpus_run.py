"""Every corpus playbook, run for real under ``dag.test()`` — or the one reason it cannot run.

``expectations.yaml`` lists every corpus file. A ``run`` entry is compiled with the real compiler,
run against the local services (Postgres cluster, HTTP server on loopback: URLs overridden in the
workload, as ``noetlc run --set`` does), and checked:

* the final DAG run state (``success`` unless the playbook is written to fail);
* the results the playbook itself validates or the NoETL project states (README, notebooks,
  regression expectations), each entry saying where it comes from (``source``);
* no step result holds template text (``{{``/``{%``) that the playbook did not write as a
  literal (python code, ``{% raw %}``): kept templates are NoETL's lenient semantics, but a
  successful run that carries one did not do what the playbook meant;
* the number of ``TemplateWarning`` events (guards that could not be evaluated, templates kept)
  equals the expected count (0 unless the entry explains why).

A ``skip`` entry gives one reason from a fixed vocabulary; ``check_error`` / ``check_warning``
reasons are verified against ``noetlc check``, ``playbook_mistake`` ones are verified to have no
check error (once check reports the mistake, the entry must say so).

The counts per dialect and per skip reason are printed at the end of a session that collects
this package (``conftest.py``), and by ``test_expectations_cover_every_corpus_file_once``.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.corpus import CORPUS, corpus_files
from tests.corpus_run.expectations import (
    SKIP_REASONS,
    Expectation,
    Variant,
    check_value,
    load_expectations,
    resolve_path,
)
from tests.corpus_run.runner import (
    CorpusRun,
    children_of,
    literal_texts,
    literal_texts_of,
    run_corpus_playbook,
    substitute,
    unrendered_fragments,
)

EXPECTATIONS = load_expectations()
VARIANTS: list[Variant] = [v for e in EXPECTATIONS.values() for v in e.variants]


def dialect_of(rel: str) -> str:
    return rel.split("/", 1)[0]


def summary_lines(expectations: dict[str, Expectation] = EXPECTATIONS) -> list[str]:
    """Counts per dialect (run / skipped) and per skip reason, for the terminal summary."""
    by_dialect: dict[str, Counter] = {}
    reasons: Counter = Counter()
    for rel, exp in sorted(expectations.items()):
        counts = by_dialect.setdefault(dialect_of(rel), Counter())
        if exp.skip:
            counts["skip"] += 1
            reason = exp.reason
            value = exp.skip[reason]
            reasons[
                f"{reason}: {value}"
                if reason in ("service", "check_error", "check_warning")
                else reason
            ] += 1
        else:
            counts["run"] += 1
            counts["variants"] += len(exp.variants)
    lines = ["corpus run: playbooks run / skipped per dialect"]
    for dialect, counts in sorted(by_dialect.items()):
        lines.append(
            f"  {dialect:10} run {counts['run']:3} ({counts['variants']} runs)"
            f"  skipped {counts['skip']:3}"
        )
    total_run = sum(c["run"] for c in by_dialect.values())
    total_skip = sum(c["skip"] for c in by_dialect.values())
    lines.append(f"  {'total':10} run {total_run:3}  skipped {total_skip:3}  unexplained 0")
    bugs = sum(1 for e in expectations.values() if e.reason == "runtime_bug")
    lines.append(
        f"  (target {RUN_TARGET} runnable; {bugs} more run once the runtime bugs are fixed)"
    )
    lines.append("skipped, per reason:")
    lines += [f"  {count:3}  {reason}" for reason, count in sorted(reasons.items())]
    guards = sum(v.guard_warnings for v in VARIANTS)
    kept = sum(v.unrendered_warnings for v in VARIANTS)
    lines.append(f"expected TemplateWarning events: {guards} guard, {kept} kept-template")
    return lines


# --------------------------------------------------------------------------------------------
# The expectations file itself
# --------------------------------------------------------------------------------------------


@pytest.mark.corpus
def test_expectations_cover_every_corpus_file_once():
    files = {p.relative_to(CORPUS).as_posix() for p in corpus_files()}
    assert len(files) > 250, f"the shared corpus is missing at {CORPUS}"
    missing = sorted(files - set(EXPECTATIONS))
    unknown = sorted(set(EXPECTATIONS) - files)
    assert not missing, f"corpus files without an expectation (unexplained): {missing}"
    assert not unknown, f"expectations for files not in the corpus: {unknown}"
    print("\n" + "\n".join(summary_lines()))


# The target is 100 runnable playbooks. The corpus does not have that many that run
# honestly here: every other file has its reason in expectations.yaml (services, mistakes check
# reports, mistakes NoETL itself trips over, runtime bugs). This floor only ratchets up: a
# runtime bug fixed flips its entry to `run` and raises the count.
RUN_TARGET = 100
RUN_FLOOR = 80


def test_run_count_never_drops_and_every_dialect_runs():
    runnable = Counter(dialect_of(rel) for rel, e in EXPECTATIONS.items() if e.variants)
    total = sum(runnable.values())
    bugs = sum(1 for e in EXPECTATIONS.values() if e.reason == "runtime_bug")
    print(f"\nrunnable {total} (target {RUN_TARGET}); {bugs} more once the runtime bugs are fixed")
    assert total >= RUN_FLOOR, runnable
    for dialect in ("v1", "case-v2", "canonical"):
        assert runnable[dialect] > 0, f"no runnable {dialect} playbook"


@pytest.fixture(scope="module")
def check_results():
    from noetl_compile.check import check_paths

    rels = [rel for rel, e in EXPECTATIONS.items() if e.skip]
    found = {}
    # One run per corpus project (top-level folder): the same fixture under one catalog path in
    # two projects is R208 in a run that holds both.
    for project in sorted({rel.split("/", 1)[0] for rel in rels}):
        chosen = [str(CORPUS / rel) for rel in rels if rel.split("/", 1)[0] == project]
        results, problems = check_paths(chosen)
        assert not problems
        found.update({Path(r.path).relative_to(CORPUS).as_posix(): r for r in results})
    return found


@pytest.mark.corpus
def test_check_error_reasons_are_what_noetlc_check_reports(check_results):
    from noetl_compile.diagnostics import Severity

    wrong = []
    for rel, exp in sorted(EXPECTATIONS.items()):
        if not exp.skip:
            continue
        errors = {d.code for d in check_results[rel].diagnostics if d.severity is Severity.ERROR}
        warnings = {d.code for d in check_results[rel].diagnostics}
        reason = exp.reason
        if reason == "check_error" and exp.skip["check_error"] not in errors:
            wrong.append(f"{rel}: check reports {sorted(errors)}, not {exp.skip['check_error']}")
        if reason == "check_warning" and exp.skip["check_warning"] not in warnings:
            wrong.append(f"{rel}: check does not report {exp.skip['check_warning']}")
        if reason == "playbook_mistake" and errors:
            wrong.append(f"{rel}: check now reports {sorted(errors)}: make it a check_error skip")
        if exp.skip.get("also_reported") and exp.skip["also_reported"] not in warnings:
            wrong.append(f"{rel}: check does not report {exp.skip['also_reported']}")
    assert not wrong, "\n".join(wrong)


def test_skip_reasons_come_from_the_vocabulary():
    for rel, exp in EXPECTATIONS.items():
        if exp.skip:
            assert exp.reason in SKIP_REASONS, rel


def test_unrendered_template_text_is_found_unless_the_playbook_wrote_it_as_a_literal():
    doc = yaml.safe_load(
        """
        workflow:
          - step: a
            tool:
              kind: python
              input: {x: "{{ missing.value }}"}
              code: |
                result = {"template": "{{ kept_on_purpose }}"}
          - step: b
            tool: {kind: postgres, command: "SELECT '{% raw %}{{ raw_text }}{% endraw %}'"}
        """
    )
    literals = literal_texts_of(doc)
    result = {
        "from_code": "{{ kept_on_purpose }}",
        "from_raw": "{{raw_text}}",
        "echo": ["fine", {"x": "value: {{ missing.value }}"}],
    }
    assert unrendered_fragments(result, literals) == ["echo.1.x: {{ missing.value }}"]
    assert unrendered_fragments({"ok": "no template here", "n": 3}, literals) == []


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------

RESET_SQL = """
DO $$
DECLARE s text;
BEGIN
  FOR s IN SELECT nspname FROM pg_namespace
           WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema' LOOP
    EXECUTE format('DROP SCHEMA %I CASCADE', s);
  END LOOP;
  CREATE SCHEMA public;
END $$;
"""


@pytest.fixture
def corpus_pg(pg_connections, pg_test_dsn):
    """The test database, emptied (every schema dropped), with the corpus connection names."""
    import psycopg

    with psycopg.connect(pg_test_dsn, autocommit=True) as db:
        db.execute(RESET_SQL)
    return pg_test_dsn


def _sql_rows(dsn: str, query: str) -> list[list[Any]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        cursor = db.execute(query)
        return [list(row) for row in cursor.fetchall()] if cursor.description else []


def _own(run: CorpusRun, *names: str) -> list[Any]:
    own = str(run.execution_id)
    return [e for e in run.named(*names) if e.execution_id == own]


def _results(run: CorpusRun) -> dict[str, Any]:
    """Step -> result: the DAG's XCom values, and for steps that ran inside a task (a loop body,
    a region member without XCom of its own) the last successful run of this execution."""
    out: dict[str, Any] = {}
    for event in _own(run, "StepFinished"):
        if event.status == "success" and event.iteration is None:
            out[event.step] = (event.data or {}).get("result")
    out.update(run.results)
    return out


def _check_results(variant: Variant, run: CorpusRun, dsn: str) -> list[str]:
    problems = []
    results = _results(run)
    for item in variant.results:
        if "sql" in item:
            rows = _sql_rows(dsn, item["sql"])
            if rows != item["equals"]:
                problems.append(f"sql {item['sql']!r}: expected {item['equals']!r}, got {rows!r}")
            continue
        step = item["step"]
        if "tool_calls" in item:
            calls = len([e for e in _own(run, "ToolStarted") if e.step == step])
            if calls != item["tool_calls"]:
                problems.append(f"{step}: expected {item['tool_calls']} tool calls, got {calls}")
            continue
        if step not in results:
            problems.append(f"{step}: no result (the step did not run)")
            continue
        value = resolve_path(results[step], item.get("path"))
        problem = check_value(value, item)
        if problem:
            problems.append(f"{step}.{item.get('path') or ''}: {problem}")
    started = {e.step for e in _own(run, "StepStarted")}
    finished = {e.step for e in _own(run, "StepFinished") if e.status == "success"}
    for step in variant.ran:
        if step not in finished:
            problems.append(f"step {step!r} should have run (finished: {sorted(finished)})")
    for step in variant.not_ran:
        if step in started:
            problems.append(f"step {step!r} should not have run")
    return problems


def _reset_http_state(base: str) -> None:
    """Flaky counters and concurrency probes live in the (session-wide) server: start fresh."""
    import httpx

    for route in ("/api/v1/flaky/reset", "/api/v1/concurrency/reset"):
        httpx.post(base + route, timeout=5).raise_for_status()


def _setup(variant: Variant, placeholders, airflow_db, run_dag, tmp_path, dsn) -> list[str]:
    """Run the setup playbooks (corpus files the NoETL project runs first) and SQL."""
    _reset_http_state(placeholders["http_server"])
    sources = []
    for index, item in enumerate(variant.setup.get("playbooks") or []):
        rel, conf = (item, {}) if isinstance(item, str) else (item["rel"], item.get("conf") or {})
        run = run_corpus_playbook(
            rel,
            dags_folder=airflow_db,
            run_dag=run_dag,
            workdir=tmp_path / f"setup{index}",
            conf=substitute(conf, placeholders),
        )
        assert run.state == "success", f"setup playbook failed: {run.describe()}"
        sources += [rel, *children_of(rel)]
    for statement in variant.setup.get("sql") or []:
        _sql_rows(dsn, statement)
    return sources


@pytest.mark.corpus
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.test_id for v in VARIANTS])
def test_corpus_playbook_runs(variant, airflow_db, run_dag, http_server, corpus_pg, tmp_path):
    placeholders = {"http_server": http_server, "tmp": str(tmp_path)}
    started = time.monotonic()
    setup_sources = _setup(variant, placeholders, airflow_db, run_dag, tmp_path, corpus_pg)
    if variant.seed is not None:
        # The playbook draws random numbers (python `random`, run in this process under
        # dag.test): a fixed seed makes its path and its attempt count reproducible.
        random.seed(variant.seed)
    run = run_corpus_playbook(
        variant.rel,
        dags_folder=airflow_db,
        run_dag=run_dag,
        workdir=tmp_path / "main",
        conf=substitute(variant.conf, placeholders),
        children=variant.children,
    )
    elapsed = time.monotonic() - started
    problems = []
    if run.state != variant.state:
        problems.append(f"state {run.state}, expected {variant.state}")
    problems += _check_results(variant, run, corpus_pg)

    guards = run.template_warnings("guard")
    kept = run.template_warnings("unrendered")
    if len(guards) != variant.guard_warnings:
        problems.append(
            f"{len(guards)} guard warnings, expected {variant.guard_warnings}: "
            + "; ".join(
                f"{e.step} {e.data.get('field')} {e.data.get('expression')}" for e in guards
            )
        )
    if len(kept) != variant.unrendered_warnings:
        problems.append(
            f"{len(kept)} kept-template warnings, expected {variant.unrendered_warnings}: "
            + "; ".join(f"{e.step} {e.data.get('field')} {e.data.get('expression')}" for e in kept)
        )
    if run.state == "success":
        children = variant.children if variant.children is not None else children_of(variant.rel)
        literals = literal_texts([variant.rel, *children, *setup_sources])
        for step, result in run.finished_results():
            for where in unrendered_fragments(result, literals):
                problems.append(f"unrendered template in the result of {step}: {where}")
    print(
        f"{variant.test_id}: {run.state} in {elapsed:.1f}s; TemplateWarning: "
        f"{len(guards)} guard, {len(kept)} kept"
    )
    assert not problems, run.describe() + "\n" + "\n".join(problems)
