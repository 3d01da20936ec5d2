"""The NoETL 5 application of examples/noetl5_shop/ on the scripted stack (issue 30's last
acceptance item): `scripts/airflow-stack.sh` (LocalExecutor) compiles the five playbooks into its
DAG folder, the checkout run is triggered through the REST API against the stack's own Postgres
(noetl_data), each nested call is a real child DAG run waited for on the triggerer (its result
back in the step: `return_result`/`result_step`), the audit call is started and not waited for
(`{status: started, execution_id, path, async: true}`, its child run ends on its own), and the
rows are in the schema. The DSN is a run value (the stack's throwaway database), in no DAG file.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.slow

CHECKOUT = "examples.noetl5_shop.checkout"
AUDIT = "examples.noetl5_shop.audit"


def test_the_shop_checkout_runs_deployed_with_nested_results(local_stack) -> None:
    client = local_stack.client
    dsn = local_stack.manifest["data_url"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS n5shop CASCADE")
    run_id = client.trigger(CHECKOUT, conf={"pg_dsn": dsn})["dag_run_id"]
    run = client.wait_for_run(CHECKOUT, run_id, timeout=420)
    assert run["state"] == "success", client.task_instances(CHECKOUT, run_id)

    def result(task: str):
        return client.xcom_return(CHECKOUT, run_id, task)["result"]

    customer, order, audit = result("customer"), result("order"), result("audit")
    assert customer["name"] == "Ann O'Neil" and customer["email"] == "ann@example.com"
    # NoETL 5's numeric as exact decimal text, through a child DAG run's XCom (2 x 4.25 + 12.50).
    assert order["order"]["total"] == "21.00" and order["lines"] == 2
    assert audit["status"] == "started" and audit["async"] is True
    assert audit["path"] == "examples/noetl5_shop/audit" and audit["execution_id"]
    history = result("history")
    assert history["columns"] == ["id", "total", "lines"] and history["row_count"] == 1
    assert result("reply") == {
        "customer_id": customer["customer_id"],
        "order": order["order"],
        "orders": 1,
        "audit": "started",
    }
    # The audit child was not waited for: its run ends on its own, and writes its row.
    deadline = time.monotonic() + 180
    rows: list = []
    while time.monotonic() < deadline:
        with psycopg.connect(dsn) as conn:
            rows = conn.execute(
                "SELECT c.name, o.total::text, a.event, a.detail->>'total' FROM n5shop.orders o "
                "JOIN n5shop.customers c ON c.id = o.customer_id "
                "JOIN n5shop.audit a ON (a.detail->>'id')::bigint = o.id"
            ).fetchall()
        if rows:
            break
        time.sleep(2)
    assert rows == [("Ann O'Neil", "21.00", "order_placed", "21.00")]
    dags = Path(local_stack.manifest["dags_folder"])
    text = "".join(p.read_text(encoding="utf-8") for p in dags.rglob("*.py"))
    assert "n5shop" in text and dsn not in text
