"""CPU per loop item inside one mapped instance, with the event log on and off.

The deployed 5,000-item loop (``playbooks/large_loop.yaml``, 16 instances of ~313 items) spends
its items' CPU here: one body instance's share run as ``NoetlLoopBodyOperator`` runs it
(``run_items`` over ``run_iteration``, the compiled DAG's payload, inside a recording scope with
the task's coordinates), its events going to

* ``postgres``: the deployed event log (``StoreRecorder``: redaction, the journal, the writer
  thread's COPY into a throwaway PostgreSQL 15 cluster), the process's CPU including that
  thread, and beside it the Postgres server's own CPU per item (its postmaster and every
  process it started: the backend that takes the COPY, the WAL writer, the checkpointer);
* ``memory``: events built, stamped and identified, then dropped (what the recorder path costs
  on top of building them: the difference to ``postgres``);
* ``off``: the null recorder (the step itself: rendering, the python tool, the result).

Prints, per recorder, the process CPU per item of each round and the median (``--rounds``
rounds of ``--items`` items after one warm-up round), the writer thread's own CPU per item and
(``postgres``) the server's median CPU per item.
Read medians, not single rounds: a loaded machine moves them. Target (issue 32): <= 0.35 ms
per item with the event log on Postgres.

Usage: ``python bench/loop_item_cost.py [--items N] [--rounds N] [--only postgres,memory,off]``.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HOME = Path(tempfile.mkdtemp(prefix="noetlc-bench-loopitem-"))
atexit.register(shutil.rmtree, HOME, ignore_errors=True)
os.environ.update(
    AIRFLOW_HOME=str(HOME),
    AIRFLOW__CORE__LOAD_EXAMPLES="False",
    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{HOME}/airflow.db",
    AIRFLOW__LOGGING__LOGGING_LEVEL="ERROR",
)


def _payload():
    """The body payload of large_loop's ``square`` step, as the DAG file gives it."""
    from airflow_plugin.operators.loop import decoded

    spec = importlib.util.spec_from_file_location("large_loop_dag", ROOT / "dags/large_loop.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    step, _ = decoded(module.PAYLOADS["square"], module.READS["square"], "loop body")
    return step


def _recorder(kind: str):
    from airflow_plugin.events import MemoryRecorder, NullRecorder

    if kind == "off":
        return NullRecorder()
    if kind == "memory":

        class Dropping(MemoryRecorder):
            def record(self, event) -> None:  # built and stamped, then dropped
                return None

        return Dropping()
    from airflow_plugin.events.outbox import Outbox
    from airflow_plugin.events.store import EventStore
    from airflow_plugin.events.writer import StoreRecorder
    from tests.harness.postgres import PostgresCluster

    cluster = PostgresCluster().start()
    atexit.register(cluster.destroy)
    recorder = StoreRecorder(EventStore(cluster.dsn()), Outbox(HOME / "outbox"))
    recorder.server_cpu = lambda: _server_cpu(cluster.data_dir)
    return recorder


def _server_cpu(data_dir: Path) -> float:
    """CPU seconds (user + system) of the cluster's postmaster and its children, from /proc."""
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()
        pid, parent = int(stat.parent.name), int(fields[1])
        if postmaster in (pid, parent):
            total += int(fields[11]) + int(fields[12])
    return total / tick


def measure(kind: str, items: int, rounds: int) -> None:
    from airflow_plugin.events import flush, recording
    from airflow_plugin.runtime.loop import run_iteration
    from airflow_plugin.runtime.loop_items import run_items

    step = _payload()
    recorder = _recorder(kind)
    inputs = {"execution_id": "7", "workload": {"count": 5000}, "results": {}, "ctx": {},
              "vars": {}, "args": {}}  # fmt: skip
    writer_cpu = [0.0]
    if hasattr(recorder, "_write_settled"):
        write = recorder._write_settled

        def timed(batch) -> None:
            started = time.thread_time()
            write(batch)
            writer_cpu[0] += time.thread_time() - started

        recorder._write_settled = timed

    def instance(number: int) -> None:
        offset = number * items
        with recording(recorder, dag_id="bench.large_loop", run_id="bench", task_id="square.body",
                       map_index=number, try_number=1):  # fmt: skip
            _, failure = run_items(
                step,
                list(range(offset, offset + items)),
                lambda position, item: run_iteration(step, inputs, item, offset + position, 5000),
            )
        assert failure is None, failure
        assert flush(recorder, 60), "events did not reach the store"

    instance(0)  # warm-up: imports, the first connection, compiled templates
    writer_cpu[0] = 0.0
    per_item, server = [], []
    server_cpu = getattr(recorder, "server_cpu", None)
    for number in range(1, rounds + 1):
        started = time.process_time()
        served = server_cpu() if server_cpu else 0.0
        instance(number)
        per_item.append((time.process_time() - started) / items * 1000)
        if server_cpu:
            time.sleep(0.2)  # the server's last commit of the round
            server.append((server_cpu() - served) / items * 1000)
    print(
        f"{kind:9} ms CPU per item: {' '.join(f'{v:.3f}' for v in per_item)}"
        f"  median {statistics.median(per_item):.3f}"
        + (f"  (writer thread {writer_cpu[0] / (rounds * items) * 1000:.3f})" if kind == "postgres" else "")
        + (f"; server {statistics.median(server):.3f} ms per item, median" if server else "")
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=313, help="items of one instance")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--only", default="postgres,memory,off")
    args = parser.parse_args()
    print(f"bench/loop_item_cost.py: {args.items} items x {args.rounds} rounds, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip
    for kind in args.only.split(","):
        measure(kind.strip(), args.items, args.rounds)


if __name__ == "__main__":
    main()
