"""`noetlc check` over the shared corpus and playbooks/: today's tree against an older one.

Issue 35 widened the secret detector (token formats, entropy, look-alike keys, more positions);
this bench answers two questions on the same files:

* speed: each tree checks every corpus project and playbooks/ in a child process that imports
  that tree's `noetl_compile` (one warm-up pass, then the best of the timed passes, in process
  CPU time: steadier than wall time on a machine shared with other work). Rounds interleave the trees,
  the order flipping every round, so a load change on the shared machine hits both. Printed: each
  round's times and ratio, then the median ratio against the 1.2x budget; the same for the
  wall time of the `noetlc check` command itself (interpreter start and imports included).
* findings: the X6xx diagnostics (code, file, line, column) of each tree, and the difference:
  a finding only today's tree reports is either a real secret or a new false positive.

The older tree is a detached `git worktree` of BASE (default main), created in a temporary
folder and removed at the end, or --base-tree DIR for a checkout you already have.

    python bench/check_secrets.py [--base main] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(passes: int) -> None:
    """In the child: this tree's check over each project, timed; findings as JSON on stdout."""
    import gc

    from noetl_compile.check import check_results, read_file

    sys.path.insert(0, str(ROOT))
    from tests.corpus import CORPUS, corpus_projects

    gc.disable()  # as the CLI does
    groups = [
        sorted(str(p) for p in project.rglob("*") if p.suffix in (".yaml", ".yml"))
        for project in [*corpus_projects(), ROOT / "playbooks"]
    ]
    # The older tree's own playbooks/ may differ: both trees read today's, passed by path.
    findings: list = []
    timings = []
    for attempt in range(passes + 1):
        start = time.process_time()
        for files in groups:
            results = [read_file(path) for path in files]
            check_results(results)
            if attempt == 0:
                for result in results:
                    for d in result.diagnostics:
                        if d.code.startswith("X6"):
                            where = Path(d.path).resolve()
                            base = CORPUS if where.is_relative_to(CORPUS) else ROOT
                            name = f"{base.name}/{where.relative_to(base)}"
                            findings.append([d.code, name, d.position.line, d.position.col])
        if attempt:  # the first pass warms the caches a CLI run also builds once
            timings.append(time.process_time() - start)
    json.dump({"seconds": min(timings), "findings": sorted(findings)}, sys.stdout)


def run_tree(tree: Path, passes: int) -> dict:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.argv = sys.argv[:1];"
        f"import runpy; m = runpy.run_path({str(Path(__file__))!r}, run_name='bench');"
        f"m['measure']({passes})"
    )
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tree)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=True,
    )
    return json.loads(proc.stdout)


def run_cli(tree: Path) -> float:
    """Wall seconds of `noetlc check` (this tree's, interpreter start included) over the corpus
    and playbooks/, one project per run as a catalog holds one generation."""
    sys.path.insert(0, str(ROOT))
    from tests.corpus import corpus_projects

    env = dict(os.environ, PYTHONPATH=str(tree))
    start = time.perf_counter()
    for project in [*corpus_projects(), ROOT / "playbooks"]:
        command = [sys.executable, "-m", "noetl_compile", "check", str(project), "--quiet"]
        # exit 1 is findings (the corpus has errors on purpose): only a crash stops the bench
        done = subprocess.run(command, capture_output=True, env=env, cwd=tree, check=False)
        if done.returncode > 1:
            raise SystemExit(f"noetlc check crashed in {tree} on {project}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--base-tree", help="a checkout of the older tree (skips git worktree)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    made = None
    if args.base_tree:
        base_tree = Path(args.base_tree)
    else:
        made = Path(tempfile.mkdtemp(prefix="noetlc-base-")) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(made), args.base],
            check=True,
            capture_output=True,
        )
        base_tree = made
    try:
        trees = {"base": base_tree, "today": ROOT}
        ratios, cli_ratios, results = [], [], {}
        for round_ in range(args.rounds):
            order = ["base", "today"] if round_ % 2 == 0 else ["today", "base"]
            seconds, wall = {}, {}
            for name in order:
                results[name] = run_tree(trees[name], args.passes)
                seconds[name] = results[name]["seconds"]
                wall[name] = run_cli(trees[name])
            ratio = seconds["today"] / seconds["base"]
            ratios.append(ratio)
            cli_ratios.append(wall["today"] / wall["base"])
            load = os.getloadavg()[0]
            print(
                f"round {round_ + 1}: in-process CPU base {seconds['base'] * 1000:.0f} ms, today "
                f"{seconds['today'] * 1000:.0f} ms, ratio {ratio:.3f}; CLI wall base "
                f"{wall['base']:.2f} s, today {wall['today']:.2f} s, ratio "
                f"{cli_ratios[-1]:.3f} (load {load:.1f})"
            )
        for label, values in (("in-process CPU", ratios), ("CLI wall", cli_ratios)):
            median = statistics.median(values)
            verdict = "within" if median <= 1.2 else "OVER"
            print(f"median ratio today/base, {label}: {median:.3f} ({verdict} the 1.2x budget)")
        base = {tuple(f) for f in results["base"]["findings"]}
        today = {tuple(f) for f in results["today"]["findings"]}
        print(f"X6xx findings: base {len(base)}, today {len(today)}")
        for label, diff in (("only today", today - base), ("only base", base - today)):
            print(f"{label}: {len(diff)}")
            for code, name, line, col in sorted(diff):
                print(f"  {code} {name}:{line}:{col}")
    finally:
        if made is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(made)],
                check=False,  # a tree already gone is no failure of the bench
                capture_output=True,
            )


if __name__ == "__main__":
    main()
