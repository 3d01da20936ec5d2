"""The smoke suite of one Airflow version, run by scripts/smoke-airflow.sh with that version's
virtualenv's Python: compile every bundled playbook with this checkout's compiler, import every
DAG file as the DAG processor does, run every bundled example as the README's examples block
shows it (`noetlc demo up` ... `noetlc demo down`, gates answered by `--signal`; each run's
results held against its playbook's header, scripts/readme_examples.py), then one deployment per
executor (scripts/smoke_stack.py; NOETLC_SMOKE_STACK=0 leaves it out).

What the installed Airflow cannot run (noetl_compile/airflow_versions.py: approve/input gates
before 3.1) is expected to be refused at check time with C518: those playbooks must be refused,
must check clean for the first Airflow that runs them, and their examples must stop with C518;
everything else is compiled, imported, run and deployed as on any version.

Prints one line per check and a summary ``airflow X.Y.Z: dags A/B import, examples C/D run,
gates: ..., stack runs E/F``; exits 1 when anything failed. Standard library, Airflow and this checkout's
packages only (no pytest)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# scripts/ is this file's folder: the first entry of sys.path when run as a script.
from readme_examples import broken_promises, command, examples_block
from smoke_stack import run_stacks

from noetl_compile.airflow_versions import HITL_SINCE, has_hitl, installed, version_label

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TIMEOUT = 900  # one example: large_loop takes minutes on a loaded 2-core machine
REFUSAL = "C518"  # what `noetlc check` says of a gate the target Airflow cannot run


def environment(home: Path, airflow_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "NOETL"))}
    env.update(NOETLC_HOME=str(home), AIRFLOW_HOME=str(airflow_home), PATH=f"{BIN}:{env['PATH']}")
    # One warm runner serves every example (a fork per run: each still a fresh process), where a
    # cold run would start Airflow again for each; CI sets CI, which would keep runs cold.
    env["NOETLC_WARM"] = "1"
    return env


def import_dags(folder: Path, env: dict[str, str]) -> tuple[int, int, list[str]]:
    """(imported, total, problems): every file of ``folder`` through a DagBag, every DAG
    serialized, in a child process with its own AIRFLOW_HOME (a fresh SQLite database)."""
    code = f"""
import json
from airflow.models.dagbag import DagBag
from airflow_plugin.compat import DagSerialization
bag = DagBag(dag_folder={str(folder)!r}, include_examples=False)
errors = dict(bag.import_errors)
for dag in bag.dags.values():
    try:
        DagSerialization.to_dict(dag)
    except Exception as exc:
        errors[dag.fileloc] = "serialization failed: " + repr(exc)
print(json.dumps({{"dags": sorted(d.fileloc for d in bag.dags.values()), "errors": errors}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    files = sorted(str(p) for p in folder.glob("*.py"))
    if done.returncode != 0:
        return 0, len(files), [done.stderr.strip().splitlines()[-1]]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    problems = [
        f"{Path(k).name}: {v.strip().splitlines()[-1]}" for k, v in result["errors"].items()
    ]
    bad = {Path(k).name for k in result["errors"]}
    return sum(1 for f in files if Path(f).name not in bad), len(files), problems


def main() -> int:
    import airflow

    version = airflow.__version__
    work = Path(tempfile.mkdtemp(prefix=f"noetlc-smoke-{version}-"))
    env = environment(work / "home", work / "airflow")
    (work / "airflow").mkdir()
    started = time.monotonic()
    dags = work / "dags"
    refused, gates_text, gates_ok = refused_playbooks(env)
    print(gates_text, flush=True)
    runnable = sorted(p for p in (ROOT / "playbooks").glob("*.yaml") if p not in refused)
    done = subprocess.run(
        [BIN / "noetlc", "compile", *map(str, runnable), "-o", str(dags)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    compiled = done.returncode == 0
    print(f"compile: rc {done.returncode}", flush=True)
    if not compiled:
        print(done.stdout + done.stderr)
    imported, total, problems = import_dags(dags, env)
    print(f"import: {imported}/{total} ({time.monotonic() - started:.0f}s)", flush=True)
    for problem in problems:
        print(f"  {problem}")

    t0 = time.monotonic()
    ran, examples, others_ok = run_examples(env, refused)
    print(f"examples: {ran}/{examples} ({time.monotonic() - t0:.0f}s)", flush=True)

    stack_text, stack_ok = "stack skipped (NOETLC_SMOKE_STACK=0)", True
    if os.environ.get("NOETLC_SMOKE_STACK", "1") != "0":
        t0 = time.monotonic()
        good, tried, stopped = run_stacks(
            lambda line: print(line, flush=True), runnable if refused else None
        )
        stack_text = f"stack runs {good}/{tried}"
        stack_ok = good == tried and stopped
        print(f"stack: {good}/{tried} ({time.monotonic() - t0:.0f}s)", flush=True)
    print(
        f"airflow {version}: dags {imported}/{total} import, examples {ran}/{examples} run, "
        f"{gates_text}, {stack_text} ({time.monotonic() - started:.0f}s)"
    )
    passed = (
        compiled and gates_ok and imported == total and ran == examples and others_ok and stack_ok
    )
    if passed:
        shutil.rmtree(work, ignore_errors=True)  # kept after a failure: its home holds the logs
    else:
        print(f"kept for a look: {work}")
    return 0 if passed else 1


def refused_playbooks(env: dict[str, str]) -> tuple[set[Path], str, bool]:
    """(the bundled playbooks `noetlc check` refuses for the installed Airflow with C518, a
    summary, whether that is what the version table expects). Where gates run, none may be
    refused; where they cannot, at least one must be (playbooks/gates.yaml), only with C518, and
    each must check clean for the first Airflow with gates (refused for the version, not broken)."""
    target = installed()
    if target is None:
        return set(), "gates: no installed Airflow", False
    done = subprocess.run(
        [str(BIN / "noetlc"), "check", "playbooks", "--quiet", "--format", "json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        errors = [d for d in json.loads(done.stdout) if d["severity"] == "error"]
    except (ValueError, KeyError, TypeError):
        return set(), f"gates: check exit {done.returncode}: {done.stderr.strip()[-300:]}", False
    refused = {ROOT / d["path"] for d in errors if d["code"] == REFUSAL}
    others = [f"{d['path']}:{d['line']}: {d['code']}" for d in errors if d["code"] != REFUSAL]
    if others:
        return refused, f"gates: other errors than {REFUSAL}: {', '.join(others)}", False
    if has_hitl(target):
        names = ", ".join(sorted(p.name for p in refused))
        if refused:
            return refused, f"gates: run here, yet {REFUSAL} refused {names}", False
        return refused, "gates: run here (none refused)", True
    if not refused:
        return refused, f"gates: Airflow {version_label(target)} has none, yet none refused", False
    first = version_label(HITL_SINCE)
    later = subprocess.run(
        [
            str(BIN / "noetlc"),
            "check",
            *map(str, sorted(refused)),
            "--quiet",
            "--airflow-version",
            first,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if later.returncode != 0:
        return refused, f"gates: refused for {first} too: {later.stdout.strip()[-300:]}", False
    names = ", ".join(sorted(p.name for p in refused))
    return refused, f"gates: refused by {REFUSAL} as expected ({names})", True


def run_examples(env: dict[str, str], refused: set[Path]) -> tuple[int, int, bool]:
    """Every line of the README's examples block, in order: (runs that kept their header's
    promises, runs, whether every other line succeeded). The runs share one warm runner (the
    first starts it; `noetlc run --stop` ends it, also when a line failed). A run of a playbook
    in ``refused`` must stop with C518 instead (counted with the other lines, not as a run)."""
    ran = examples = 0
    others_ok = True
    demo_up = False
    try:
        for line in examples_block():
            extra, words = command(line)
            demo_up = demo_up or words[:2] == ["demo", "up"]
            if words[:2] == ["demo", "down"]:
                demo_up = False
            t0 = time.monotonic()
            done = subprocess.run(
                [str(BIN / "noetlc"), *words],
                cwd=ROOT,
                env={**env, **extra},
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
            took = time.monotonic() - t0
            problems = [] if done.returncode == 0 else [f"exit {done.returncode}"]
            if words[0] == "run" and ROOT / words[1] in refused:
                output = done.stdout + done.stderr
                problems = (
                    []
                    if done.returncode != 0 and REFUSAL in output
                    else [f"exit {done.returncode}, expected a refusal with {REFUSAL}"]
                )
                others_ok = others_ok and not problems
            elif words[0] == "run":
                examples += 1
                if not problems:
                    problems = broken_promises(ROOT / words[1], done.stdout)
                ran += not problems
            else:
                others_ok = others_ok and not problems
            mark = "FAIL" if problems else "ok  "
            print(f"{mark} {took:6.1f}s  {' '.join(words)}", flush=True)
            if problems:
                tail = (done.stdout + done.stderr).strip().splitlines()[-6:]
                print("      " + "\n      ".join(problems + tail))
    finally:
        subprocess.run(
            [str(BIN / "noetlc"), "run", "--stop"], env=env, capture_output=True, check=False
        )
        if demo_up:  # a line failed before the block's own `demo down`: leave no services behind
            subprocess.run(
                [str(BIN / "noetlc"), "demo", "down"], env=env, capture_output=True, check=False
            )
    return ran, examples, others_ok


if __name__ == "__main__":
    sys.exit(main())
