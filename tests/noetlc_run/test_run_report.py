"""`noetlc run`'s report builder, from runtime events of the kinds a region, a pipeline or a loop
task emits (no Airflow run: the events are built here)."""

from __future__ import annotations

from typing import Any

from airflow_plugin.events import Event
from airflow_plugin.local.report import TaskRow, build_report, render_summary

# -- the report builder ------------------------------------------------------------------------


def _event(name: str, step: str, status: str = "success", **fields: Any) -> Event:
    return Event(name=name, entity="step", entity_id=step, status=status, step=step, **fields)


REGION = {
    "start": {"step": "start", "routing": {}},
    "region_fetch": {
        "region": "region_fetch",
        "entry": ["fetch"],
        "steps": {"fetch": {"step": "fetch"}, "store": {"step": "store"}},
        "exits": ["done"],
    },
    "done": {"step": "done"},
}


def test_report_attributes_a_failure_inside_a_region_to_its_step():
    tasks = [
        TaskRow("start", state="success", try_number=1, duration=0.2, end=1.0),
        TaskRow(
            "region_fetch",
            state="failed",
            try_number=1,
            error="step 'store' failed: KeyError: 'items'",
        ),
        TaskRow("done", state="upstream_failed"),
    ]
    events = [
        _event("StepStarted", "fetch", "in_progress"),
        _event("ToolStarted", "fetch", "in_progress"),
        _event("ToolStarted", "fetch", "in_progress"),  # a retried call: two tool calls
        _event("StepFinished", "fetch", duration=0.5, data={"result": {"page": 1}}),
        _event("StepStarted", "store", "in_progress"),
        _event("ToolStarted", "store", "in_progress"),
        _event(
            "StepFinished",
            "store",
            "error",
            data={"error": {"type": "KeyError", "message": "'items'"}},
        ),
    ]
    report = build_report(
        payloads=REGION,
        tasks=tasks,
        xcoms={"start": {"result": {"ok": 1}, "ctx": {"page": 1}}},
        events=events,
        state="failed",
    )
    steps = report["steps"]
    assert steps["fetch"]["state"] == "success" and steps["fetch"]["result"] == {"page": 1}
    assert steps["fetch"]["attempts"] == 2 and steps["fetch"]["duration"] == 0.5
    assert steps["store"]["state"] == "failed" and steps["store"]["error"] == "KeyError: 'items'"
    assert steps["done"]["state"] == "not_run"
    assert report["errors"] == [] and report["ctx"] == {"page": 1}
    summary = render_summary(report, 1.0, "/tmp/x.log")
    assert summary.count("store") == 1 and "step store failed: KeyError: 'items'" in summary


def test_report_ctx_is_the_workload_then_the_payload_then_the_writes_secrets_hidden():
    report = build_report(
        payloads={"start": {"step": "start"}},
        tasks=[TaskRow("start", state="success", try_number=1, end=1.0)],
        xcoms={"start": {"result": 1, "ctx": {"page": 2, "seen": True}}},
        variables={"page": 1, "api_password": "hunter2", "region": "eu"},
    )
    assert report["ctx"] == {"page": 2, "api_password": "***", "region": "eu", "seen": True}


def test_report_lists_pipeline_tasks_with_their_attempts():
    payloads = {
        "fetch": {
            "step": "fetch",
            "pipeline": [{"name": "get", "kind": "http"}, {"kind": "python"}, {"name": "save"}],
        },
        "single": {"step": "single", "tool": {"kind": "python"}},
        "ruled": {
            "step": "ruled",
            "tool": {"kind": "python", "spec": {"policy": {"rules": [{"then": {"do": "retry"}}]}}},
        },
    }
    tasks = [TaskRow(t, state="success", try_number=1, end=1.0) for t in payloads]

    def started(step, label, attempt=1):
        return _event(
            "ToolStarted", step, "in_progress", tool_run_id=f"{step}:{label}", attempt=attempt
        )

    events = [
        started("fetch", "get"),
        started("fetch", "get", 2),
        started("fetch", "get", 3),
        started("fetch", "task_1"),
        started("single", "single"),
        started("ruled", "ruled_task"),
        started("ruled", "ruled_task", 2),
    ]
    steps = build_report(payloads=payloads, tasks=tasks, xcoms={}, events=events)["steps"]
    assert steps["fetch"]["pipeline"] == {
        "get": {"attempts": 3},
        "task_1": {"attempts": 1},
        "save": {"attempts": 0},  # never reached
    }
    assert "pipeline" not in steps["single"]
    assert steps["ruled"]["pipeline"] == {"ruled_task": {"attempts": 2}}


def test_a_loop_steps_duration_is_its_span_when_iterations_overlap():
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def at(name, seconds, **fields):
        return _event(name, "items", timestamp=t0 + timedelta(seconds=seconds), **fields)

    events = [
        at("StepStarted", 0.0, iteration=0),
        at("StepStarted", 0.1, iteration=1),
        at("StepFinished", 1.0, iteration=0, duration=1.0),
        at("StepFinished", 1.1, iteration=1, duration=1.0),
        at("StepStarted", 1.2),  # the tail's aggregation
        at("StepFinished", 1.25, duration=0.05),
    ]
    payloads = {"items": {"step": "items", "loop": {"iterator": "x", "in": [1, 2]}}}
    tasks = [TaskRow("items.tail", state="success", try_number=1, end=2.0)]
    report = build_report(payloads=payloads, tasks=tasks, xcoms={}, events=events)
    assert report["steps"]["items"]["duration"] == 1.25  # not 2.05, the sum


def test_report_without_events_falls_back_to_tasks_and_xcom():
    tasks = [
        TaskRow("start", state="success", try_number=1, end=1.0),
        TaskRow("region_fetch", state="failed", try_number=1, error="step 'store' failed: boom"),
        TaskRow("done", state="upstream_failed"),
    ]
    steps = build_report(payloads=REGION, tasks=tasks, xcoms={}, state="failed")["steps"]
    assert [steps[s]["state"] for s in ("start", "fetch", "store", "done")] == [
        "success",
        "not_run",
        "failed",
        "not_run",
    ]
    assert steps["store"]["error"] == "boom" and steps["start"]["attempts"] == 1


def test_report_counts_loop_iterations_and_merges_ctx_in_completion_order():
    payloads = {
        "items": {
            "step": "items",
            "loop": {
                "iterator": "x",
                "body": {"steps": {"work": {"step": "work"}}},
                "end": {"step": "end_items"},
            },
        },
        "last": {"step": "last"},
    }
    tasks = [
        TaskRow("items.head", state="success", try_number=1, end=1.0),
        TaskRow("items.body", map_index=0, state="success", try_number=1),
        TaskRow("items.body", map_index=1, state="success", try_number=2),
        TaskRow("items.tail", state="success", try_number=1, end=3.0),
        TaskRow("last", state="success", try_number=1, end=2.0),  # ended before the tail
    ]
    xcoms = {
        "items.tail": {
            "result": [1, 2],
            "results": {"work": 2, "end_items": {"n": 2}},
            "ctx": {"n": "tail"},
        },
        "last": {"result": "ok", "ctx": {"n": "last", "m": 1}, "vars": {"v": 1}},
    }
    events = [_event("LoopIterationCompleted", "items") for _ in range(3)]
    report = build_report(payloads=payloads, tasks=tasks, xcoms=xcoms, events=events)
    steps = report["steps"]
    assert list(steps) == ["items", "work", "end_items", "last"]
    assert steps["items"]["result"] == [1, 2] and steps["items"]["attempts"] == 3
    assert steps["items"]["iterations"] == 3 and "iterations" not in steps["last"]
    assert steps["items"]["tasks"]["items.body"] == {
        "state": "success",
        "attempts": 2,
        "instances": 2,
    }
    assert steps["work"]["result"] == 2 and steps["end_items"]["result"] == {"n": 2}
    assert report["ctx"] == {"n": "tail", "m": 1} and report["vars"] == {"v": 1}
    assert report["state"] == "success"
