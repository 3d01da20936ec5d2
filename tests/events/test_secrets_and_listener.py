"""What reaches the event log from a real run: never a secret; and the listener plugin as
Airflow loads it (entry point), telling each task attempt's end exactly once."""

from __future__ import annotations

import json
import textwrap

from airflow_plugin.events.listener import EventLogListener
from airflow_plugin.templating.ids import execution_id_for
from noetl_compile.cli import main

PLAYBOOK = """
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: secret_paths, path: events/secret_paths}
    workload:
      db_password: ""
      settings: {service_api_key: ""}
    workflow:
      - step: start
        tool: {kind: secrets, name: api_token}
        next: {arcs: [{step: use}]}
      - step: use
        tool:
          kind: python
          input:
            token: "{{ start.secret_value }}"
            copied: "{{ workload.db_password }}"
            key: "{{ workload.settings.service_api_key }}"
          code: |
            result = {"echo": token, "copy": copied, "again": key, "length": len(token)}
        next: {arcs: [{step: query}]}
      - step: query
        tool:
          kind: postgres
          auth: pg_secret
          query: "SELECT 1 AS one"
"""

SECRETS = ("tok-event-secret-0987", "workload-pw-4242-zz", "wl-api-key-31337", "pg-conn-pw-5150")


def test_no_secret_reaches_any_event_row(
    event_log, airflow_db, run_dag, tmp_path, monkeypatch, pg_cluster, request
):
    from airflow_plugin.hooks.secrets import clear_secret_cache

    monkeypatch.setenv("AIRFLOW_VAR_API_TOKEN", SECRETS[0])
    clear_secret_cache()  # an earlier test of this process may have cached another value
    request.addfinalizer(clear_secret_cache)  # and a later one must not see this one
    # A connection with a password (the throwaway cluster trusts local users, so it is only
    # carried, never checked: exactly what must not leak).
    dsn = pg_cluster.dsn("postgres").replace(
        "postgresql://postgres@", "postgresql://postgres:pg-conn-pw-5150@"
    )
    monkeypatch.setenv("AIRFLOW_CONN_PG_SECRET", dsn)
    source = tmp_path / "secret_paths.yaml"
    source.write_text(textwrap.dedent(PLAYBOOK))
    assert main(["compile", str(source), "-o", str(tmp_path / "dags")]) == 0
    (dag_file,) = (tmp_path / "dags").glob("*.py")
    # The secrets arrive with the run request, as a user passes them (never in the playbook).
    conf = {"db_password": SECRETS[1], "settings": {"service_api_key": SECRETS[2]}}
    out = run_dag(dag_file.read_text(), "events.secret_paths", conf)
    assert out.state == "success", out.states
    assert out.xcom["use"]["result"]["length"] == len(SECRETS[0])  # the secret was really used
    rows = event_log.rows(dag_id="events.secret_paths", run_id=out.run_id)
    assert {r["name"] for r in rows} >= {
        "PlaybookExecutionRequested",
        "ToolCompleted",
        "PlaybookProcessed",
    }
    dump = json.dumps(rows, default=str)
    for secret in SECRETS:
        assert secret not in dump, secret
    requested = next(r for r in rows if r["name"] == "PlaybookExecutionRequested")
    assert requested["data"]["workload"]["db_password"] == "***"


def test_the_plugin_is_loaded_by_its_entry_point_with_the_listener():
    from airflow import plugins_manager

    (info,) = [p for p in plugins_manager.get_plugin_info() if p["name"] == "noetl"]
    assert type(info["source"]).__name__ == "EntryPointSource"
    assert info["listeners"] == ["airflow_plugin.events.listener.EventLogListener"]
    # The task runner's own listener manager (where task hooks fire) has it too.
    from airflow.sdk.listener import get_listener_manager

    manager = get_listener_manager()
    assert any(isinstance(p, EventLogListener) for p in manager.pm.get_plugins())


def test_a_failure_told_by_worker_and_scheduler_is_stored_once(
    event_log, airflow_db, run_dag, tmp_path
):
    source = tmp_path / "fails.yaml"
    source.write_text(
        textwrap.dedent(
            """
            apiVersion: noetl.io/v2
            kind: Playbook
            metadata: {name: fails, path: events/fails}
            workflow:
              - step: start
                tool: {kind: python, code: "raise RuntimeError('boom')"}
            """
        )
    )
    assert main(["compile", str(source), "-o", str(tmp_path / "dags")]) == 0
    (dag_file,) = (tmp_path / "dags").glob("*.py")
    out = run_dag(dag_file.read_text(), "events.fails")
    assert out.state == "failed"
    # The scheduler tells the same attempt's failure again (its ORM task instance, as after a
    # lost heartbeat): the log keeps the first report.
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id="events.fails", run_id=out.run_id).one()
        session.expunge(ti)
    EventLogListener().on_task_instance_failed(None, ti, "executor reports the task failed")
    rows = event_log.rows(dag_id="events.fails", run_id=out.run_id)
    finished = [r for r in rows if r["name"] == "TaskFinished"]
    assert len(finished) == 1
    assert finished[0]["source"] == "worker" and "boom" in finished[0]["data"]["error"]
    assert rows[-1]["name"] == "PlaybookProcessed" and rows[-1]["status"] == "error"
    assert rows[-1]["execution_id"] == execution_id_for("events.fails", out.run_id)
