"""Speed of `noetlc compile` over the whole shared corpus, in-process.

Prints, per playbook that `check` accepts: the time of lower + emit (the compile proper,
target <= 5 ms per playbook), the whole pipeline (load + read + check + lower + emit), and the
slowest files; then the wall time of the CLI over the corpus. Best of N runs.
"""

from __future__ import annotations

import gc
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from noetl_compile.check import check_results, read_file
from noetl_compile.compile import compile_result
from tests.corpus import CORPUS, corpus_files

RUNS = 5
TARGET_MS = 5.0


def main() -> None:
    files = [str(p) for p in corpus_files()]
    gc.disable()  # as the CLI does
    results = [read_file(path) for path in files]
    check_results(results)
    accepted = [r for r in results if not r.has_errors and r.playbook is not None]

    per_file: dict[str, float] = {}
    for _ in range(RUNS):
        for result in accepted:
            start = time.perf_counter()
            compile_result(result, result.path)
            elapsed = time.perf_counter() - start
            per_file[result.path] = min(per_file.get(result.path, elapsed), elapsed)
    lower_emit = sum(per_file.values())

    pipeline = float("inf")
    for _ in range(RUNS):
        start = time.perf_counter()
        again = [read_file(path) for path in files]
        check_results(again)
        for result in again:
            if not result.has_errors and result.playbook is not None:
                compile_result(result, result.path)
        pipeline = min(pipeline, time.perf_counter() - start)

    times = sorted(per_file.values())
    per_ms = 1000 * lower_emit / len(accepted)
    print(f"corpus: {len(files)} playbooks under {CORPUS}, {len(accepted)} accepted by check")
    print(
        f"lower + emit: {1000 * lower_emit:.1f} ms total, {per_ms:.2f} ms per playbook "
        f"(median {1000 * statistics.median(times):.2f}, p95 {1000 * times[int(0.95 * (len(times) - 1))]:.2f}, "
        f"max {1000 * times[-1]:.2f}) -> target <= {TARGET_MS} ms: {'met' if per_ms <= TARGET_MS else 'MISSED'}"
    )
    print(
        f"whole pipeline (load+read+check+lower+emit): {1000 * pipeline:.1f} ms, "
        f"{1000 * pipeline / len(files):.2f} ms per playbook"
    )
    print("slowest (lower + emit):")
    for path, seconds in sorted(per_file.items(), key=lambda kv: -kv[1])[:5]:
        print(f"  {1000 * seconds:6.2f} ms  {Path(path).relative_to(CORPUS)}")
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "noetl_compile", "compile", str(CORPUS), "-o", out],
            cwd=ROOT,
            capture_output=True,
            check=False,
        )
        print(f"CLI wall time, corpus into an empty folder: {time.perf_counter() - start:.2f} s")
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "noetl_compile", "compile", str(CORPUS), "-o", out, "--check"],
            cwd=ROOT,
            capture_output=True,
            check=False,
        )
        print(
            f"CLI wall time, --check of an up-to-date folder: {time.perf_counter() - start:.2f} s"
        )


if __name__ == "__main__":
    main()
