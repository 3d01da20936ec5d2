"""Gates (spec-extensions §1) in real local runs: `noetlc run PLAYBOOK --signal GATE=VALUE`.

Every run goes through ``python -m noetl_compile run`` in a subprocess, as a user types it, on a
real local Airflow: the gate task parks in ``awaiting_input`` with a real ``hitl_detail`` row,
the answer is written the way the REST API writes it and the task resumes into
``execute_complete``; the sleep gate's trigger really waits. The event log is a SQLite store in
``tmp_path`` (``NOETL_EVENTS_URL``).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.corpus import seed
from tests.harness.run_cli import noetlc_run, report_of

ROOT = Path(__file__).resolve().parents[2]
GATES = ROOT / "playbooks" / "gates.yaml"
SEED = seed("gates_expense_approval")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("noetlc-gates-home")


def run(home: Path, events: Path, *args: Any) -> subprocess.CompletedProcess:
    return noetlc_run(home, "--json", *args, env={"NOETL_EVENTS_URL": str(events)})


def states(report: dict[str, Any]) -> dict[str, str]:
    return {step: value["state"] for step, value in report["steps"].items()}


def results(report: dict[str, Any]) -> dict[str, Any]:
    return {step: value["result"] for step, value in report["steps"].items()}


def gate_events(events: Path, execution_id: int) -> list[tuple[str, str, str, dict]]:
    with sqlite3.connect(events) as db:
        rows = db.execute(
            "SELECT name, entity_id, status, data FROM event_log WHERE execution_id = ? "
            "AND name IN ('PlaybookPaused', 'SignalReceived') ORDER BY seq",
            (str(execution_id),),
        ).fetchall()
    return [(name, gate, status, json.loads(data or "{}")) for name, gate, status, data in rows]


def test_approve_runs_charge_with_the_typed_discount(home, tmp_path):
    events = tmp_path / "events.db"
    result = run(
        home, events, GATES, "--signal", "start=discount=0.2", "--signal", "approve=approve"
    )
    assert result.returncode == 0, result.stderr
    report = report_of(result)
    assert states(report) == {
        "start": "success",
        "price": "success",
        "cool_down": "success",
        "approve": "success",
        "charge": "success",
        "cancel": "skipped",
    }
    out = results(report)
    start = out["start"]
    assert start["values"] == {"discount": 0.2} and isinstance(start["values"]["discount"], float)
    assert start["timed_out"] is False and start["responded_by"] and start["responded_at"]
    assert out["price"] == {"price": 960.0}  # 1200 * (1 - 0.2): a number, not a string
    assert out["approve"]["approved"] is True and out["approve"]["choice"] == "approve"
    assert out["charge"] == {"charged": 960.0}
    assert set(out["cool_down"]) == {"slept_until"}
    seen = gate_events(events, report["execution_id"])
    assert [(n, g, s) for n, g, s, _ in seen] == [
        ("PlaybookPaused", "start", "paused"),
        ("SignalReceived", "start", "success"),
        ("PlaybookPaused", "cool_down", "paused"),
        ("SignalReceived", "cool_down", "success"),
        ("PlaybookPaused", "approve", "paused"),
        ("SignalReceived", "approve", "success"),
    ]
    assert out["cool_down"]["slept_until"] == seen[2][3]["until"]  # the trigger's own moment
    paused_start, signal_start = seen[0][3], seen[1][3]
    assert paused_start["subject"] == "Discount for an order of 1200?"  # rendered by NoETL
    assert paused_start["timeout"] == "1d" and paused_start["on_timeout"] == "default"
    assert signal_start["values"] == {"discount": 0.2} and signal_start["timed_out"] is False
    assert seen[4][3]["subject"] == "Charge 960.0?"
    assert seen[5][3]["choice"] == "approve"
    with sqlite3.connect(events) as db:
        (paused_at, released_at) = db.execute(
            "SELECT min(timestamp), max(timestamp) FROM event_log WHERE execution_id = ? "
            "AND entity_id = 'cool_down' AND name IN ('PlaybookPaused', 'SignalReceived')",
            (str(report["execution_id"]),),
        ).fetchone()
    from datetime import datetime

    slept = datetime.fromisoformat(released_at) - datetime.fromisoformat(paused_at)
    assert slept.total_seconds() >= 4.9  # `duration: 5s`, waited for real by the trigger


def test_reject_is_routed_by_its_arc_to_cancel(home, tmp_path):
    events = tmp_path / "events.db"
    result = run(
        home, events, GATES, "--signal", 'start={"discount": 0.1}', "--signal", "approve=reject"
    )
    assert result.returncode == 0, result.stderr
    report = report_of(result)
    assert states(report)["charge"] == "skipped" and states(report)["cancel"] == "success"
    out = results(report)
    assert out["price"] == {"price": 1080.0}
    assert out["approve"]["approved"] is False and out["approve"]["choice"] == "reject"
    assert out["cancel"] == {"charged": 0}
    signals = [d for n, g, _, d in gate_events(events, report["execution_id"]) if g == "approve"]
    assert signals[-1]["choice"] == "reject"


def test_seed_expense_approval_pays_with_the_typed_rate(home, tmp_path):
    events = tmp_path / "events.db"
    result = run(
        home, events, SEED, "--signal", "start=rate=0.1", "--signal", "approve_payment=approve"
    )
    assert result.returncode == 0, result.stderr
    report = report_of(result)
    assert states(report)["pay"] == "success" and states(report)["notify_rejected"] == "skipped"
    out = results(report)
    assert out["calculate_expense"] == {"expense": 1320.0}
    assert out["pay"] == {"paid": 1320.0}
    paused = [
        d for n, g, _, d in gate_events(events, report["execution_id"]) if n == "PlaybookPaused"
    ]
    approve = next(d for d in paused if d["gate"] == "approve")
    assert approve["subject"] == "Pay 1320.0?"
    assert approve["body"] == f"Requested by execution {report['execution_id']}."


def test_seed_reject_notifies(home, tmp_path):
    result = run(
        home,
        tmp_path / "events.db",
        SEED,
        "--signal",
        "start=rate=0",
        "--signal",
        "approve_payment=reject",
    )
    assert result.returncode == 0, result.stderr
    report = report_of(result)
    assert states(report)["pay"] == "skipped" and states(report)["notify_rejected"] == "success"
    assert results(report)["calculate_expense"] == {"expense": 1200}


TIMEOUTS = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata:
      name: gate_timeouts
      path: tests/gate_timeouts
    workload:
      qty: 3
    workflow:
      - step: start
        tool:
          kind: gate
          gate: input
          subject: "Unit price for {{ qty }} items?"
          params:
            unit: {type: integer, default: 7}
          timeout: 2s
          on_timeout: default
        next:
          arcs:
            - step: total
      - step: total
        tool:
          kind: python
          input: {qty: "{{ qty }}", unit: "{{ start.values.unit }}"}
          code: |
            result = {"total": qty * unit}
        next:
          arcs:
            - step: decide
      - step: decide
        tool:
          kind: gate
          gate: approve
          subject: "Discount on {{ total.total }}?"
          timeout: 1s
          on_timeout: default
          default: reject
        next:
          spec: {mode: exclusive}
          arcs:
            - step: discounted
              when: "{{ decide.approved }}"
            - step: confirm
      - step: discounted
        tool:
          kind: python
          code: |
            result = {"discounted": True}
      - step: confirm
        tool:
          kind: gate
          gate: approve
          subject: "Charge {{ total.total }}?"
          timeout: 1s
        next:
          arcs:
            - step: done
      - step: done
        tool:
          kind: python
          code: |
            result = {"done": True}
    """


def test_timeouts_apply_the_default_or_fail(home, tmp_path):
    """No --signal: the input gate's 2s timeout gives its default (timed_out true) and the run
    goes on with it; an approve gate's default (reject) is routed by its arcs; the approve gate
    with `on_timeout: fail` fails the run."""
    playbook = tmp_path / "gate_timeouts.yaml"
    playbook.write_text(textwrap.dedent(TIMEOUTS))
    events = tmp_path / "events.db"
    result = run(home, events, playbook)
    assert result.returncode == 1, result.stderr
    report = report_of(result)
    assert states(report) == {
        "start": "success",
        "total": "success",
        "decide": "success",
        "discounted": "skipped",
        "confirm": "failed",
        "done": "not_run",
    }
    out = results(report)
    assert out["start"]["values"] == {"unit": 7} and out["start"]["timed_out"] is True
    assert out["start"]["responded_by"] is None
    assert out["total"] == {"total": 21}
    assert out["decide"]["approved"] is False and out["decide"]["choice"] == "reject"
    assert out["decide"]["timed_out"] is True and out["decide"]["responded_by"] is None
    error = report["steps"]["confirm"]["error"]
    assert error == "step 'confirm': the approve gate got no answer within 1s (on_timeout: fail)"
    seen = gate_events(events, report["execution_id"])
    assert [(n, g, s) for n, g, s, _ in seen] == [
        ("PlaybookPaused", "start", "paused"),
        ("SignalReceived", "start", "success"),
        ("PlaybookPaused", "decide", "paused"),
        ("SignalReceived", "decide", "success"),
        ("PlaybookPaused", "confirm", "paused"),
        ("SignalReceived", "confirm", "error"),
    ]
    assert seen[1][3]["timed_out"] is True and seen[1][3]["values"] == {"unit": 7}
    assert seen[3][3] == {
        "gate": "approve",
        "choice": "reject",
        "responded_by": None,
        "timed_out": True,
    }
    assert seen[5][3]["timed_out"] is True


def test_a_gate_without_a_signal_names_the_signal_to_give(home, tmp_path):
    result = run(home, tmp_path / "events.db", SEED)
    assert result.returncode == 1
    error = report_of(result)["steps"]["start"]["error"]
    assert error.startswith(
        "gate 'start' waits for an answer ('Interest rate for an expense of 1200'"
    )
    assert error.endswith("answer it with `noetlc run ... --signal start=rate=<number>`")


def test_signal_mistakes_are_clear(home, tmp_path):
    unknown = run(home, tmp_path / "events.db", SEED, "--signal", "nope=approve")
    assert unknown.returncode == 2
    assert "--signal nope: no approve/input gate 'nope' (gates: approve_payment, start)" in (
        unknown.stderr
    )
    assert "Traceback" not in unknown.stderr
    untyped = run(home, tmp_path / "events.db", SEED, "--signal", "start=rate=lots")
    assert untyped.returncode == 1
    error = report_of(untyped)["steps"]["start"]["error"]
    assert error == (
        "--signal start: param 'rate' expects number, got 'lots'; "
        "answer with --signal start=rate=<number>"
    )
    shape = run(home, tmp_path / "events.db", SEED, "--signal", "start")
    assert shape.returncode == 2 and "--signal expects GATE=VALUE, got 'start'" in shape.stderr


UNTIL = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata:
      name: gate_until
      path: tests/gate_until
    workload:
      wake: "2000-01-01T00:00:00+00:00"
    workflow:
      - step: start
        tool:
          kind: gate
          gate: sleep
          until: "{{ wake }}"
        next:
          arcs:
            - step: ask
      - step: ask
        tool:
          kind: gate
          gate: approve
          subject: "Pay {{ nothing.amount }}?"
          timeout: 1h
    """


def test_sleep_until_renders_its_time_and_an_unrenderable_subject_fails_loudly(home, tmp_path):
    from datetime import UTC, datetime, timedelta

    playbook = tmp_path / "gate_until.yaml"
    playbook.write_text(textwrap.dedent(UNTIL))
    wake = (datetime.now(UTC) + timedelta(seconds=3)).replace(microsecond=0)
    events = tmp_path / "events.db"
    result = run(home, events, playbook, "--set", f"wake={wake.isoformat()}")
    assert result.returncode == 1, result.stderr
    report = report_of(result)
    assert states(report) == {"start": "success", "ask": "failed"}
    slept = datetime.fromisoformat(results(report)["start"]["slept_until"])
    assert slept >= wake
    error = report["steps"]["ask"]["error"]
    assert error == (
        "step 'ask': `tool.subject` cannot render 'Pay {{ nothing.amount }}?': "
        "UndefinedError: 'nothing' is undefined"
    )
    # Nobody was asked anything: the gate failed before it paused.
    assert [g for _, g, _, _ in gate_events(events, report["execution_id"])] == ["start", "start"]
