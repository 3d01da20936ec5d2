"""What tests/test_upgrade*.py and tests/test_upgrade_runs.py share: the corpus playbooks the
upgrade is asked to rewrite (check-clean, not canonical) with their upgrades, computed once per
process, and one run of a playbook text under Airflow's ``dag.test()`` with the comparison of an
original's run against its upgrade's."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from noetl_compile.check import check_text
from noetl_compile.diagnostics import Severity
from noetl_compile.upgrade import Upgrade, upgrade_text
from tests.corpus import CORPUS, corpus_files
from tests.corpus_run import runner
from tests.corpus_run.test_differential import normalise


@functools.cache
def corpus_upgrades() -> dict[Path, Upgrade]:
    """Every v1 and case-v2 corpus playbook `noetlc check` accepts, with its upgrade."""
    out = {}
    for path in corpus_files():
        text = path.read_text(encoding="utf-8")
        checked = check_text(text, str(path))
        clean = not any(d.severity is Severity.ERROR for d in checked.diagnostics)
        if checked.playbook is not None and checked.playbook.dialect != "canonical" and clean:
            out[path] = upgrade_text(text, str(path))
    return out


def relative(path: Path) -> str:
    return path.relative_to(CORPUS).as_posix()


def run_text(root: Path, rel: str, text: str, conf, airflow_db, run_dag, workdir: Path):
    """Compile and run ``text`` as corpus playbook ``rel`` under ``root``."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return runner.run_corpus_playbook(
        rel, dags_folder=airflow_db, run_dag=run_dag, workdir=workdir, conf=conf, children=[]
    )


def finished(run) -> list[str]:
    own = str(run.execution_id)
    return sorted(
        {
            e.step
            for e in run.named("StepFinished")
            if e.status == "success" and e.execution_id == own and e.iteration is None
        }
    )


def without_omitted(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """``after`` less the `omitted_results_count` of loop aggregates ``before`` lacks: NoETL's
    canonical engine (138c10ed) counts it in every loop aggregate, case-v2's (dc55c492) does not;
    a case-v2 playbook cannot have read it (U804 names it on each upgraded loop)."""
    out = {}
    for step, result in after.items():
        if (
            isinstance(result, dict)
            and "omitted_results_count" in result
            and "omitted_results_count" not in (before.get(step) or {})
        ):
            result = {k: v for k, v in result.items() if k != "omitted_results_count"}
        out[step] = result
    return out


# The events that say what a step did, whatever the generation routed it with: a case-v2
# `case` adds CaseStarted/CaseEvaluated, a canonical router its own task's events and
# NextEvaluated, so those (and the Airflow task events under them) are not compared.
STEP_EVENTS = frozenset(
    {
        "WorkflowStarted",
        "StepStarted",
        "ToolStarted",
        "ToolCompleted",
        "StepFinished",
        "LoopStarted",
        "LoopIterationStarted",
        "LoopIterationCompleted",
        "LoopFinished",
        "WorkflowFinished",
    }
)


def event_sequences(run) -> dict[tuple[str | None, Any], list[tuple[str, str | None]]]:
    """Per entity (a step, a loop iteration of it, or the workflow), the names and statuses of
    its events in the order they were recorded: a run's event sequence less the interleaving of
    branches and iterations, which Airflow's task order decides."""
    own = str(run.execution_id)
    out: dict[tuple[str | None, Any], list[tuple[str, str | None]]] = {}
    for event in run.events:
        if event.name in STEP_EVENTS and event.execution_id == own:
            key = (event.step, getattr(event, "iteration", None))
            out.setdefault(key, []).append((event.name, getattr(event, "status", None)))
    return out


def assert_same_run(before, after) -> None:
    """The same final state, the same steps finished, the same step results and the same event
    sequence per step (names, entities, statuses); wall-clock values (timestamps, HTTP Date
    headers, timings) normalised as the differential test does."""
    assert (after.state, finished(after)) == (before.state, finished(before))
    assert normalise(without_omitted(after.results, before.results)) == normalise(before.results)
    sequences = event_sequences(before)
    assert any(step for step, _ in sequences), "no step event recorded: nothing compared"
    assert event_sequences(after) == sequences


# Why a corpus playbook is not upgraded, by the phrase its U801 (or U803) says, and whether the
# canonical generation has a construct with the same meaning at all (False: no rewrite can be
# exact; the reasons, with the place in NoETL's engines, are in docs/editor.md).
BLOCKERS: tuple[tuple[str, str, bool], ...] = (
    ("retry", "canonical retry", False),
    ("sink", "canonical has no sink", False),
    ("per-iteration rule", "run per iteration", False),
    ("result action", "no action replacing the step's result", False),
    ("page collection", "no page collection", False),
    ("pass", "`pass`", False),
    ("postgres per-statement result", "one entry per statement", False),
    ("v1 loop body", "v1 loop", False),
    ("v1 loop body", "end of a v1 loop body", False),
    ("another event", "waits for another event", False),
    ("v1 iterator", "a v1 iterator step", True),
    ("guard binding", "a canonical arc guard does not see", True),
    ("vars/set as ctx", "`vars`", True),
    ("vars/set as ctx", "a rule's `set`", True),
    ("several targets", "routes to 2 steps", True),
    ("values along next", "passes no argum", True),
    ("values along next", "values passed along", True),
    ("v1 conditional next", "no exact canonical arc", True),
    ("v1 `.result` read", "answers with itself", True),
    ("v1 inputs under several keys", "binds inputs under several keys", True),
    ("tool keys checked differently", "checks differently", True),
)


def blockers(upgrade: Upgrade) -> dict[str, bool]:
    """The blocker classes of an upgrade that is not written, each with whether an exact
    canonical equivalent exists; a finding no class names raises (keep the table complete)."""
    out: dict[str, bool] = {}
    for diagnostic in upgrade.diagnostics:
        if diagnostic.code not in ("U801", "U803"):
            continue
        for name, phrase, exists in BLOCKERS:
            if phrase in diagnostic.message:
                out[name] = exists
                break
        else:
            raise AssertionError(f"no blocker class for: {diagnostic.message}")
    return out
