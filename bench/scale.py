"""How check and compile time grow with the size of a playbook.

Generates chains (step i -> step i+1, each reading the previous result) of 1k, 10k and 100k
steps and fan-outs (one step routing to N parallel steps that join in one) of 500, 5k and 50k,
checks and compiles each, and prints the time per size and the ratio between consecutive sizes.
The baseline is PyYAML's C loader reading the same text: the least any checker must do, itself
linear, so its own growth (`yaml x`) shows what the machine does to a linear pass at that size
(caches, memory). Target (issue 10): 10x the size costs <= 12x the time, for check and compile.

The machine is shared, so the figures are CPU time of this process (`time.process_time`: time
other programs take from the CPU does not count), each size is measured in a fresh process (no
heap left over from a previous size), and the rounds are interleaved (every size once per round,
the best of the rounds kept), so a busy minute disturbs one round of every size alike.

Memory: the peak resident set (`ru_maxrss`) of the measuring process after check and after
compile, and what check and compile add to it per step (peak minus the process's peak before it
read the playbook, over the steps). The YAML baseline runs in a forked child, so its own
document never counts in these peaks.

    python bench/scale.py              # all sizes, 3 rounds (the 100k chain takes a while)
    python bench/scale.py --quick      # 1k/10k chains, 500/5k fan-outs
    python bench/scale.py --rounds 5
"""

from __future__ import annotations

import gc
import json
import os
import resource
import subprocess
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


SHAPES = {"chain": chain, "fan-out": fan_out}
TARGET = 12.0


def timed(func) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one call; garbage of earlier calls is collected first
    (the collector is off during the call, as in the CLI)."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    func()
    return time.process_time() - cpu, time.perf_counter() - wall


def measure(shape: str, n: int, folder: Path) -> dict[str, float]:
    """One round for one size, in this (fresh) process: baseline, check and compile seconds."""
    build = SHAPES[shape]
    warm = folder / "warm.yaml"  # imports, regexes and Jinja set up before the clock starts
    warm.write_text(build(50), encoding="utf-8")
    compile_result(_checked(str(warm)), "warm.yaml")
    text = build(n)
    path = folder / f"{shape}{n}.yaml"
    path.write_text(text, encoding="utf-8")
    base = _in_child(
        lambda: min(timed(lambda: yaml.load(text, Loader=yaml.CSafeLoader))[0] for _ in range(2))
    )
    before = _peak_kib()
    holder = {}
    checked = timed(lambda: holder.setdefault("result", _checked(str(path))))
    after_check = _peak_kib()
    result = holder["result"]
    errors = [d for d in result.diagnostics if d.severity.label == "error"]
    if errors:
        raise SystemExit(f"{shape} {n}: the generated playbook has errors: {errors[:3]}")
    compiled = timed(lambda: compile_result(result, path.name))
    after_compile = _peak_kib()
    return {
        "yaml": base,
        "check": checked[0],
        "compile": compiled[0],
        "check_wall": checked[1],
        "compile_wall": compiled[1],
        "peak_mib": after_compile / 1024,
        "check_kib_per_step": (after_check - before) / n,
        "compile_kib_per_step": (after_compile - before) / n,
    }


def _peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def _in_child(func) -> float:
    """func() in a forked child (its memory never counts in this process's peak)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.write(write, repr(func()).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        value = float(pipe.read())
    os.waitpid(pid, 0)
    return value


def _checked(path: str):
    result = read_file(path)
    check_results([result])
    return result


def one_round(shape: str, n: int) -> dict[str, float]:
    """Measure one size in a child process (each size starts from the same clean heap)."""
    child = subprocess.run(
        [sys.executable, __file__, "--one", shape, str(n)],
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        raise SystemExit(f"{shape} {n}: {child.stderr.strip() or child.stdout.strip()}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        gc.disable()  # as the CLI does
        with tempfile.TemporaryDirectory() as folder:
            print(json.dumps(measure(sys.argv[2], int(sys.argv[3]), Path(folder))))
        return
    quick = "--quick" in sys.argv
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    series = {
        "chain": [1_000, 10_000] if quick else [1_000, 10_000, 100_000],
        "fan-out": [500, 5_000] if quick else [500, 5_000, 50_000],
    }
    best: dict[tuple[str, int], dict[str, float]] = {}
    for _ in range(rounds):  # interleaved: each round measures every size once
        for shape, sizes in series.items():
            for n in sizes:
                figures = one_round(shape, n)
                kept = best.setdefault((shape, n), figures)
                for key, value in figures.items():
                    kept[key] = min(kept[key], value)
    worst = worst_relative = 0.0
    print(f"CPU seconds, best of {rounds} interleaved rounds, one fresh process per measurement")
    for shape, sizes in series.items():
        print(f"{shape}:")
        print(
            f"  {'steps':>8} {'yaml s':>8} {'check s':>8} {'compile s':>9} {'x yaml':>7}"
            f" {'yaml x':>7} {'check x':>8} {'compile x':>9} {'rel check':>9} {'rel compile':>11}"
        )
        previous = None
        for n in sizes:
            now = best[(shape, n)]
            growth = ""
            if previous is not None:
                yaml_ratio = now["yaml"] / previous["yaml"]
                check_ratio = now["check"] / previous["check"]
                compile_ratio = now["compile"] / previous["compile"]
                worst = max(worst, check_ratio, compile_ratio)
                # Growth beyond the baseline's own growth is what the checker itself adds.
                relative = (check_ratio / yaml_ratio, compile_ratio / yaml_ratio)
                worst_relative = max(worst_relative, *relative)
                growth = (
                    f" {yaml_ratio:6.1f}x {check_ratio:7.1f}x {compile_ratio:8.1f}x"
                    f" {relative[0]:8.2f}x {relative[1]:10.2f}x"
                )
            print(
                f"  {n:>8} {now['yaml']:8.3f} {now['check']:8.3f} {now['compile']:9.3f}"
                f" {now['check'] / now['yaml']:7.1f}{growth}"
            )
            previous = now
        print(f"  {'steps':>8} {'peak MiB':>9} {'check KiB/step':>15} {'compile KiB/step':>17}")
        for n in sizes:
            now = best[(shape, n)]
            print(
                f"  {n:>8} {now['peak_mib']:9.0f} {now['check_kib_per_step']:15.1f}"
                f" {now['compile_kib_per_step']:17.1f}"
            )
    print(
        f"worst growth for 10x the steps: {worst:.1f}x (target <= {TARGET:.0f}x); "
        f"worst growth relative to the YAML baseline's: {worst_relative:.2f}x"
    )


if __name__ == "__main__":
    main()
