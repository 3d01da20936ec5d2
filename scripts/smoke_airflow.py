"""The smoke suite of one Airflow version, run by scripts/smoke-airflow.sh with that version's
virtualenv's Python: compile every bundled playbook with this checkout's compiler, import every
DAG file as the DAG processor does, then run every bundled example as the README's examples
block shows it (`noetlc demo up` ... `noetlc demo down`, gates answered by `--signal`).

Prints one line per check and a summary ``airflow X.Y.Z: dags A/B import, examples C/D run``;
exits 1 when anything failed. Standard library and Airflow only (no pytest)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TIMEOUT = 900  # one example: large_loop takes minutes on a loaded 2-core machine


def readme_lines() -> list[str]:
    """The README's ```sh block that starts with `noetlc demo up` (as tests/runtime/
    test_readme_examples.py reads it)."""
    blocks, current = [], None
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if current is None and line.strip() == "```sh":
            current = []
        elif current is not None and line.strip() == "```":
            blocks.append(current)
            current = None
        elif current is not None:
            current.append(line)
    found = [b for b in blocks if b and b[0].split("#")[0].strip() == "noetlc demo up"]
    return [line for line in found[0] if line.strip()]


def environment(home: Path, airflow_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "NOETL"))}
    env.update(NOETLC_HOME=str(home), AIRFLOW_HOME=str(airflow_home), PATH=f"{BIN}:{env['PATH']}")
    env["NOETLC_WARM"] = "0"  # no warm runner left behind (as the tests run `noetlc run`)
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
    import json

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
    done = subprocess.run(
        [BIN / "noetlc", "compile", str(ROOT / "playbooks"), "-o", str(dags)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    print(f"compile: rc {done.returncode}", flush=True)
    if done.returncode != 0:
        print(done.stdout + done.stderr)
    imported, total, problems = import_dags(dags, env)
    print(f"import: {imported}/{total} ({time.monotonic() - started:.0f}s)", flush=True)
    for problem in problems:
        print(f"  {problem}")

    ran, examples, failed = 0, 0, []
    for line in readme_lines():
        words = shlex.split(line, comments=True)
        extra = {}
        while "=" in words[0] and not words[0].startswith("-"):
            name, _, value = words.pop(0).partition("=")
            extra[name] = value
        args = [str(BIN / "noetlc"), *words[1:]]
        t0 = time.monotonic()
        done = subprocess.run(
            args,
            cwd=ROOT,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        took = time.monotonic() - t0
        is_run = "run" in words
        examples += is_run
        ok = done.returncode == 0
        ran += is_run and ok
        print(f"{'ok  ' if ok else 'FAIL'} {took:6.1f}s  {' '.join(words)}", flush=True)
        if not ok:
            tail = (done.stdout + done.stderr).strip().splitlines()[-6:]
            failed.append(" ".join(words))
            print("      " + "\n      ".join(tail))
    print(
        f"airflow {version}: dags {imported}/{total} import, examples {ran}/{examples} run "
        f"({time.monotonic() - started:.0f}s)"
    )
    return 0 if imported == total and ran == examples and done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
