"""How check and compile time grow with the size of a playbook.

Generates chains (step i -> step i+1, each reading the previous result) of 1k, 10k and 100k
steps and fan-outs (one step routing to N parallel steps that join in one) of 5k and 50k, checks
and compiles each in-process, and prints the time per size and the ratio between consecutive
sizes. The baseline, measured in the same script, is PyYAML's C loader reading the same text:
the least any checker must do, itself linear. Target (issue 10): 10x the size costs <= 12x the
time, for check and for compile.

    python bench/scale.py            # all sizes (the 100k chain takes a while)
    python bench/scale.py --quick    # 1k/10k chains, 5k fan-out only
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml

from noetl_compile.check import check_results, read_file
from noetl_compile.compile import compile_result

HEADER = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: scale, path: bench/scale}\n"
HEADER += "workload:\n  base: 1\nworkflow:\n"


def chain(n: int) -> str:
    lines = [HEADER]
    for i in range(n):
        reads = "{{ workload.base }}" if i == 0 else f"{{{{ s{i - 1}.value }}}}"
        lines.append(
            f"  - step: {'start' if i == 0 else f's{i}'}\n"
            "    tool:\n      kind: python\n"
            f'      args: {{x: "{reads}"}}\n'
            "      code: |\n        result = {'value': x}\n"
        )
        if i + 1 < n:
            lines.append(f"    next:\n      - step: s{i + 1}\n")
    return "".join(lines).replace("{{ s0.value }}", "{{ start.value }}")


def fan_out(n: int) -> str:
    lines = [HEADER, "  - step: start\n    tool: {kind: noop}\n    next:\n"]
    lines += [f"      - step: b{i}\n" for i in range(n)]
    for i in range(n):
        lines.append(
            f"  - step: b{i}\n    tool:\n      kind: python\n"
            f"      code: |\n        result = {{'i': {i}}}\n"
            "    next:\n      - step: join\n"
        )
    lines.append("  - step: join\n    tool: {kind: noop}\n")
    return "".join(lines)


def timed(func, repeat: int = 1) -> float:
    """Best of ``repeat`` runs: the machine is shared, the minimum is the least disturbed."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def measure(text: str, folder: Path, name: str) -> tuple[float, float, float, int]:
    """(yaml baseline, check, compile) seconds and the number of check findings."""
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    repeat = 3 if len(text) < 5_000_000 else 1  # small sizes are noisy, large ones slow
    base = timed(lambda: yaml.load(text, Loader=yaml.CSafeLoader), repeat)
    holder = {}

    def check() -> None:
        result = read_file(str(path))
        check_results([result])
        holder["result"] = result

    checked = timed(check, repeat)
    result = holder["result"]
    errors = [d for d in result.diagnostics if d.severity.label == "error"]
    if errors:
        raise SystemExit(f"{name}: the generated playbook has errors: {errors[:3]}")
    compiled = timed(lambda: compile_result(result, f"{name}.yaml"), repeat)
    return base, checked, compiled, len(result.diagnostics)


def main() -> None:
    quick = "--quick" in sys.argv
    series = {
        "chain": (chain, [1_000, 10_000] if quick else [1_000, 10_000, 100_000]),
        "fan-out": (fan_out, [500, 5_000] if quick else [500, 5_000, 50_000]),
    }
    gc.disable()  # as the CLI does
    worst = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for shape, (build, sizes) in series.items():
            print(f"{shape}:")
            print(
                f"  {'steps':>8} {'yaml s':>8} {'check s':>8} {'compile s':>9}"
                f" {'x yaml':>7} {'check x':>8} {'compile x':>9} {'yaml x':>7}"
            )
            previous = None
            for n in sizes:
                base, checked, compiled, _ = measure(build(n), Path(folder), f"{shape}{n}")
                growth = ""
                if previous is not None:
                    check_ratio, compile_ratio = checked / previous[0], compiled / previous[1]
                    worst = max(worst, check_ratio, compile_ratio)
                    # The baseline's own growth shows what the machine does to a linear pass.
                    growth = (
                        f" {check_ratio:7.1f}x {compile_ratio:8.1f}x {base / previous[2]:6.1f}x"
                    )
                print(
                    f"  {n:>8} {base:8.3f} {checked:8.3f} {compiled:9.3f}"
                    f" {checked / base:7.1f}{growth}"
                )
                previous = (checked, compiled, base)
    print(f"worst growth for 10x the steps: {worst:.1f}x (target <= 12x)")


if __name__ == "__main__":
    main()
