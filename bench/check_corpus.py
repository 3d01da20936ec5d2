"""Speed of `noetlc check` over the whole shared corpus.

Prints in-process time (total and per playbook, slowest files) against a baseline measured in
the same process — PyYAML's C loader reading the same files, the least any checker must do —
and the wall time of the CLI including interpreter start against `python -c "import yaml"`.
Targets (issue 2): <= 2 ms per playbook in-process, <= 1 s wall for the corpus.
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml

from noetl_compile.check import check_results, read_file
from noetl_compile.discover import find_files
from tests.corpus import CORPUS, corpus_files


def best_of(runs: int, func) -> float:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        timings.append(time.perf_counter() - start)
    return min(timings)


def main() -> None:
    files = [str(p) for p in corpus_files()]
    gc.disable()  # as the CLI does

    def baseline() -> None:
        for path in files:
            with open(path, encoding="utf-8") as handle:
                yaml.load(handle, Loader=yaml.CSafeLoader)

    def check_all() -> None:
        check_results([read_file(path) for path in files])

    check_all()  # warm caches that a CLI run also builds once (grammar, templates)
    base = best_of(5, baseline)
    total = best_of(5, check_all)
    per_file = []
    for path in files:
        start = time.perf_counter()
        check_results([read_file(path)])
        per_file.append((time.perf_counter() - start, path))
    n = len(files)
    print(f"corpus: {n} playbooks under {CORPUS}")
    print(
        f"in-process check: {total * 1000:.1f} ms total, {total / n * 1000:.3f} ms per playbook (target <= 2 ms)"
    )
    print(
        f"baseline yaml.load (CSafeLoader): {base * 1000:.1f} ms total; check / baseline = {total / base:.2f}x"
    )
    times = sorted(t for t, _ in per_file)
    print(
        f"per file (warm): median {statistics.median(times) * 1000:.3f} ms, "
        f"p95 {times[int(0.95 * (n - 1))] * 1000:.3f} ms, max {times[-1] * 1000:.3f} ms"
    )
    for seconds, path in sorted(per_file, reverse=True)[:5]:
        print(f"  {seconds * 1000:7.3f} ms  {Path(path).relative_to(CORPUS)}")

    # File discovery honours .gitignore files and --exclude (issue 11); its baseline is a bare
    # os.walk listing the same YAML files.
    def bare_walk() -> None:
        for _folder, _dirs, names in os.walk(CORPUS):
            [name for name in names if name.endswith((".yaml", ".yml"))]

    walk = best_of(5, bare_walk)
    found = best_of(5, lambda: find_files([str(CORPUS)], ("docker-compose*.yml",)))
    print(
        f"discovery (.gitignore + --exclude): {found * 1000:.2f} ms; bare os.walk: "
        f"{walk * 1000:.2f} ms; ratio {found / walk:.1f}x"
    )

    cli = [sys.executable, "-m", "noetl_compile", "check", str(CORPUS), "--quiet"]
    bare = [sys.executable, "-c", "import yaml"]
    wall, cpu = cli_times(5, cli)
    start_only, start_cpu = cli_times(5, bare)
    print(
        f"CLI wall time incl. interpreter start: {wall:.3f} s (target <= 1 s); "
        f"python -c 'import yaml': {start_only:.3f} s; ratio {wall / start_only:.1f}x"
    )
    # CPU time (the CLI and its worker processes) does not count what other programs take from
    # a shared machine, so it compares runs where wall time cannot.
    print(
        f"CLI CPU time (process and workers): {cpu:.3f} s; python -c 'import yaml': {start_cpu:.3f} s"
    )


def cli_times(runs: int, command: list[str]) -> tuple[float, float]:
    """Best wall and best CPU seconds (user + system, children included) of ``runs`` runs."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, capture_output=True, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return min(walls), min(cpus)


if __name__ == "__main__":
    main()
