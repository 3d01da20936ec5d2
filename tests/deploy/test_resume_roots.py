"""What `noetlc resume` clears: the roots it hands Airflow's clear (each with its downstream).

Plain data in, task ids out: the task instances as the REST API lists them and the execution's
events as the event log stores them (the deployed test, test_resume_deployed.py, runs it for
real)."""

from __future__ import annotations

import pytest

from airflow_plugin.deploy.resume import ResumeError, resume_roots

TIS = [
    {"task_id": "start", "state": "success"},
    {"task_id": "extract", "state": "success"},
    {"task_id": "transform", "state": "failed"},
    {"task_id": "load", "state": "upstream_failed"},
    {"task_id": "measure", "state": "success"},
    {"task_id": "measure.body", "map_index": 0, "state": "success"},
    {"task_id": "measure.body", "map_index": 1, "state": "success"},
    {"task_id": "noetl_outcome", "state": "upstream_failed"},
]


def finished(step: str, status: str, task_id: str) -> dict:
    return {"name": "StepFinished", "step": step, "status": status, "task_id": task_id, "data": {}}


def test_the_failed_task_is_the_root_not_what_failed_upstream_of_it():
    assert resume_roots(TIS) == ["transform"]


def test_a_step_that_failed_inside_a_task_that_succeeded_is_a_root_too():
    tis = [dict(ti, state="success") for ti in TIS[:3]] + [
        {"task_id": "noetl_outcome", "state": "failed"}
    ]
    events = [
        finished("extract", "success", "extract"),
        finished("transform", "error", "transform"),
    ]
    assert resume_roots(tis, events) == ["noetl_outcome", "transform"]


def test_a_step_that_failed_then_succeeded_is_not_a_root():
    tis = [dict(ti, state="success") for ti in TIS]
    events = [
        finished("transform", "error", "transform"),
        finished("transform", "success", "transform"),
    ]
    with pytest.raises(ResumeError, match="nothing failed"):
        resume_roots(tis, events)


def test_from_a_step_by_its_events_or_by_the_compilers_task_ids():
    fused = [finished("extract", "success", "fused_start")]
    tis = [*TIS, {"task_id": "fused_start", "state": "success"}]
    assert resume_roots(tis, fused, from_step="extract") == ["fused_start"]
    assert resume_roots(TIS, from_step="measure") == ["measure", "measure.body"]
    with pytest.raises(ResumeError, match="no task of this run runs step 'nope'"):
        resume_roots(TIS, from_step="nope")


def test_the_command_says_what_it_could_not_reach(capsys):
    """`noetlc resume` is wired to the CLI: a run named by --dag/--run, an API server that is
    not there (a port nobody listens on), one line and exit status 1."""
    import socket

    from noetl_compile.cli import main

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(
        [
            "resume",
            "--dag",
            "d",
            "--run",
            "r",
            "--events-url",
            "sqlite:///:memory:",
            "--url",
            f"http://127.0.0.1:{port}",
            "--user",
            "u",
            "--password",
            "p",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and f"cannot reach Airflow at http://127.0.0.1:{port}" in err, err
