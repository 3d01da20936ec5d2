"""The NoETL 5 application of examples/noetl5_shop/ (issue 30): five API-like playbooks over a
Postgres schema, the request bound whole as JSON (`params: ["{{ workload.request | tojson |
b64encode }}"]`), nested calls that return their child's result (`return_result`,
`result_step`) and one that is started and not waited for. It checks clean without `--dialect`
(read as NoETL 5 by its constructs, no C516) and runs with `noetlc run` against a throwaway
Postgres; the DSN is a run value, in no DAG file."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetl_compile.check import check_paths

ROOT = Path(__file__).resolve().parents[2]
SHOP = ROOT / "examples" / "noetl5_shop"


def test_the_shop_checks_clean_as_noetl5_without_dialect():
    results, _ = check_paths([str(SHOP)])
    assert len(results) == 6
    for result in results:
        assert result.playbook is not None and result.playbook.generation == "noetl5", result.path
        # Only S119 (info: read as NoETL 5, and why): no C516, no warning, no error.
        assert [d.code for d in result.diagnostics] == ["S119"], (result.path, result.diagnostics)


def test_the_shop_runs_against_postgres(tmp_path_factory, pg_test_dsn):
    pytest.importorskip("airflow")
    import psycopg

    from tests.harness.run_cli import noetlc_run, report_of

    home = tmp_path_factory.mktemp("noetl5-shop-home")
    try:
        done = noetlc_run(home, SHOP / "checkout.yaml", "--json", "--set", f"pg_dsn={pg_test_dsn}")
        assert done.returncode == 0, done.stdout + done.stderr
        report = report_of(done)
        steps = report["steps"]
        assert {n: s["state"] for n, s in steps.items()} == dict.fromkeys(
            ("start", "customer", "order", "audit", "history", "reply"), "success"
        )
        customer = steps["customer"]["result"]
        assert customer["name"] == "Ann O'Neil" and customer["email"] == "ann@example.com"
        order = steps["order"]["result"]
        # NoETL 5's numeric: exact decimal text (2 x 4.25 + 12.50).
        assert order["order"]["total"] == "21.00" and order["lines"] == 2
        audit = steps["audit"]["result"]
        assert audit["status"] == "started" and audit["async"] is True
        assert audit["path"] == "examples/noetl5_shop/audit" and audit["execution_id"]
        history = steps["history"]["result"]  # the child's `start` step: {columns, rows, row_count}
        assert history["columns"] == ["id", "total", "lines"] and history["row_count"] == 1
        assert history["rows"] == [{**order["order"], "lines": 2}]
        assert steps["reply"]["result"] == {
            "customer_id": customer["customer_id"],
            "order": order["order"],
            "orders": 1,
            "audit": "started",
        }
        with psycopg.connect(pg_test_dsn) as conn:
            rows = conn.execute(
                "SELECT c.name, o.total::text, a.event, a.detail->>'total' FROM n5shop.orders o "
                "JOIN n5shop.customers c ON c.id = o.customer_id "
                "JOIN n5shop.audit a ON (a.detail->>'id')::bigint = o.id"
            ).fetchall()
        assert rows == [("Ann O'Neil", "21.00", "order_placed", "21.00")]
        dags = "".join(
            p.read_text(encoding="utf-8") for p in home.rglob("*.py") if "dags" in p.parts
        )
        assert "n5shop" in dags and pg_test_dsn not in dags
    finally:
        with psycopg.connect(pg_test_dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS n5shop CASCADE")


def test_a_call_that_does_not_wait_triggers_a_real_child_dag_run(tmp_path_factory):
    """Children as real DAG runs (`NOETL_NESTED=trigger`, as deployed): the call without
    `return_result` comes back `{status: started, execution_id, path, async: true}` with the
    child run's own execution id; the one with it, the child's result."""
    pytest.importorskip("airflow")
    from tests.harness.run_cli import noetlc_run, report_of

    home = tmp_path_factory.mktemp("noetl5-nested-home")
    parent = ROOT / "tests" / "noetl5_nested" / "parent.yaml"
    done = noetlc_run(home, parent, "--json", env={"NOETL_NESTED": "trigger"})
    assert done.returncode == 0, done.stdout + done.stderr
    report = report_of(done)
    steps = report["steps"]
    started = steps["start"]["result"]
    assert {k: started[k] for k in ("status", "path", "async")} == {
        "status": "started",
        "path": "tests/noetl5_nested/child",
        "async": True,
    }
    assert steps["waited"]["result"] == {"hello": "bo"}
    assert steps["done"]["result"] == {"started": "started", "got": "bo"}
    children = report["children"]
    assert len(children) == 2 and {c["state"] for c in children} == {"success"}
    assert started["execution_id"] in {c["execution_id"] for c in children}
    assert {c["steps"]["start"]["result"]["hello"] for c in children} == {"ann", "bo"}


def test_return_step_waits_for_a_real_child_dag_run_and_returns_its_status(tmp_path_factory):
    """`return_step` with children as real DAG runs (`NOETL_NESTED=trigger`, as deployed): the
    call waits (poking every `poll_interval` s) for the child run's end and returns NoETL 5's
    status payload; a failed child run is FAILED in it and not the call's failure."""
    pytest.importorskip("airflow")
    from tests.harness.run_cli import noetlc_run, report_of

    home = tmp_path_factory.mktemp("noetl5-status-home")
    parent = ROOT / "tests" / "noetl5_nested" / "status_parent.yaml"
    done = noetlc_run(home, parent, "--json", env={"NOETL_NESTED": "trigger"})
    report = report_of(done)
    steps = report["steps"]
    assert {n: s["state"] for n, s in steps.items()} == dict.fromkeys(
        ("start", "broken", "done"), "success"
    ), done.stdout + done.stderr
    ok, failed = steps["start"]["result"], steps["broken"]["result"]
    assert set(ok) == {"execution_id", "status", "current_step", "progress", "is_cancelled"}
    assert ok["status"] == "COMPLETED" and ok["current_step"] == "start"
    assert ok["progress"] == {
        "total_steps": 1,
        "completed_steps": 1,
        "running_steps": 0,
        "failed_steps": 0,
    }
    assert failed["status"] == "FAILED" and failed["progress"]["failed_steps"] == 1
    assert steps["done"]["result"] == {"ok": "COMPLETED", "failed": "FAILED"}
    children = {c["execution_id"]: c for c in report["children"]}
    assert str(ok["execution_id"]) in children and str(failed["execution_id"]) in children
    assert children[str(failed["execution_id"])]["state"] == "failed"
