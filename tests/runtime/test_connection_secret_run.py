"""A tool using an Airflow Connection (``auth: pg_local``) under ``noetlc run``, on whichever
Airflow this runs with: scripts/smoke-airflow.sh runs this file in each version's virtualenv
(Airflow 3.0 reads Connections outside a task through Airflow core: airflow_plugin/compat.py).
The Connection's password is in no file the run wrote: the task logs, the metadata DB (its
XComs, rendered fields), the event log and its outbox."""

from __future__ import annotations

from pathlib import Path

import psycopg

from tests.harness.run_cli import noetlc_run, report_of

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "Pg-pa55word-7c41e9d2"  # the test server's trust auth accepts any password


def test_a_connection_password_reaches_no_log_xcom_or_event(pg_cluster, pg_test_dsn, tmp_path):
    with_password = pg_test_dsn.replace("://postgres@", f"://postgres:{PASSWORD}@", 1)
    assert PASSWORD in with_password
    with psycopg.connect(pg_test_dsn, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS example_scores")
    connections = tmp_path / "connections.yaml"
    connections.write_text(f"pg_local: {with_password}\n")
    home = tmp_path / "home"
    result = noetlc_run(
        home, ROOT / "playbooks" / "postgres_upsert.yaml", "--connections", connections, "--json"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = report_of(result)
    assert report["steps"]["read_back"]["result"]["command_0"]["rows"] == [
        {"name": "ada", "score": 10},
        {"name": "bob", "score": 2},
        {"name": "cy", "score": 3},
    ]
    assert PASSWORD not in result.stdout + result.stderr
    secret = PASSWORD.encode()
    written = [p for p in home.rglob("*") if p.is_file() and secret in p.read_bytes()]
    # The connections file itself is outside the home; nothing inside may hold the value.
    assert written == [], written
