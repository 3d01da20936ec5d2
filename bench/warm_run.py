"""Part (g) of bench/runtime.py: warm vs cold `noetlc run` of hello_world, next to NoETL 5's local run.

One command, about a minute on a quiet 2-core machine (under 3 minutes under load):

    python bench/warm_run.py [--rounds 7]
    python bench/warm_run.py --base REV [--rounds 7]   # today's warm run against an older tree's

With ``--base``: the warm ``noetlc run`` of hello_world by this tree and by an older one (a
detached ``git worktree`` of REV, default b3df33c, the tree before issue 29's profiles merge),
each with its own home and warm runner and its own packages first on ``PYTHONPATH``,
interleaved round by round with the order flipped every round; prints each round's times with
the load average, the medians and their ratio against the 1.1x budget of issue 29.

Warm (the default `noetlc run`, served by the home's runner), cold (`--cold`: a fresh Airflow
process) and NoETL 5's ``noetl run FILE -r local`` of the same three-step shape (its local
runtime runs shell steps, not python) run in turn, round after round, so a load spike of another
user hits all three; each line prints the median wall time with the load average the samples ran
under, and the ratios. NoETL 5 comes from its cached venv (tests/noetl5 makes it).
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


def _load() -> float:
    return os.getloadavg()[0]


def _timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, the 1-minute load average when the command started)."""
    load = _load()
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode()[-2000:]}")
    return elapsed, load


def _wait_for_runner(home: Path, timeout: float = 300) -> None:
    from airflow_plugin.local.home import Home
    from airflow_plugin.local.warm import socket_path

    deadline = time.monotonic() + timeout
    while not socket_path(Home(home)).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"the warm runner did not start: see {home}/logs/warm.log")
        time.sleep(0.2)


class Series:
    """One kind of run's samples: wall times with the load average each one started under."""

    def __init__(self, label: str) -> None:
        self.label, self.walls, self.loads = label, [], []

    def add(self, sample: tuple[float, float]) -> None:
        self.walls.append(sample[0])
        self.loads.append(sample[1])

    @property
    def median(self) -> float:
        return statistics.median(self.walls)

    def line(self, baseline: Series | None = None) -> str:
        walls = self.walls
        text = (
            f"    {self.label:<34} median {self.median:6.2f} s  (min {min(walls):.2f}, "
            f"max {max(walls):.2f}, n={len(walls)}; load {min(self.loads):.1f}-"
            f"{max(self.loads):.1f}, median {statistics.median(self.loads):.1f})"
        )
        if baseline is not None:
            text += f"  {self.median / baseline.median:.2f}x {baseline.label.split()[0]}"
        return text


def bench_warm_run(scratch: Path, rounds: int = 7) -> dict[str, float]:
    """Warm, cold and NoETL 5 runs of hello_world's shape, interleaved round by round (a load
    spike from another user hits all three alike); medians over ``rounds``."""
    playbook = ROOT / "playbooks" / "hello_world.yaml"
    base = {k: v for k, v in os.environ.items() if k not in ("NOETLC_WARM", "CI")}
    cli = [sys.executable, "-m", "noetl_compile", "run", str(playbook)]
    warm_home = Path(tempfile.mkdtemp(prefix="warm-", dir=scratch))
    cold_home = Path(tempfile.mkdtemp(prefix="cold-", dir=scratch))
    warm_env = dict(base, NOETLC_HOME=str(warm_home), PYTHONPATH=str(ROOT))
    cold_env = dict(base, NOETLC_HOME=str(cold_home), PYTHONPATH=str(ROOT))
    folder = Path(tempfile.mkdtemp(prefix="noetl5-", dir=scratch))
    shell_playbook = folder / "hello_world_shell.yaml"
    shell_playbook.write_text(HELLO_NOETL5)
    noetl5_cmd = [str(NOETL5), "run", str(shell_playbook), "-r", "local"]
    warm, cold = Series("warm noetlc run (default)"), Series("cold noetlc run --cold")
    noetl5 = Series("NoETL 5 noetl run -r local")
    check = Series("noetlc check (CLI start + read)")
    try:
        _timed([*cli, "--warm"], warm_env, ROOT)  # creates the home, starts the runner
        _wait_for_runner(warm_home)
        _timed([*cli, "--cold"], cold_env, ROOT)  # creates the cold home (its DB)
        _timed([*cli, "--warm"], warm_env, ROOT)  # the runner's first fork
        if NOETL5.exists():
            _timed(noetl5_cmd, base, folder)
        for _ in range(rounds):
            warm.add(_timed([*cli, "--warm"], warm_env, ROOT))
            cold.add(_timed([*cli, "--cold"], cold_env, ROOT))
            if NOETL5.exists():
                noetl5.add(_timed(noetl5_cmd, base, folder))
            check.add(
                _timed([sys.executable, "-m", "noetl_compile", "check", str(playbook)], base, ROOT)
            )
        print(
            f"(g) hello_world, {rounds} interleaved rounds (load = 1-minute load average, {os.cpu_count()} CPUs):"
        )
        print(warm.line())
        print(cold.line(warm) + f"  -> warm is {warm.median / cold.median:.2f}x cold")
        if noetl5.walls:
            print(noetl5.line() + f"  -> warm is {warm.median / noetl5.median:.1f}x NoETL 5")
        else:
            print(f"    NoETL 5: no venv at {NOETL5.parent.parent}; not compared")
        print(check.line())
        verdict = "meets" if warm.median <= 1.5 else "misses"
        print(f"    target: warm median <= 1.5 s (1.0 s hoped for): {verdict} it")
        result = {"warm": warm.median, "cold": cold.median, "check": check.median}
        if noetl5.walls:
            result["noetl5"] = noetl5.median
        return result
    finally:
        from airflow_plugin.local.home import Home
        from airflow_plugin.local.warm import stop

        stop(Home(warm_home))


DEFAULT_BASE = "b3df33c"  # main before the profiles merge (1a163f4) of issue 29
BUDGET = 1.1


def bench_against_base(scratch: Path, base_tree: Path, rounds: int) -> float:
    """Warm runs of hello_world by this tree and by ``base_tree``, interleaved; the ratio of
    the medians (today / base)."""
    trees = {"today": ROOT, "base": base_tree}
    keep = {k: v for k, v in os.environ.items() if k not in ("NOETLC_WARM", "CI", "PYTHONPATH")}
    envs, homes = {}, {}
    for name, tree in trees.items():
        homes[name] = Path(tempfile.mkdtemp(prefix=f"warm-{name}-", dir=scratch))
        envs[name] = dict(keep, NOETLC_HOME=str(homes[name]), PYTHONPATH=str(tree))
    # Both run today's playbook, each compiled by its own tree's compiler.
    playbook = ROOT / "playbooks" / "hello_world.yaml"
    cli = [sys.executable, "-m", "noetl_compile", "run", str(playbook), "--warm"]
    series = {name: Series(f"{name} warm noetlc run") for name in trees}
    try:
        for name, tree in trees.items():
            _timed(cli, envs[name], tree)  # creates the home, starts the runner
            _wait_for_runner(homes[name])
            _timed(cli, envs[name], tree)  # the runner's first fork
        for round_no in range(rounds):
            order = list(trees) if round_no % 2 == 0 else list(reversed(trees))
            for name in order:
                series[name].add(_timed(cli, envs[name], trees[name]))
            today, base = series["today"].walls[-1], series["base"].walls[-1]
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(
                f"  round {round_no + 1}: today {today:5.2f} s  base {base:5.2f} s  "
                f"({today / base:.2f}x)  load {load}"
            )
        print(
            f"warm noetlc run of hello_world, {rounds} interleaved rounds ({os.cpu_count()} CPUs):"
        )
        print(series["base"].line())
        print(series["today"].line(series["base"]))
        ratio = series["today"].median / series["base"].median
        verdict = "within" if ratio <= BUDGET else "OVER"
        print(f"    ratio {ratio:.2f}x ({verdict} the {BUDGET}x budget)")
        return ratio
    finally:
        from airflow_plugin.local.home import Home
        from airflow_plugin.local.warm import stop

        for home in homes.values():
            stop(Home(home))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--base", help=f"compare with an older revision (e.g. {DEFAULT_BASE})")
    parser.add_argument("--base-tree", help="a checkout of the older tree (skips git worktree)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="noetlc-bench-warm-"))
    base_tree = Path(args.base_tree) if args.base_tree else scratch / "base"
    try:
        if args.base or args.base_tree:
            if not args.base_tree:
                subprocess.run(
                    [
                        "git",
                        "-C",
                        str(ROOT),
                        "worktree",
                        "add",
                        "--detach",
                        str(base_tree),
                        args.base,
                    ],
                    check=True,
                    capture_output=True,
                )
            bench_against_base(scratch, base_tree, args.rounds)
        else:
            bench_warm_run(scratch, args.rounds)
    finally:
        if args.base and not args.base_tree and base_tree.exists():
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)],
                check=False,
                capture_output=True,
            )
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
