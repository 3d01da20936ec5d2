"""The Celery configuration of ``scripts/airflow-stack.sh``: Redis broker, two Celery workers
with distinct hostnames; hello_world and four concurrent runs, through the REST API."""

from __future__ import annotations

from .checks import run_branching_concurrently, run_hello_world
from .conftest import stack_script


def test_celery_stack_status(celery_stack) -> None:
    done = stack_script("status", "--state", str(celery_stack.state), timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    alive = dict(line.rsplit(None, 1) for line in done.stdout.splitlines())
    assert {"redis", "worker1", "worker2", "scheduler", "postgres"} <= set(alive)
    assert {"scheduler health", "triggerer health", "dag_processor health"} <= set(alive)
    assert alive.pop("API/UI") == celery_stack.manifest["api_url"]
    assert set(alive.values()) == {"alive", "healthy"}
    print(f"celery stack up in {celery_stack.up_seconds:.1f} s: {celery_stack.manifest['timings']}")


def test_hello_world_on_celery(celery_stack) -> None:
    run_hello_world(celery_stack)


def test_four_concurrent_runs_on_two_celery_workers(celery_stack) -> None:
    instances = run_branching_concurrently(celery_stack)
    hosts = {ti["hostname"] for ti in instances if ti["state"] == "success"}
    # Every task ran on one of the stack's two workers, and both took work.
    assert hosts == set(celery_stack.manifest["celery_workers"]), hosts
