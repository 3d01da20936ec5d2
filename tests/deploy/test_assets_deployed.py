"""Tables as Airflow Assets on the LocalExecutor stack: a producer playbook's sink into a table
(an outlet Asset) starts the playbook scheduled on that table by
``noetlc compile --schedule-on-assets`` (docs/ui.md, "Tables as Assets")."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.slow

PLAYBOOKS = Path(__file__).resolve().parent / "asset_playbooks"
PRODUCER = "tests.asset_producer"
CONSUMER = "tests.asset_consumer"
ASSET = "x-noetl://postgres/pg_local/public/asset_orders"


def _asset_runs(client, dag_id: str) -> list[dict]:
    runs = client.request("GET", f"dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"]
    return [run for run in runs if run["run_type"] == "asset_triggered"]


def test_a_producer_table_write_triggers_the_asset_scheduled_consumer(local_stack) -> None:
    started = time.monotonic()
    client = local_stack.client
    # Into a folder of the stack's DAG folder (the dag-processor lists it every 5 s).
    out = Path(local_stack.state) / "dags" / "assets"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "noetl_compile",
            "compile",
            "--schedule-on-assets",
            str(PLAYBOOKS),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    consumer = client.wait_for_dag(CONSUMER, timeout=120)
    assert consumer["timetable_summary"] == "Asset" and not consumer["is_paused"], consumer
    details = client.request("GET", f"dags/{CONSUMER}/details")
    assert ASSET in str(details["asset_expression"]), details["asset_expression"]
    assert _asset_runs(client, CONSUMER) == []

    # The sink inserts into a table that exists (PostgreSQL sinks create none).
    with psycopg.connect(local_stack.manifest["data_url"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS asset_orders (id serial PRIMARY KEY, amount int)")
    run_id = client.trigger(PRODUCER)["dag_run_id"]
    assert client.wait_for_run(PRODUCER, run_id, timeout=180)["state"] == "success"

    deadline = time.monotonic() + 120
    while not (runs := _asset_runs(client, CONSUMER)):
        assert time.monotonic() < deadline, "no asset-triggered run of the consumer in 120 s"
        time.sleep(1.0)
    consumer_run = runs[0]["dag_run_id"]
    finished = client.wait_for_run(CONSUMER, consumer_run, timeout=180)
    assert finished["state"] == "success", finished
    events = client.request("GET", f"dags/{CONSUMER}/dagRuns/{consumer_run}/upstreamAssetEvents")
    sources = [
        (e["uri"], e["source_dag_id"], e["source_run_id"], e["source_task_id"])
        for e in events["asset_events"]
    ]
    assert sources == [(ASSET, PRODUCER, run_id, "start")], events  # the sink's step
    # The consumer read the rows the sink wrote.
    result = client.xcom_return(CONSUMER, consumer_run, "start")["result"]
    assert result["rows"][0]["orders"] >= 2 and result["rows"][0]["total"] >= 12, result
    print(f"producer -> asset-triggered consumer done in {time.monotonic() - started:.1f} s")
