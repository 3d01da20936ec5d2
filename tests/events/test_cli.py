"""`noetlc events` and `noetlc status` on a real run's log, and the store chosen by settings."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_plugin.events.config import settings
from airflow_plugin.events.store import EventStore
from airflow_plugin.templating.ids import execution_id_for
from noetl_compile.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run_hello(event_log, airflow_db, run_dag, tmp_path):
    assert main(["compile", str(ROOT / "playbooks" / "hello_world.yaml"), "-o", str(tmp_path)]) == 0
    out = run_dag((tmp_path / "hello_world.py").read_text(), "examples.hello_world")
    assert out.state == "success"
    event_log.recorder.flush(30)
    return out, execution_id_for("examples.hello_world", out.run_id)


def test_timeline_status_and_listing(event_log, airflow_db, run_dag, tmp_path, capsys):
    out, execution_id = run_hello(event_log, airflow_db, run_dag, tmp_path)
    url = event_log.store.url
    capsys.readouterr()
    assert main(["events", str(execution_id), "--url", url]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text.pop(0) == f"event log: {event_log.store.describe()}"  # says where it read
    assert text[0].startswith(f"execution {execution_id}  examples.hello_world  run {out.run_id}")
    names = [line.split()[1] for line in text[1:]]
    assert names[0] == "PlaybookExecutionRequested" and names[-1] == "PlaybookProcessed"
    assert names.count("StepFinished") == 3

    assert (
        main(
            ["events", "--dag", "examples.hello_world", "--run", out.run_id, "--json", "--url", url]
        )
        == 0
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == len(names) and {r["execution_id"] for r in rows} == {str(execution_id)}

    assert main(["status", str(execution_id), "--json", "--url", url]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["status"] == "success"
    assert state["results"] == {
        "start": {"status": "initialized"},
        "greet": {"greeting": "HELLO WORLD"},
        "end": {"status": "complete", "echo": "HELLO WORLD"},
    }
    assert main(["status", str(execution_id), "--url", url]) == 0
    human = capsys.readouterr().out
    assert "execution" in human and "greet  success  runs 1" in human

    assert main(["events", "--url", url]) == 0
    listing = capsys.readouterr().out
    assert str(execution_id) in listing and "examples.hello_world" in listing
    # aligned columns: state, start, duration and the failing step (none here)
    header, row = (
        listing.splitlines()[1],
        next(line for line in listing.splitlines() if line.startswith(str(execution_id))),
    )
    assert header.split()[:5] == ["EXECUTION", "STATE", "DAG", "STARTED", "DURATION"]
    assert row.index("success") == header.index("STATE") and row.split()[-1] == "-"
    assert row.index("examples.hello_world") == header.index("DAG")


def test_usage_and_unreachable_store_are_clear(capsys, tmp_path):
    assert main(["events", "not-a-number", "--url", str(tmp_path / "e.db")]) == 2
    assert "not an execution id" in capsys.readouterr().err
    assert main(["status", "123", "--url", "postgresql://nobody@127.0.0.1:1/none"]) == 1
    err = capsys.readouterr().err
    assert "unreachable" in err and "Traceback" not in err
    assert main(["status", "123", "--url", str(tmp_path / "e.db")]) == 1
    assert "no events for execution 123" in capsys.readouterr().err


def test_settings_default_to_sqlite_in_the_airflow_home_and_take_a_connection(pg_cluster, tmp_path):
    default = settings({"AIRFLOW_HOME": str(tmp_path)})
    assert default.enabled and default.url == str(tmp_path / "noetl" / "events.db")
    assert default.outbox == tmp_path / "noetl" / "outbox"
    assert not settings({"NOETL_EVENTS": "off"}).enabled
    # An Airflow Connection names the store (AIRFLOW_CONN_* works without a metadata DB).
    import os

    dsn = pg_cluster.create_database("events_by_conn")
    os.environ["AIRFLOW_CONN_NOETL_EVENTS_TEST"] = dsn
    try:
        from airflow_plugin.hooks.connections import clear_cache

        clear_cache()
        chosen = settings(
            {"NOETL_EVENTS_CONN_ID": "noetl_events_test", "AIRFLOW_HOME": str(tmp_path)}
        )
    finally:
        del os.environ["AIRFLOW_CONN_NOETL_EVENTS_TEST"]
    store = EventStore(chosen.url)
    assert store.dialect == "postgresql" and store.count() == 0
    assert store.describe().endswith("/events_by_conn")
