"""`noetlc status` and `noetlc events` on a 50-item loop: the loop step is one run of 50
iterations (not 51 runs), a branch not taken shows as skipped, columns line up; the timeline
folds a loop's iterations after the first into one line (a failed one always shows), `--all`
prints every event. The events are the ones a run records (names, fields), written out."""

from __future__ import annotations

from typing import Any

from airflow_plugin.events.cli import render_status, timeline
from airflow_plugin.events.projection import project

ITEMS = 50


def _row(seq: int, name: str, entity: str, entity_id: str, status: str, **fields: Any) -> dict:
    return {
        "execution_id": 7,
        "dag_id": "t.loop50",
        "run_id": "manual__1",
        "timestamp": f"2026-01-01T00:00:{seq // 100:02d}.{seq % 100:02d}0000",
        "name": name,
        "entity": entity,
        "entity_id": entity_id,
        "status": status,
        "data": {},
        **fields,
    }


def loop_run(failed_item: int | None = None) -> list[dict]:
    rows = [
        _row(0, "PlaybookExecutionRequested", "playbook", "t.loop50", "success"),
        _row(1, "StepFinished", "step", "start", "success", step="start", data={"result": 1}),
        _row(2, "LoopStarted", "loop", "each", "in_progress", step="each", loop_id="each"),
    ]
    for i in range(ITEMS):
        status = "error" if i == failed_item else "success"
        common = {"step": "each", "loop_id": "each", "iteration": i}
        rows += [
            _row(3 + i, "LoopIterationStarted", "loop", f"each#{i}", "in_progress", **common),
            _row(3 + i, "StepFinished", "step", f"each#{i}", status, **common),
            _row(3 + i, "LoopIterationCompleted", "loop", f"each#{i}", status, **common),
        ]
    rows += [
        _row(60, "LoopFinished", "loop", "each", "success", step="each", loop_id="each"),
        _row(61, "StepFinished", "step", "each", "success", step="each", data={"result": []}),
        _row(62, "TaskFinished", "task", "big", "skipped", data={"state": "skipped"}),
        _row(63, "TaskFinished", "task", "noetl_outcome", "success", data={"state": "success"}),
        _row(64, "PlaybookProcessed", "playbook", "t.loop50", "success"),
    ]
    return rows


def test_a_loop_is_one_run_of_its_iterations_and_a_skipped_step_shows():
    state = project(loop_run())
    assert state["steps"]["each"] == {
        "status": "success",
        "runs": 1,
        "iterations": ITEMS,
        "error": None,
    }
    assert state["steps"]["big"] == {"status": "skipped", "runs": 0, "error": None}
    assert "noetl_outcome" not in state["steps"]
    text = render_status(state).splitlines()
    steps = text[text.index("steps:") + 1 : text.index("steps:") + 4]
    assert steps == [
        "  start  success  runs 1",
        "  each   success  runs 1  iterations 50",
        "  big    skipped",
    ]
    results = text[text.index("results:") + 1 :]
    assert results[0].startswith("  start  1") and results[1].startswith("  each   []")


def test_the_timeline_folds_iterations_after_the_first_and_keeps_a_failed_one():
    rows = loop_run(failed_item=30)
    full = timeline(rows).splitlines()
    assert len(full) == len(rows) + 1
    folded = timeline(rows, collapse=True).splitlines()
    iterations = {line.split("iter ")[1].split()[0] for line in folded if " iter " in line}
    assert iterations == {"0", "30"}  # the first, and the one that failed
    (summary,) = [line for line in folded if line.startswith("  ...")]
    assert summary == (
        "  ...  48 more iterations of each (144 events: 48 success); --all shows them"
    )
    # The folded line sits where the last folded iteration ended, before the loop's end.
    assert folded.index(summary) < next(
        i for i, line in enumerate(folded) if "LoopFinished" in line
    )
    assert len(folded) == 1 + len(rows) - 144 + 1


def test_a_run_without_loops_is_printed_whole():
    rows = [r for r in loop_run() if r.get("iteration") is None]
    assert timeline(rows, collapse=True) == timeline(rows)


def test_a_mapped_instance_is_named_as_airflow_names_it():
    # The listener records a mapped instance's label (its map_index_template rendered) on its
    # task events; `noetlc events` and `noetlc status` print `measure.body (Oslo)` as Airflow's
    # UI does, not the entity id `measure.body[1]`.
    mapped = {"task_id": "measure.body", "map_index": 1, "step": "measure"}
    rows = [
        _row(0, "PlaybookExecutionRequested", "playbook", "t.loop50", "success"),
        _row(
            1,
            "TaskStarted",
            "task",
            "measure.body[1]",
            "in_progress",
            try_number=1,
            data={"map_label": "Oslo"},
            **mapped,
        ),
        _row(
            2,
            "TaskFinished",
            "task",
            "measure.body[1]",
            "error",
            try_number=1,
            data={"map_label": "Oslo", "state": "failed", "error": "ValueError: no data"},
            **mapped,
        ),
        _row(
            3,
            "TaskStarted",
            "task",
            "measure.body[1]",
            "in_progress",
            try_number=2,
            data={"map_label": "Oslo"},
            **mapped,
        ),
        _row(
            4,
            "TaskFinished",
            "task",
            "measure.body[1]",
            "success",
            try_number=2,
            data={"map_label": "Oslo", "state": "success"},
            **mapped,
        ),
        # An instance whose label was never recorded keeps its entity id.
        _row(
            5,
            "TaskFinished",
            "task",
            "measure.body[2]",
            "success",
            try_number=1,
            data={"state": "success"},
            task_id="measure.body",
            map_index=2,
            step="measure",
        ),
    ]
    lines = timeline(rows).splitlines()
    entities = [line.split()[2:5] for line in lines[2:]]
    assert entities == [["task", "measure.body", "(Oslo)"]] * 4 + [
        ["task", "measure.body[2]", "success"]
    ]
    history = render_status(project(rows))
    assert "  task measure.body (Oslo) try 1  failed  error: ValueError: no data" in history
    assert "  task measure.body (Oslo) try 2  success" in history
    assert "body[1]" not in history
