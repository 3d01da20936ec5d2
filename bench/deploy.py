"""Deployed latency with and without step fusion, on the LocalExecutor stack, in one run.

Starts ``scripts/airflow-stack.sh up --executor local`` in a temporary state folder with six DAGs:
a chain of 10 python steps, a chain of 50, and ``playbooks/hello_world.yaml`` (3 steps), each
compiled twice — as is, and with fusion on through the playbook-level option
``metadata.noetlc.fuse: true`` (under a ``bench/..._fused`` catalog path, so both live side by
side). Each DAG is triggered once to warm up (the first run of a DAG
pays its first parse by the task processes), then ``--rounds`` times, fused and unfused
alternately, through the REST API; a run's wall time is trigger -> ``success`` as seen by
polling the API (every 0.2 s). Prints the median of each and the ratio fused/unfused
(target: the 10-step chain <= 0.35x; the 50-step chain's and hello_world's ratios printed too)
with the 1-minute load average over its rounds. The stack is stopped at the end, also on failure.

The numbers depend on the machine's load (the scheduler loop and task process starts are CPU
bound): read ratios, not seconds, and rerun when something else was running.

With ``--loop`` it measures a big loop instead, on the Celery stack
(``--executor celery``: Redis and two workers of 4 slots): ``playbooks/large_loop.yaml``
(5,000 items, a parallel loop of ``max_in_flight: 16``, compiled as is, and a copy with fusion
the other way: ``metadata.noetlc.fuse``) against a hand-written
DAG doing the same work the way an Airflow user would batch it (:data:`BATCHED_DAG`: 16 mapped
batches squaring their items, then a total over the last 128), both in one run, alternately;
prints the medians, the ratio loop/batched (target: within 1.5x) and the load average, and the
timeline of each DAG's last run (:func:`timeline`: per task, from the REST API, where its time
went).

``--also-in-flight N`` adds a copy of large_loop whose ``max_in_flight`` is N (timed in the same
rounds): how the number of mapped instances moves the loop's time on this stack.

``--stack-env FILE`` hands KEY=VALUE lines to every Airflow process of the stack (its
``--env-file``): ``NOETL_EVENTS=off`` measures what the NoETL event log costs a run.

Usage: ``python bench/deploy.py [--rounds N] [--keep-state DIR] [--stack-env FILE]
[--loop [--also-in-flight N]]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCRIPT = ROOT / "scripts" / "airflow-stack.sh"


def chain_playbook(steps: int, path: str) -> str:
    """A canonical playbook of ``steps`` python steps in a row, each adding one to the last."""
    lines = [
        "apiVersion: noetl.io/v2",
        "kind: Playbook",
        "metadata:",
        f"  name: chain_{steps}",
        f"  path: {path}",
        "workload:",
        "  seed: 0",
        "workflow:",
    ]
    for index in range(steps):
        name = "start" if index == 0 else f"s{index}"
        value = "int(seed)" if index == 0 else "int(previous) + 1"
        lines += [f"  - step: {name}", "    tool:", "      kind: python"]
        if index == 0:
            lines += ["      input:", '        seed: "{{ seed }}"']
        else:
            before = "start" if index == 1 else f"s{index - 1}"
            lines += ["      input:", f'        previous: "{{{{ {before}.n }}}}"']
        lines += ["      code: |", f"        result = {{'n': {value}}}"]
        if index < steps - 1:
            lines += ["    next:", "      arcs:", f"        - step: s{index + 1}"]
    return "\n".join(lines) + "\n"


def write_playbooks(folder: Path) -> dict[str, tuple[str, str]]:
    """Playbooks under ``folder/plain`` and ``folder/fused``; label -> (plain id, fused id)."""
    hello = (ROOT / "playbooks" / "hello_world.yaml").read_text()
    ids = {}
    for mode in ("plain", "fused"):
        (folder / mode).mkdir(parents=True)
        suffix = "_fused" if mode == "fused" else ""
        # The fused copies turn fusion on with the playbook-level option, not `--fuse`.
        option = "\n  noetlc:\n    fuse: true" if mode == "fused" else ""
        for steps in (10, 50):
            path = f"bench/chain_{steps}{suffix}"
            text = chain_playbook(steps, path).replace(f"path: {path}", f"path: {path}{option}")
            (folder / mode / f"chain_{steps}.yaml").write_text(text)
        text = hello.replace(
            "path: examples/hello_world", f"path: bench/hello_world{suffix}{option}"
        )
        (folder / mode / "hello_world.yaml").write_text(text)
    for label, name in (
        ("10-step chain", "chain_10"),
        ("50-step chain", "chain_50"),
        ("hello_world (3 steps)", "hello_world"),
    ):
        ids[label] = (f"bench.{name}", f"bench.{name}_fused")
    return ids


# The baseline of ``--loop``: what an Airflow user writes for "square 5,000 numbers and keep
# NoETL's loop summary" (the last 128 results, the count of the others), in 16 mapped batches.
BATCHED_DAG = """
from airflow.sdk import DAG, task

COUNT, BATCHES, KEPT = 5000, 16, 128

with DAG(dag_id="bench.loop_batched", schedule=None, catchup=False,
         is_paused_upon_creation=False, tags=["bench"]) as dag:

    @task
    def batches():
        size, extra = divmod(COUNT, BATCHES)
        out, offset = [], 0
        for number in range(BATCHES):
            length = size + (1 if number < extra else 0)
            out.append(list(range(offset, offset + length)))
            offset += length
        return out

    @task
    def square(batch):
        return [{"square": n * n} for n in batch][-KEPT:]

    @task
    def total(parts):
        rows = [row for part in parts for row in part][-KEPT:]
        return {"items": COUNT, "kept": len(rows), "omitted": COUNT - len(rows),
                "last_square": rows[-1]["square"]}

    total(square.expand(batch=batches()))
"""


def write_loop_dags(folder: Path, dags: Path, also: list[int]) -> list[tuple[str, str]]:
    """large_loop as ``bench.large_loop``, a copy with fusion the other way
    (``bench.large_loop_flipped``: its ``metadata.noetlc.fuse`` turned off, or on), (per number
    in ``also``, a copy whose
    ``max_in_flight`` is that number: ``bench.large_loop_N``) and the hand-written batched DAG
    -> (label, DAG id) of each, the batched one last."""
    folder.mkdir(parents=True)
    text = (ROOT / "playbooks" / "large_loop.yaml").read_text()
    (folder / "large_loop.yaml").write_text(
        text.replace("path: examples/large_loop", "path: bench/large_loop")
    )
    ids = [("large_loop (5,000 items)", "bench.large_loop")]
    # The same loop with fusion the other way (lower/fuse.py loop_folds): start and total run
    # in the loop's head and tail, or as tasks of their own.
    fused = "    fuse: true" in text
    flipped = text.replace("path: examples/large_loop", "path: bench/large_loop_flipped")
    flipped = (
        flipped.replace("    fuse: true", "    fuse: false")
        if fused
        else flipped.replace("\nmetadata:\n", "\nmetadata:\n  noetlc:\n    fuse: true\n", 1)
    )
    (folder / "large_loop_flipped.yaml").write_text(flipped)
    ids.append((f"large_loop, {'unfused' if fused else 'fused'}", "bench.large_loop_flipped"))
    for number in also:
        variant = text.replace(
            "path: examples/large_loop", f"path: bench/large_loop_{number}"
        ).replace("max_in_flight: 16", f"max_in_flight: {number}")
        (folder / f"large_loop_{number}.yaml").write_text(variant)
        ids.append((f"large_loop, {number} in flight", f"bench.large_loop_{number}"))
    done = subprocess.run(
        [sys.executable, "-m", "noetl_compile", "compile", str(folder), "-o", str(dags / "loop")],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"noetlc compile failed:\n{done.stdout}\n{done.stderr}")
    (dags / "loop" / "loop_batched.py").write_text(BATCHED_DAG.lstrip())
    return [*ids, ("hand-written, 16 batches", "bench.loop_batched")]


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return datetime.fromisoformat(stamp).timestamp()


def timeline(client, dag_id: str, run_id: str) -> list[str]:
    """Where one run's time went, from the REST API: one line per task (mapped instances
    together), seconds from the run's ``queued_at`` (the trigger): when the first instance was
    queued, the first and last start, the last end, the gap from the upstream phase's last end
    to this phase's first queueing (scheduling), the median wait queued -> started (Celery and
    the task process start), the median / max duration (inside the task process) and the tries;
    then the run's end after its last task."""
    run = client.get_run(dag_id, run_id)
    zero = _seconds(run["queued_at"]) or _seconds(run["start_date"])
    phases: dict[str, list[dict]] = {}
    for ti in client.task_instances(dag_id, run_id):
        phases.setdefault(ti["task_id"], []).append(ti)

    def rel(stamp: str | None) -> float:
        value = _seconds(stamp)
        return float("nan") if value is None else value - zero

    lines = [
        (
            f"  {dag_id} run {run_id}: started +{rel(run['start_date']):.1f} s, "
            f"ended +{rel(run['end_date']):.1f} s"
        ),
        (
            f"  {'task':18} {'n':>3} {'queued':>7} {'start':>13} {'end':>7} {'gap':>6} "
            f"{'wait~':>6} {'dur~':>6} {'durmax':>6} tries"
        ),
    ]
    ordered = sorted(phases.items(), key=lambda kv: min(rel(t["queued_when"]) for t in kv[1]))
    last_end = rel(run["start_date"])
    for task_id, tis in ordered:
        queued = min(rel(t["queued_when"]) for t in tis)
        starts = [rel(t["start_date"]) for t in tis]
        end = max(rel(t["end_date"]) for t in tis)
        waits = [rel(t["start_date"]) - rel(t["queued_when"]) for t in tis]
        durs = [t["duration"] or 0.0 for t in tis]
        tries = max(t["try_number"] for t in tis)
        lines.append(
            f"  {task_id:18} {len(tis):3d} {queued:7.1f} {min(starts):6.1f}-{max(starts):6.1f} "
            f"{end:7.1f} {queued - last_end:6.1f} {statistics.median(waits):6.2f} "
            f"{statistics.median(durs):6.2f} {max(durs):6.2f} {tries}"
        )
        last_end = max(last_end, end)
    lines.append(f"  run end after its last task: {rel(run['end_date']) - last_end:.1f} s")
    return lines


def loop_bench(client, dags: list[tuple[str, str]], rounds: int) -> None:
    """Each DAG of ``dags`` (label, id; the baseline last) warmed up, then timed ``rounds``
    times, alternately; the medians and each one's ratio to the baseline."""
    for _, dag_id in dags:
        client.wait_for_dag(dag_id, 300)
        timed_run(client, dag_id)  # warm-up: first parse in the task processes
    times: dict[str, list[float]] = {dag_id: [] for _, dag_id in dags}
    loads, last = [], {}
    for _ in range(rounds):
        loads.append(os.getloadavg()[0])
        for _, dag_id in dags:
            started = time.perf_counter()
            last[dag_id] = run_once(client, dag_id)
            times[dag_id].append(time.perf_counter() - started)
    loads.append(os.getloadavg()[0])
    print("timeline of each DAG's last run (s from its trigger):")
    for dag_id, run_id in last.items():
        print("\n".join(timeline(client, dag_id, run_id)))
    base = statistics.median(times[dags[-1][1]])
    print(f"{'DAG':28} {'runs s':>24} {'median s':>9} {'ratio':>6}")
    for label, dag_id in dags:
        median = statistics.median(times[dag_id])
        runs = " ".join(f"{t:.1f}" for t in times[dag_id])
        print(f"{label:28} {runs:>24} {median:9.2f} {median / base:5.2f}x")
    print(f"target: loop/batched <= 1.5x; 1-minute load {min(loads):.1f}-{max(loads):.1f} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip


def compile_into(folder: Path, dags: Path) -> None:
    for mode in ("plain", "fused"):
        done = subprocess.run(
            [sys.executable, "-m", "noetl_compile", "compile", str(folder / mode)]
            + ["-o", str(dags / mode)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"noetlc compile failed:\n{done.stdout}\n{done.stderr}")


def stack(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NOETLC_PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_once(client, dag_id: str) -> str:
    """Trigger ``dag_id`` and wait for it to succeed -> the run's id."""
    run = client.trigger(dag_id)
    done = client.wait_for_run(dag_id, run["dag_run_id"], timeout=600, interval=0.2)
    if done["state"] != "success":
        tasks = {t["task_id"]: t["state"] for t in client.task_instances(dag_id, run["dag_run_id"])}
        raise SystemExit(f"{dag_id}: run {done['state']}: {tasks}")
    return run["dag_run_id"]


def timed_run(client, dag_id: str) -> float:
    started = time.perf_counter()
    run_once(client, dag_id)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each DAG")
    parser.add_argument("--keep-state", help="state folder to use and keep (default: a temp one)")
    parser.add_argument(
        "--loop", action="store_true", help="the 5,000-item loop against 16 hand-written batches"
    )
    parser.add_argument(
        "--also-in-flight",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="with --loop: also time large_loop with max_in_flight N (repeatable)",
    )
    parser.add_argument(
        "--stack-env", metavar="FILE", help="KEY=VALUE lines for every Airflow process of the stack"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="noetlc-bench-deploy-"))
    state = Path(args.keep_state) if args.keep_state else work / "stack"
    if args.loop:
        ids, executor = {}, "celery"
        loop_dags = write_loop_dags(work / "playbooks", work / "dags", args.also_in_flight)
    else:
        ids, executor = write_playbooks(work / "playbooks"), "local"
        compile_into(work / "playbooks", work / "dags")
    from airflow_plugin.deploy.rest import AirflowClient

    print(f"bench/deploy.py: {executor} stack, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    started = time.perf_counter()
    extra = ["--env-file", str(Path(args.stack_env).resolve())] if args.stack_env else []
    up = stack("up", "--state", str(state), "--executor", executor, "--dags", str(work / "dags"),
               *extra, timeout=600)  # fmt: skip
    try:
        if up.returncode != 0:
            raise SystemExit(f"airflow-stack.sh up failed:\n{up.stdout}\n{up.stderr}")
        print(f"stack up in {time.perf_counter() - started:.1f} s")
        with AirflowClient.from_stack(state) as client:
            if args.loop:
                loop_bench(client, loop_dags, args.rounds)
                return
            for plain, fused in ids.values():
                client.wait_for_dag(plain, 300)
                client.wait_for_dag(fused, 300)
                timed_run(client, plain)  # warm-up: first parse in the task processes
                timed_run(client, fused)
            print(f"{'DAG':24} {'unfused s':>10} {'fused s':>10} {'ratio':>7}  {'load':>9}  target")
            for label, (plain, fused) in ids.items():
                plain_t, fused_t, loads = [], [], []
                for _ in range(args.rounds):
                    loads.append(os.getloadavg()[0])
                    plain_t.append(timed_run(client, plain))
                    fused_t.append(timed_run(client, fused))
                p, f = statistics.median(plain_t), statistics.median(fused_t)
                target = "<= 0.35x" if label.startswith("10-") else ""
                load = f"{min(loads):.1f}-{max(loads):.1f}"
                print(f"{label:24} {p:10.2f} {f:10.2f} {f / p:6.2f}x  {load:>9}  {target}")
        print(f"load after: {os.getloadavg()}")
    finally:
        stack("down", "--state", str(state), timeout=180)
        if not args.keep_state:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
