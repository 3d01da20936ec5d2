"""Proof by running both: every corpus playbook that `noetlc upgrade --unsafe-fixes` completes
(and no exact upgrade does) and that runs here (tests/corpus_run/expectations.yaml) is run as
written and as rewritten, under Airflow's ``dag.test()`` against the same empty database; the
difference in final status, steps run, step results and per-step events is measured and held
against what the applied fixes declare (noetl_compile/upgrade/unsafe.py):

* a measured difference in an aspect no applied fix declares is a failure (an undeclared change);
* an aspect a fix declares ``always`` must be measured when the fixed step ran (a declaration
  that does not happen is wrong too).

The agreement count is printed (``declared vs measured``). Slow: about 20 playbooks, two runs
each.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from noetl_compile.upgrade import upgrade_text
from noetl_compile.upgrade.unsafe import KINDS
from tests.corpus import CORPUS, available
from tests.corpus_run import runner
from tests.corpus_run.test_corpus_run import RESET_SQL
from tests.corpus_run.test_differential import normalise
from tests.test_upgrade_runs import _expectations, _runs
from tests.upgrade_support import (
    STEP_EVENTS,
    corpus_upgrades,
    finished,
    relative,
    without_omitted,
)

# The events compared: a step's own (tests/upgrade_support.py STEP_EVENTS) and those of what
# the unsafe fixes change, a failed call, a retry and a sink. Routing events (a case-v2 `case`'s
# CaseStarted/CaseEvaluated, a canonical router's NextEvaluated) differ by generation in every
# upgrade, exact ones included, and are not compared.
EVENTS = STEP_EVENTS | {
    "ToolErrored", "RetryStarted", "RetryProcessed", "SinkStarted", "SinkProcessed",
}  # fmt: skip


def event_sequences(run) -> dict[tuple[str | None, Any], list[tuple[str, str | None]]]:
    """Per entity (a step, an iteration of it, the workflow), its compared events in order."""
    own = str(run.execution_id)
    out: dict[tuple[str | None, Any], list[tuple[str, str | None]]] = {}
    for event in run.events:
        if event.name in EVENTS and event.execution_id == own:
            key = (event.step, getattr(event, "iteration", None))
            out.setdefault(key, []).append((event.name, getattr(event, "status", None)))
    return out


def measured(before, after) -> dict[str, set[Any]]:
    """Per aspect, what differs between the two runs: the steps whose results differ, the
    entities whose event sequences differ, the steps run by one only, the final states."""
    out: dict[str, set[Any]] = {}
    if before.state != after.state:
        out["final status"] = {(before.state, after.state)}
    steps = set(finished(before)) ^ set(finished(after))
    if steps:
        out["steps"] = steps
    old = normalise(before.results)
    new = normalise(without_omitted(after.results, before.results))
    results = {s for s in set(old) | set(new) if old.get(s) != new.get(s)}
    if results:
        out["results"] = results
    old_events, new_events = event_sequences(before), event_sequences(after)
    events = {
        key
        for key in set(old_events) | set(new_events)
        if old_events.get(key) != new_events.get(key)
    }
    if events:
        out["events"] = events
    return out


def agreement(applied, before, differences: dict[str, set[Any]]) -> list[str]:
    """What disagrees between the fixes' declarations and the measured differences."""
    declared = set().union(*(KINDS[name].aspects() for name, _, _ in applied))
    problems = [
        f"{aspect} differs ({sorted(map(str, what))}) but no applied fix declares it"
        for aspect, what in differences.items()
        if aspect not in declared
    ]
    ran = set(finished(before))
    for name, line, step in applied:
        if step not in ran:
            continue  # the construct did not run: nothing it always changes can show
        for aspect in KINDS[name].aspects(always=True):
            if aspect not in differences:
                problems.append(
                    f"`{name}` (line {line + 1}, step {step}) declares that {aspect} always "
                    "differ, and they do not"
                )
    return problems


def _unsafe_runnable() -> list[tuple[str, str]]:
    expectations = _expectations()
    out = []
    for path, exact in corpus_upgrades().items():
        if exact.writable:
            continue  # exact: tests/test_upgrade_runs.py proves it means the same
        runs = _runs(expectations.get(relative(path)) or {})
        if runs and upgrade_text(exact.original, str(path), unsafe=True).writable:
            out += [(relative(path), label) for label in runs]
    return sorted(out)


RUNNABLE = _unsafe_runnable() if available() else [("(corpus missing)", "")]
TALLY: dict[str, int] = {"agree": 0, "disagree": 0}


@pytest.mark.slow
@pytest.mark.corpus
@pytest.mark.parametrize("rel, label", RUNNABLE)
def test_unsafe_fixes_change_only_what_they_declare(
    rel, label, airflow_db, run_dag, http_server, tmp_path, monkeypatch, pg_connections, pg_test_dsn
) -> None:
    import psycopg

    entry = _runs(_expectations()[rel])[label]
    setup = entry.get("setup") or {}
    assert set(setup) <= {"sql"}, "a setup playbook: run it before each of the two runs"
    children = entry.get("children")
    children = runner.children_of(rel) if children is None else children
    text = (CORPUS / rel).read_text(encoding="utf-8")
    upgrade = upgrade_text(text, rel, unsafe=True)
    assert upgrade.writable and upgrade.unsafe_applied, upgrade.diagnostics
    conf = runner.substitute(entry.get("conf"), {"http_server": http_server, "tmp": str(tmp_path)})
    runs = []
    for side, body in (("before", text), ("after", upgrade.text)):
        with psycopg.connect(pg_test_dsn, autocommit=True) as db:
            db.execute(RESET_SQL)  # the same empty database for both runs
            for statement in setup.get("sql") or []:
                db.execute(statement)
        if entry.get("seed") is not None:
            random.seed(entry["seed"])  # the same draws in both runs
        root = tmp_path / side / "corpus"
        for child in children:  # called playbooks run as written in both runs
            (root / child).parent.mkdir(parents=True, exist_ok=True)
            (root / child).write_text((CORPUS / child).read_text(encoding="utf-8"))
        monkeypatch.setattr(runner, "CORPUS", root)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        runs.append(
            runner.run_corpus_playbook(
                rel,
                dags_folder=airflow_db,
                run_dag=run_dag,
                workdir=tmp_path / side,
                conf=conf,
                children=children,
            )
        )
    before, after = runs
    assert before.state == entry.get("state", "success"), before.describe()
    differences = measured(before, after)
    problems = agreement(upgrade.unsafe_applied, before, differences)
    TALLY["disagree" if problems else "agree"] += 1
    kinds = sorted({name for name, _, _ in upgrade.unsafe_applied})
    print(
        f"\n{rel} [{label}] fixes {kinds}: measured {sorted(differences)}; "
        f"declared vs measured: {TALLY['agree']} agree, {TALLY['disagree']} disagree"
    )
    for step in sorted(differences.get("results", ()), key=str):
        print(
            f"  results of {step}: {before.results.get(step)!r:.300} -> {after.results.get(step)!r:.300}"
        )
    assert not problems, problems


def test_agreement_catches_an_undeclared_and_a_missing_difference() -> None:
    """The comparison itself can fail: a results difference under a fix that declares none
    (postgres-result declares results only: events are undeclared), and a sink removed from a
    step that ran with no difference measured."""

    class Run:
        state = "success"

        def __init__(self, steps):
            self.steps = steps

    from tests import upgrade_support

    real = upgrade_support.finished
    try:
        globals()["finished"] = lambda run: run.steps
        before = Run(["load"])
        problems = agreement([("postgres-result", 3, "load")], before, {"events": {"load"}})
        assert any("events differs" in p for p in problems)
        assert any("results always" in p for p in problems)
        problems = agreement([("sink-removed", 9, "load")], before, {})
        assert len(problems) == 1  # its events are declared always
        assert agreement([("sink-removed", 9, "other")], before, {}) == []
    finally:
        globals()["finished"] = real
