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

Usage: ``python bench/deploy.py [--rounds N] [--keep-state DIR]``.
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


def timed_run(client, dag_id: str) -> float:
    started = time.perf_counter()
    run = client.trigger(dag_id)
    done = client.wait_for_run(dag_id, run["dag_run_id"], timeout=600, interval=0.2)
    elapsed = time.perf_counter() - started
    if done["state"] != "success":
        tasks = {t["task_id"]: t["state"] for t in client.task_instances(dag_id, run["dag_run_id"])}
        raise SystemExit(f"{dag_id}: run {done['state']}: {tasks}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each DAG")
    parser.add_argument("--keep-state", help="state folder to use and keep (default: a temp one)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="noetlc-bench-deploy-"))
    state = Path(args.keep_state) if args.keep_state else work / "stack"
    ids = write_playbooks(work / "playbooks")
    compile_into(work / "playbooks", work / "dags")
    from airflow_plugin.deploy.rest import AirflowClient

    print(f"bench/deploy.py: LocalExecutor stack, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    started = time.perf_counter()
    up = stack("up", "--state", str(state), "--executor", "local", "--dags", str(work / "dags"),
               timeout=600)  # fmt: skip
    try:
        if up.returncode != 0:
            raise SystemExit(f"airflow-stack.sh up failed:\n{up.stdout}\n{up.stderr}")
        print(f"stack up in {time.perf_counter() - started:.1f} s")
        with AirflowClient.from_stack(state) as client:
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
