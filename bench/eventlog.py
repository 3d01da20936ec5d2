"""What the event log costs and carries, each figure measured in this one run.

(a) listener + recorder overhead per task: a 20-step chain of python steps under ``dag.test()``
    with the event log on (SQLite default: listener hooks, runtime events, a flush at every task
    end) vs off (``NOETL_EVENTS=off`` semantics: the null recorder), runs alternated; the median
    per-task difference in process CPU time, and in wall time (target <= 5 ms);
(b) Postgres store throughput, events/s, for batches of 1,000 (``EventStore.append``: COPY into
    a stage, then INSERT .. ON CONFLICT DO NOTHING) next to a plain COPY of the same rows into a
    plain table with no index or conflict check (the ceiling) (target >= 20,000 events/s);
(c) events per loop iteration: a 200-item parallel loop (64 mapped chunks) under ``dag.test()``;
(d) SQLite store throughput, events/s, the same batches as (b);
(e) the journal's cost per event (what survives a SIGKILL): the one ``O_APPEND`` write of the
    line a stored row carries, next to what ``StoreRecorder.record`` spends making the row
    (redaction, bounding, its one encoding); both in this process, best of 5 rounds of 20,000
    events.

Usage: ``python bench/eventlog.py [--only a,b,c,d,e] [--events N]``.
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HOME = Path(tempfile.mkdtemp(prefix="noetlc-bench-eventlog-"))
atexit.register(shutil.rmtree, HOME, ignore_errors=True)
(HOME / "dags").mkdir()
os.environ.update(
    AIRFLOW_HOME=str(HOME),
    AIRFLOW__CORE__LOAD_EXAMPLES="False",
    AIRFLOW__CORE__DAGS_FOLDER=str(HOME / "dags"),
    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{HOME}/airflow.db",
    AIRFLOW__CORE__MAX_MAP_LENGTH="64",
    AIRFLOW__LOGGING__LOGGING_LEVEL="ERROR",
)


def rows(n: int) -> list[dict]:
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return [
        {
            "event_id": str(uuid.uuid4()),
            "execution_id": 1 + i // 1000,
            "timestamp": start + dt.timedelta(microseconds=i),
            "source": "worker",
            "name": "LoopIterationCompleted",
            "alias": None,
            "entity": "loop",
            "entity_id": f"square#{i}",
            "status": "success",
            "step": "square",
            "step_run_id": f"square#{i}",
            "loop_id": "square",
            "iteration": i,
            "attempt": 1,
            "dag_id": "examples.large_loop",
            "run_id": "manual__bench",
            "task_id": "square.body",
            "map_index": i % 64,
            "try_number": 1,
            "playbook_path": "playbooks/large_loop.yaml",
            "playbook_hash": "e" * 64,
            "data": {"result": {"square": i * i}},
            "duration_sec": 0.001,
        }
        for i in range(n)
    ]


def throughput(store, events: list[dict], batch: int = 1000) -> float:
    store.migrate()
    started = time.perf_counter()
    for offset in range(0, len(events), batch):
        store.append(events[offset : offset + batch])
    return len(events) / (time.perf_counter() - started)


# -- (b), (d) stores ------------------------------------------------------------------------------


def bench_postgres(n: int) -> None:
    from airflow_plugin.events.schema import COLUMNS
    from airflow_plugin.events.store import EventStore
    from tests.harness.postgres import PostgresCluster

    cluster = PostgresCluster().start()
    try:
        store = EventStore(cluster.create_database("bench_events"))
        events = rows(n)
        ours = throughput(store, events)
        # The ceiling: the same rows COPYed into a plain table (no index, no conflict check).
        import psycopg

        with psycopg.connect(cluster.create_database("bench_copy")) as conn:
            conn.execute(
                "CREATE TABLE plain (event_id text, execution_id bigint, parent_execution_id"
                " bigint, timestamp timestamptz, source text, name text, alias text, entity text,"
                " entity_id text, status text, step text, parent_event_id text, step_run_id text,"
                " tool_run_id text, loop_id text, iteration int, attempt int, dag_id text, run_id"
                " text, task_id text, map_index int, try_number int, playbook_path text,"
                " playbook_hash text, data jsonb, duration_sec float8)"
            )
            conn.commit()
            started = time.perf_counter()
            for offset in range(0, n, 1000):
                with conn.cursor().copy(f"COPY plain ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                    for row in events[offset : offset + 1000]:
                        copy.write_row(
                            [json.dumps(row.get(c)) if c == "data" else row.get(c) for c in COLUMNS]
                        )
                conn.commit()
            ceiling = n / (time.perf_counter() - started)
        print(
            f"(b) postgres store, {n} events in batches of 1000: {ours:,.0f} events/s; plain COPY"
            f" {ceiling:,.0f} events/s; ratio {ours / ceiling:.2f}x of the ceiling"
            f" (target >= 20,000 events/s)"
        )
    finally:
        cluster.destroy()


def bench_sqlite(n: int) -> None:
    from airflow_plugin.events.store import EventStore

    store = EventStore(str(HOME / "bench-events.db"))
    print(
        f"(d) sqlite store, {n} events in batches of 1000: {throughput(store, rows(n)):,.0f} events/s"
    )


# -- (a), (c) dag.test -----------------------------------------------------------------------------


def _dag(name: str, yaml_text: str):
    import importlib.util

    from noetl_compile.cli import main

    source = HOME / f"{name}.yaml"
    source.write_text(yaml_text)
    out = HOME / "compiled"
    assert main(["compile", str(source), "-o", str(out)]) == 0
    text = (out / f"{name}.py").read_text()
    dag_id = text.split('dag_id="', 1)[1].split('"', 1)[0]
    path = HOME / "dags" / f"{dag_id}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def _chain(steps: int) -> str:
    lines = [
        "apiVersion: noetl.io/v2",
        "kind: Playbook",
        "metadata: {name: chain, path: bench/chain}",
    ]
    lines.append("workflow:")
    for i in range(steps):
        lines.append(f"  - step: s{i}")
        lines.append("    tool: {kind: python, code: 'result = 1'}")
        if i + 1 < steps:
            lines.append(f"    next: {{arcs: [{{step: s{i + 1}}}]}}")
    return "\n".join(lines) + "\n"


def bench_overhead(steps: int = 20, repeat: int = 9) -> None:
    from airflow.utils import db

    from airflow_plugin.events import NullRecorder, set_default_recorder
    from airflow_plugin.events.outbox import Outbox
    from airflow_plugin.events.store import EventStore
    from airflow_plugin.events.writer import StoreRecorder

    db.initdb()
    dag = _dag("chain", _chain(steps))
    recorder = StoreRecorder(EventStore(str(HOME / "events.db")), Outbox(HOME / "outbox"))
    set_default_recorder(recorder)
    dag.test()  # warm-up: imports, DB, the store's migration
    on, off = [], []  # (wall seconds, CPU seconds of this process) per run
    for _ in range(repeat):
        for target, times in ((recorder, on), (NullRecorder(), off)):
            set_default_recorder(target)
            wall, cpu = time.perf_counter(), time.process_time()
            dag.test()
            times.append((time.perf_counter() - wall, time.process_time() - cpu))
    set_default_recorder(None)

    def per_task(pick, column: int) -> float:
        return (pick(t[column] for t in on) - pick(t[column] for t in off)) / steps * 1000

    # dag.test() runs every task in this process, so the process's CPU time holds all the work
    # the event log adds (listener hooks, event building, redaction, the writer thread, the
    # flush at task end) and little of what other processes on the machine do: it is the
    # figure held against the target. Wall-clock differences are printed too; on a busy machine
    # they are noisier than the overhead itself.
    print(
        f"(a) {steps}-step chain under dag.test, {repeat} runs each, alternated: overhead per task"
        f" {per_task(statistics.median, 1):.2f} ms CPU (median; best runs"
        f" {per_task(min, 1):.2f} ms), wall {per_task(statistics.median, 0):.2f} ms (median;"
        f" best runs {per_task(min, 0):.2f} ms); run CPU on {statistics.median(t[1] for t in on):.2f}s"
        f" vs off {statistics.median(t[1] for t in off):.2f}s, ratio"
        f" {statistics.median(t[1] for t in on) / statistics.median(t[1] for t in off):.2f}x"
        " (target <= 5 ms)"
    )


def bench_loop_events(items: int = 200) -> None:
    from airflow.utils import db

    from airflow_plugin.events import set_default_recorder
    from airflow_plugin.events.outbox import Outbox
    from airflow_plugin.events.store import EventStore
    from airflow_plugin.events.writer import StoreRecorder
    from airflow_plugin.templating.ids import execution_id_for

    db.initdb()
    dag = _dag("large_loop", (ROOT / "playbooks" / "large_loop.yaml").read_text())
    store = EventStore(str(HOME / "loop-events.db"))
    recorder = StoreRecorder(store, Outbox(HOME / "outbox"))
    set_default_recorder(recorder)
    run = dag.test(run_conf={"count": items})
    recorder.flush(30)
    set_default_recorder(None)
    events = store.events(execution_id_for(dag.dag_id, run.run_id))
    loop = [e for e in events if e["loop_id"] == "square" or e["task_id"] == "square.body"]
    print(
        f"(c) {items}-item loop (64 mapped chunks): {len(events)} events in all,"
        f" {len(loop)} for the loop: {len(loop) / items:.1f} per iteration"
    )


def bench_journal(n: int = 20_000, rounds: int = 5) -> None:
    from airflow_plugin.events import Event
    from airflow_plugin.events.journal import Journal, encode_row
    from airflow_plugin.events.writer import event_row

    events = [
        Event(
            name="StepFinished",
            entity="step",
            entity_id=f"s{i}",
            status="success",
            execution_id="7",
            step=f"s{i}",
            step_run_id=f"s{i}",
            data={"result": {"value": i, "rows": [1, 2, 3]}, "ctx": {"seen": i}},
            dag_id="examples.chain",
            run_id="manual__bench",
            task_id=f"s{i}",
            map_index=-1,
            try_number=1,
            event_id=str(uuid.uuid4()),
        )
        for i in range(n)
    ]
    make, write = [], []
    for _ in range(rounds):
        journal = Journal(HOME / "journal-bench")
        started = time.perf_counter()
        rows = [event_row(event, 65536) for event in events]
        made = time.perf_counter()
        for row in rows:
            journal.append(encode_row(row))
        written = time.perf_counter()
        journal.clear()
        journal.close()
        make.append((made - started) / n * 1e6)
        write.append((written - made) / n * 1e6)
    size = len(encode_row(rows[0]))
    print(
        f"(e) journal: {min(write):.1f} us per event (one O_APPEND write of the ~{size} B line"
        f" the row carries; median {statistics.median(write):.1f} us) next to {min(make):.1f} us"
        f" to make the row (redacted and encoded once)"
        f" (median {statistics.median(make):.1f} us); {n} events x {rounds} rounds"
    )
    # The same appends while another Python thread runs (as the writer thread does while it
    # stores a batch): a write that released the GIL would wait up to its switch interval.
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    busy = threading.Thread(target=spin)
    lines = [encode_row(row) for row in rows[:2000]]
    journal = Journal(HOME / "journal-bench")
    busy.start()
    try:
        started = time.perf_counter()
        for line in lines:
            journal.append(line)
        beside_busy = (time.perf_counter() - started) / len(lines) * 1e6
    finally:
        stop.set()
        busy.join()
        journal.clear()
        journal.close()
    print(f"(e) journal write next to a busy Python thread: {beside_busy:.1f} us per event (wall)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="a,b,c,d,e")
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "a" in only:
        bench_overhead()
    if "b" in only:
        bench_postgres(args.events)
    if "c" in only:
        bench_loop_events()
    if "d" in only:
        bench_sqlite(args.events)
    if "e" in only:
        bench_journal()


if __name__ == "__main__":
    main()
