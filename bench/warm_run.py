"""Part (g) of bench/runtime.py: warm vs cold `noetlc run` of hello_world, next to NoETL 5's local run.

Also runnable alone: ``python bench/warm_run.py [--rounds N]``.
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

NOETL5 = Path.home() / ".cache" / "noetlc-tests" / "noetl5-venv" / "bin" / "noetl"

# hello_world's shape for NoETL 5's local runtime, which runs shell/http, not python: three steps
# in a row, the middle one rendering the workload. (`end` is not used as a step name: NoETL 5's
# local runtime stops at a step named `end` without running it.)
HELLO_NOETL5 = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: hello_world_shell
  path: bench/hello_world_shell
executor:
  profile: local
workload:
  message: Hello World
workflow:
  - step: start
    tool: {kind: shell, cmds: ["echo initialized"]}
    next:
      - step: greet
  - step: greet
    tool: {kind: shell, cmds: ["echo '{{ workload.message }}' | tr a-z A-Z"]}
    next:
      - step: finish
  - step: finish
    tool: {kind: shell, cmds: ["echo complete"]}
"""


def _timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode()[-2000:]}")
    return elapsed


def _wait_for_runner(home: Path, timeout: float = 300) -> None:
    from airflow_plugin.local.home import Home
    from airflow_plugin.local.warm import socket_path

    deadline = time.monotonic() + timeout
    while not socket_path(Home(home)).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"the warm runner did not start: see {home}/logs/warm.log")
        time.sleep(0.2)


def bench_warm_run(scratch: Path, rounds: int = 5) -> None:
    playbook = ROOT / "playbooks" / "hello_world.yaml"
    base = {k: v for k, v in os.environ.items() if k != "NOETLC_WARM"}
    cli = [sys.executable, "-m", "noetl_compile", "run", str(playbook)]
    warm_home = Path(tempfile.mkdtemp(prefix="warm-", dir=scratch))
    cold_home = Path(tempfile.mkdtemp(prefix="cold-", dir=scratch))
    warm_env = dict(base, NOETLC_HOME=str(warm_home), PYTHONPATH=str(ROOT))
    cold_env = dict(base, NOETLC_HOME=str(cold_home), PYTHONPATH=str(ROOT))
    try:
        _timed([*cli, "--warm"], warm_env, ROOT)  # creates the home, starts the runner
        _wait_for_runner(warm_home)
        _timed(cli, cold_env, ROOT)  # creates the cold home
        warm_t, cold_t = [], []
        for _ in range(rounds):
            warm_t.append(_timed([*cli, "--warm"], warm_env, ROOT))
            cold_t.append(_timed(cli, cold_env, ROOT))
        warm, cold = statistics.median(warm_t), statistics.median(cold_t)
        compile_t = statistics.median(
            _timed([sys.executable, "-m", "noetl_compile", "check", str(playbook)], base, ROOT)
            for _ in range(3)
        )
        print(
            f"(g) hello_world: warm noetlc run {warm:.2f} s vs cold {cold:.2f} s: "
            f"{warm / cold:.2f}x (target warm <= 1.5 s); `noetlc check` alone {compile_t:.2f} s"
        )
        if NOETL5.exists():
            with tempfile.TemporaryDirectory(dir=scratch) as folder:
                path = Path(folder) / "hello_world_shell.yaml"
                path.write_text(HELLO_NOETL5)
                command = [str(NOETL5), "run", str(path), "-r", "local"]
                _timed(command, base, Path(folder))
                noetl5 = statistics.median(
                    _timed(command, base, Path(folder)) for _ in range(rounds)
                )
            print(
                f"    NoETL 5 `noetl run -r local` (same shape, shell steps) {noetl5:.2f} s: "
                f"warm noetlc run is {warm / noetl5:.1f}x that"
            )
        else:
            print(f"    NoETL 5: no venv at {NOETL5.parent.parent}; not compared")
    finally:
        from airflow_plugin.local.home import Home
        from airflow_plugin.local.warm import stop

        stop(Home(warm_home))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="noetlc-bench-warm-"))
    try:
        bench_warm_run(scratch, args.rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
