"""The deployed part of the smoke suite (scripts/smoke_airflow.py): one deployment per executor
with scripts/airflow-stack.sh, this Python's Airflow, the bundled playbooks as its DAG folder.

LocalExecutor: hello_world, a loop (loop_parallel) and a gate (gates: its input and approval
answered with `noetlc signal`, its sleep held by the triggerer), each run's result read back from
XCom against the playbook's header. Celery: hello_world and large_loop (5,000 items in a fused
loop: its head runs start, its tail total), through two workers. Each stack is
stopped afterwards, also when a run failed. Returns one line per run; a failure says what the run
did and where the stack's logs are.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from readme_examples import promised_results

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STACK = ROOT / "scripts" / "airflow-stack.sh"
UP_TIMEOUT = 600  # a loaded 2-core machine: migrating the metadata DB alone takes minutes
RUN_TIMEOUT = 300.0

# executor -> the playbooks run on it (dag id examples.<name>)
PLAN: dict[str, tuple[str, ...]] = {
    "local": ("hello_world", "loop_parallel", "gates"),
    # large_loop: 5,000 items in a fused loop (its head runs start, its tail total).
    "celery": ("hello_world", "large_loop"),
}
# The gates playbook's answers, as the README's `noetlc run ... --signal` gives them.
GATE_ANSWERS = (("start", ["--value", "discount=0.1"]), ("approve", ["--approve"]))


class SmokeFailure(RuntimeError):
    pass


def _script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "NOETL"))}
    env["NOETLC_PYTHON"] = sys.executable
    return subprocess.run(
        ["bash", str(STACK), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _noetlc(manifest: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    passwords = json.loads(Path(manifest["password_file"]).read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "NOETL"))}
    env.update(
        NOETL_AIRFLOW_URL=manifest["api_url"],
        NOETL_AIRFLOW_USER=manifest["user"],
        NOETL_AIRFLOW_PASSWORD=passwords[manifest["user"]],
        NOETL_EVENTS_URL=manifest["events_url"],
    )
    return subprocess.run(
        [str(BIN / "noetlc"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _answer_gates(client: Any, manifest: dict[str, Any], dag_id: str, run_id: str) -> None:
    """Each gate answered as soon as it waits: `noetlc signal` finds a waiting gate by itself
    (awaiting_input on 3.3, deferred to HITLTrigger on 3.1/3.2) and refuses one that is not."""
    for gate, answer in GATE_ANSWERS:
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            done = _noetlc(manifest, "signal", gate, "--dag", dag_id, "--run", run_id, *answer)
            if done.returncode == 0:
                break
            if client.get_run(dag_id, run_id)["state"] in ("success", "failed"):
                raise SmokeFailure(f"{dag_id}: the run ended before gate {gate} was answered")
            if time.monotonic() > deadline:
                raise SmokeFailure(
                    f"gate {gate} of {dag_id}/{run_id} not answerable: {done.stdout}{done.stderr}"
                )
            time.sleep(2.0)


def _run(client: Any, manifest: dict[str, Any], name: str) -> None:
    dag_id = f"examples.{name}"
    run_id = client.trigger(dag_id, wait_for_dag=300.0)["dag_run_id"]
    if name == "gates":
        _answer_gates(client, manifest, dag_id, run_id)
    run = client.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT)
    states = {ti["task_id"]: ti["state"] for ti in client.task_instances(dag_id, run_id)}
    if run["state"] != "success":
        raise SmokeFailure(f"{dag_id}/{run_id}: {run['state']} (tasks: {states})")
    for step, want in promised_results(ROOT / "playbooks" / f"{name}.yaml"):
        got = _step_result(client, dag_id, run_id, name, step)
        if isinstance(want, dict) and isinstance(got, dict):
            got = {key: got.get(key, "<missing>") for key in want}
        if got != want:
            raise SmokeFailure(f"{dag_id}: {step} = {got}, the header promises {want}")


def _step_result(client: Any, dag_id: str, run_id: str, name: str, step: str) -> Any:
    """A step's result in the run: its own task's ``result``, or, for a step that runs inside
    another's task (a fused loop's lead and trail, a region), that task's ``results[step]``."""
    from noetl_compile.check import check_paths
    from noetl_compile.compile import lower_result

    (checked,), _ = check_paths([str(ROOT / "playbooks" / f"{name}.yaml")])
    unit = lower_result(checked, f"{name}.yaml").unit_of_step(step)
    output = client.xcom_return(dag_id, run_id, unit.result_task)
    return output["results"][step] if step in unit.inner_steps else output["result"]


def run_stacks(
    report: Callable[[str], None], playbooks: list[Path] | None = None
) -> tuple[int, int, bool]:
    """(runs that succeeded, runs tried, every stack stopped) over every executor of
    :data:`PLAN`. ``playbooks``: the ones this Airflow can run (the DAG folder deployed, and the
    runs of :data:`PLAN` kept to them: on 3.0, which has no gates, hello_world and a loop);
    default every bundled one (the stack compiles its default folder)."""
    deployed = [arg for p in playbooks or () for arg in ("--playbooks", str(p))]
    stems = {p.stem for p in playbooks or sorted((ROOT / "playbooks").glob("*.yaml"))}
    from airflow_plugin.deploy.rest import AirflowClient

    ok = tried = 0
    stopped = True
    for executor, planned in PLAN.items():
        names = tuple(name for name in planned if name in stems)
        state = Path(tempfile.mkdtemp(prefix=f"noetlc-smoke-stack-{executor}-"))
        t0 = time.monotonic()
        up = _script(
            "up", "--executor", executor, "--state", str(state), *deployed, timeout=UP_TIMEOUT
        )
        try:
            if up.returncode != 0:
                tried += len(names)
                report(f"FAIL stack {executor}: up exit {up.returncode}")
                report("      " + "\n      ".join((up.stdout + up.stderr).splitlines()[-12:]))
                continue
            report(f"ok   {time.monotonic() - t0:6.1f}s  stack up --executor {executor}")
            manifest = json.loads((state / "stack.json").read_text())
            with AirflowClient.from_stack(state) as client:
                for name in names:
                    tried += 1
                    t1 = time.monotonic()
                    try:
                        _run(client, manifest, name)
                    except Exception as exc:  # noqa: BLE001 - reported, the next run goes on
                        report(f"FAIL {time.monotonic() - t1:6.1f}s  {executor}: {name}: {exc}")
                        report(f"      logs: {manifest['logs']}")
                        continue
                    ok += 1
                    report(f"ok   {time.monotonic() - t1:6.1f}s  {executor}: {name}")
        finally:
            down = _script("down", "--state", str(state), timeout=300)
            if down.returncode != 0:
                stopped = False
                report(f"FAIL stack {executor}: down exit {down.returncode}: {down.stderr[-500:]}")
            elif ok == tried:
                shutil.rmtree(state, ignore_errors=True)  # kept after a failure: its logs
    return ok, tried, stopped
