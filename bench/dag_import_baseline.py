"""Import time of today's DAG files against an older tree's, on the same playbooks.

`bench/dag_import.py` measures today's tree alone; this one answers "did the DAG files get
slower?" fairly: both trees compile the SAME playbooks, each with its own compiler, and each
tree's files are imported with that tree's `airflow_plugin` first on the path.

* The older tree is a detached `git worktree` of BASE (default b3df33c, the tree before
  issue 29's profiles merge; issue 22 compared with f8e7473 at 1.2x), created in a temporary folder and removed at the end (or pass
  --base-tree DIR to use a checkout you already have).
* Each tree runs `compile_paths` over every corpus project (one run per project, as a catalog
  holds one generation) and playbooks/; only the playbooks BOTH compilers accept are timed.
* Each file is imported in a child forked from a parent that has already run `import airflow`
  (cold), or also the modules the files import (warm: airflow.sdk and the plugin's operator
  modules, as `[dag_processor] parsing_pre_import_modules` would) - as bench/dag_import.py does.
* Rounds interleave the trees (the order flips every round), so a load change on a shared
  machine hits both; the load averages are printed with every round.

* Bytecode (``--bytecode``): ``compiled`` (default) byte-compiles both trees' packages first,
  as ``pip install`` does, so an import reads ``.pyc`` files as a deployment's DAG processor
  does; ``source`` removes their ``__pycache__`` and writes none, so every import compiles the
  modules from source (a checkout run with ``PYTHONDONTWRITEBYTECODE``). Left to the
  environment, one tree could read caches and the other not.

* The parent's heap is frozen before forking, as Airflow's DAG processor manager does
  (`--gc live` leaves it live: then a file whose allocations reach a full collection pays for
  walking the inherited heap, noise of 150-250 ms on single files).

Prints per round the median wall and CPU (the child's process time, steadier on a shared
machine) import time of each tree and their ratio with the load average, then the median of the
per-round medians with its ratio against the budget (1.1x, issue 29's), and the files that grew most.

    python bench/dag_import_baseline.py [--base REV] [--rounds 5] [--top 10] [--budget 1.1]
        [--bytecode compiled|source]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BASE = "b3df33c"
BUDGET = 1.1

# Run inside each tree (its own noetl_compile first on the path): compile every corpus project
# and playbooks/ into OUT, print {playbook path: DAG file} for the files written.
BUILD = """
import json, os, sys
from pathlib import Path
from noetl_compile.compile import compile_paths
corpus, playbooks, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
roots = sorted(str(p) for p in corpus.iterdir() if p.is_dir()) + [playbooks]
written = {}
for index, root in enumerate(roots):
    report = compile_paths([root], str(out / f"{index:02d}"))
    for f in report.files:
        written[os.path.relpath(os.path.abspath(f.source), os.path.dirname(root))] = f.output
print(json.dumps(written))
"""


def imported_modules(path: Path) -> set[str]:
    """The modules a DAG file imports at its top (what a pre-import would load)."""
    import ast

    modules = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


def measure(files: list[str], preload: list[str], freeze: bool) -> list[list[float]]:
    """[wall seconds, CPU seconds of the child] per file, each imported in a child forked after
    the preloads (bench/fork_import.py, loaded by its path: this runs inside either tree)."""
    spec = importlib.util.spec_from_file_location(
        "fork_import", Path(__file__).with_name("fork_import.py")
    )
    fork_import = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fork_import)
    timings = []
    for path, (wall, cpu, ok) in zip(files, fork_import.import_each(files, preload, freeze)):
        if not ok:
            raise SystemExit(f"{path} built no DAG")
        timings.append([wall, cpu])
    return timings


PACKAGES = ("noetl_compile", "airflow_plugin")


def prepare_bytecode(tree: Path, mode: str) -> None:
    """``compiled``: byte-compile the tree's packages (as an install does); ``source``: remove
    their caches (the children write none: ``tree_env``)."""
    if mode == "compiled":
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", *(str(tree / p) for p in PACKAGES)],
            check=True,
            capture_output=True,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""),
        )
        return
    for package in PACKAGES:
        for cache in (tree / package).rglob("__pycache__"):
            shutil.rmtree(cache)


def tree_env(tree: Path, home: Path) -> dict[str, str]:
    return dict(
        os.environ,
        PYTHONDONTWRITEBYTECODE="1",  # compiled: the caches are there; source: none is written
        PYTHONPATH=str(tree),  # this tree's noetl_compile and airflow_plugin, nobody else's
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        NOETLC_CORPUS=os.environ.get("NOETLC_CORPUS", ""),
    )


def build(tree: Path, out: Path, corpus: Path, env: dict[str, str]) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-P", "-c", BUILD, str(corpus), str(tree / "playbooks"), str(out)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_side(
    tree: Path, files: list[str], preload: list[str], freeze: bool, env: dict[str, str]
) -> list[list[float]]:
    """One fresh interpreter per side and mode, so preloads never leak between measurements."""
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            str(Path(__file__).resolve()),
            "--measure",
            json.dumps([files, preload, freeze]),
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,  # its output goes into the message below
    )
    if proc.returncode:
        raise SystemExit(f"measuring {tree} failed:\n{proc.stdout}{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def git(*args: str) -> None:
    subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help="the older revision (git rev)")
    parser.add_argument("--base-tree", help="a checkout of the older tree (skips git worktree)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=8, help="print the N files that grew most")
    parser.add_argument(
        "--gc",
        choices=("freeze", "live"),
        default="freeze",
        help="freeze the parent's heap before forking, as Airflow's DAG processor does "
        "(default), or leave it live",
    )
    parser.add_argument("--only", help="time only the playbooks whose path holds this text")
    parser.add_argument("--budget", type=float, default=BUDGET, help="the ratio to stay within")
    parser.add_argument(
        "--bytecode",
        choices=("compiled", "source"),
        default="compiled",
        help="import the packages from byte-compiled caches, as an installed package "
        "(default), or compile them from source on every import",
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        files, preload, freeze = json.loads(args.measure)
        print(json.dumps(measure(files, preload, freeze)))
        return

    sys.path.insert(0, str(ROOT))
    from tests.corpus import CORPUS

    tmp = Path(tempfile.mkdtemp(prefix="noetlc-import-"))
    base_tree = Path(args.base_tree) if args.base_tree else tmp / "base"
    try:
        if not args.base_tree:
            git("worktree", "add", "--detach", str(base_tree), args.base)
        home = tmp / "airflow"
        home.mkdir()
        trees = {"today": ROOT, "base": base_tree}
        envs = {name: tree_env(tree, home) for name, tree in trees.items()}
        built = {
            name: build(tree, tmp / "out" / name, CORPUS, envs[name])
            for name, tree in trees.items()
        }
        for tree in trees.values():
            prepare_bytecode(tree, args.bytecode)
        common = sorted(set(built["today"]) & set(built["base"]))
        only = {name: len(set(files) - set(common)) for name, files in built.items()}
        files = {name: [built[name][source] for source in common] for name in trees}
        warm = {}
        for name in trees:
            modules = set().union(*(imported_modules(Path(f)) for f in files[name]))
            warm[name] = ["airflow", "airflow.sdk", *sorted(modules)]
        if args.only:  # the preloads stay those of the whole set
            picked = [i for i, source in enumerate(common) if args.only in source]
            common = [common[i] for i in picked]
            files = {name: [paths[i] for i in picked] for name, paths in files.items()}
        print(
            f"{len(common)} playbooks both trees compile (today {only['today']} more, "
            f"base {args.base if not args.base_tree else base_tree} {only['base']} more); "
            "each file imported in a child forked after `import airflow` (cold) or after the "
            f"files' own imports (warm); parent heap {args.gc}; bytecode {args.bytecode}"
        )
        # (tree, mode, clock) -> the median of each round; clock 0 = wall, 1 = CPU
        medians: dict[tuple[str, str, int], list[float]] = {}
        per_file: dict[tuple[str, str], list[list[list[float]]]] = {}
        for round_no in range(args.rounds):
            order = list(trees) if round_no % 2 == 0 else list(reversed(trees))
            line = []
            for mode in ("cold", "warm"):
                for name in order:
                    preload = ["airflow"] if mode == "cold" else warm[name]
                    timings = run_side(
                        trees[name], files[name], preload, args.gc == "freeze", envs[name]
                    )
                    per_file.setdefault((name, mode), []).append(timings)
                    for clock in (0, 1):
                        medians.setdefault((name, mode, clock), []).append(
                            1000 * statistics.median(t[clock] for t in timings)
                        )
                today, base = medians[("today", mode, 0)][-1], medians[("base", mode, 0)][-1]
                cpu = medians[("today", mode, 1)][-1] / medians[("base", mode, 1)][-1]
                line.append(
                    f"{mode} {today:6.2f} / {base:6.2f} ms ({today / base:.2f}x, CPU {cpu:.2f}x)"
                )
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"  round {round_no + 1} today / base: " + "   ".join(line) + f"   load {load}")
        print("median of the round medians (wall, then the child's CPU time):")
        for mode in ("cold", "warm"):
            for clock, label in ((0, "wall"), (1, "CPU ")):
                today = statistics.median(medians[("today", mode, clock)])
                base = statistics.median(medians[("base", mode, clock)])
                ratio = today / base
                verdict = "within" if ratio <= args.budget else "OVER"
                print(
                    f"  {mode} {label}: today {today:6.2f} ms   base {base:6.2f} ms   "
                    f"ratio {ratio:.2f}x ({verdict} the {args.budget}x budget)"
                )
        if args.top:
            # Per file, the median over rounds of the warm import's CPU: where the growth sits.
            def per(name: str) -> list[float]:
                rounds = per_file[(name, "warm")]
                return [
                    1000 * statistics.median(r[i][1] for r in rounds) for i in range(len(common))
                ]

            today_files, base_files = per("today"), per("base")
            grown = sorted(
                range(len(common)), key=lambda i: today_files[i] - base_files[i], reverse=True
            )
            print(f"warm CPU, the {args.top} files that grew most (median over rounds):")
            for i in grown[: args.top]:
                print(f"  {today_files[i]:7.2f} ms vs {base_files[i]:7.2f} ms  {common[i]}")
    finally:
        if not args.base_tree and base_tree.exists():
            git("worktree", "remove", "--force", str(base_tree))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
