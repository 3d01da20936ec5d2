"""Cursor-loop throughput and events per item, each figure measured in this one run.

The seed's shape (tests/runtime/cursor/facility_queue.yaml): a Postgres queue of
(facility, patient, data type) claims; per item a python task and a postgres task (insert the
result, mark the claim done). The queue is drained by 1, 2, 4 and 8 worker slots, each slot in
its own OS process (tests/runtime/cursor/slot.py, as the LocalExecutor or Celery runs mapped
slots), against a throwaway Postgres server. Printed per slot count: items/s over the drain
window (first claim to last slot drained; process start-up excluded), the speed-up over one
slot, and events per item in the event store (Postgres). The baseline, in the same run: the same
work as a ``loop.in`` over the same items, in one process (``runtime.loop.run_loop``), with its
events per item (the seed promises about 10x fewer for a cursor).

Usage: ``python bench/cursor.py [--items N] [--slots 1,2,4,8]``. On a 2-core machine the slots
share two cores with Postgres: expect the curve to flatten past 2 slots.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HOME = Path(tempfile.mkdtemp(prefix="noetlc-bench-cursor-"))
atexit.register(shutil.rmtree, HOME, ignore_errors=True)
os.environ.update(
    AIRFLOW_HOME=str(HOME),
    AIRFLOW__CORE__LOAD_EXAMPLES="False",
    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{HOME}/airflow.db",
    AIRFLOW__LOGGING__LOGGING_LEVEL="ERROR",
)

from tests.runtime.cursor import workqueue


def drain_with(slots: int, payload: dict, dsn: str, events_url: str, items: int) -> dict:
    from airflow_plugin.events.store import EventStore

    workqueue.fill_queue(dsn, items)
    execution_id = 9_000_000 + slots
    inputs = workqueue.step_inputs(execution_id, slots)
    job = workqueue.write_job(HOME / f"job{slots}.json", f"slots{slots}", payload, inputs)
    procs = workqueue.start_slots(job, slots, {"NOETL_EVENTS_URL": events_url})
    for proc in procs:
        output = proc.communicate()[0]
        if proc.returncode != 0:
            raise SystemExit(f"slot failed:\n{output[-3000:]}")
    reports = [workqueue.slot_report(job, n) for n in range(slots)]
    done = sum(len(r["records"]) for r in reports)
    if done != items:
        raise SystemExit(f"{slots} slots processed {done} of {items} items")
    window = max(r["finished"] for r in reports) - min(r["started"] for r in reports)
    store = EventStore(events_url)
    events = len(store.events(execution_id))
    store.dispose()
    return {"rate": items / window, "events_per_item": events / items, "window": window}


def loop_in_baseline(payload: dict, dsn: str, items: int) -> dict:
    import psycopg

    from airflow_plugin.events import MemoryRecorder, set_default_recorder
    from airflow_plugin.runtime.loop import run_loop

    workqueue.fill_queue(dsn, items)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT id, facility, patient, data_type, attempt_count FROM facility_queue ORDER BY id"
        ).fetchall()
    names = ("id", "facility", "patient", "data_type", "attempt_count")
    collection = [dict(zip(names, row, strict=True)) for row in rows]
    loop_in = {**payload, "loop": {"in": collection, "iterator": "item", "mode": "sequential"}}
    memory = MemoryRecorder()
    previous = set_default_recorder(memory)
    started = time.perf_counter()
    try:
        run_loop(loop_in, workqueue.step_inputs(9_100_000, 1))
    finally:
        set_default_recorder(previous)
    elapsed = time.perf_counter() - started
    return {"rate": items / elapsed, "events_per_item": len(memory.events) / items}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--slots", default="1,2,4,8")
    args = parser.parse_args()
    from tests.harness.postgres import PostgresCluster, airflow_conn_env

    cluster = PostgresCluster().start()
    try:
        dsn = cluster.create_database("bench_cursor")
        os.environ[airflow_conn_env("pg_local")] = dsn
        payload = workqueue.compiled_payload(HOME / "dags")
        print(f"cursor loop, {args.items} items (python task + postgres task per item)")
        baseline = loop_in_baseline(payload, dsn, args.items)
        print(
            f"  loop.in baseline (1 process): {baseline['rate']:8.0f} items/s  "
            f"{baseline['events_per_item']:6.2f} events/item"
        )
        first = None
        for slots in (int(s) for s in args.slots.split(",")):
            events_url = cluster.create_database(f"events_{uuid.uuid4().hex[:8]}")
            figures = drain_with(slots, payload, dsn, events_url, args.items)
            first = first or figures["rate"]
            print(
                f"  cursor, {slots} slot(s):          {figures['rate']:8.0f} items/s  "
                f"{figures['events_per_item']:6.3f} events/item  "
                f"x{figures['rate'] / first:4.2f} vs 1 slot  "
                f"{baseline['events_per_item'] / figures['events_per_item']:4.1f}x fewer events "
                "than loop.in"
            )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
