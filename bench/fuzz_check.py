"""Robustness at scale: >= 100,000 mutated corpus playbooks through `check`, counting
exceptions and position-less diagnostics (both must be zero). Prints cases per second
against a baseline of generating the same cases without checking them."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings

from noetl_compile.check import check_text
from tests.fuzz_mutations import mutated_playbook

CASES = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
stats = {"cases": 0, "exceptions": 0, "unpositioned": 0, "diagnostics": 0}


def run(check: bool) -> float:
    @settings(
        max_examples=CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(mutated_playbook())
    def case(text: str) -> None:
        if not check:
            return
        stats["cases"] += 1
        try:
            result = check_text(text, "fuzz.yaml")
        except Exception as exc:  # noqa: BLE001 — counting is the point
            stats["exceptions"] += 1
            print(f"EXCEPTION {type(exc).__name__}: {exc}", file=sys.stderr)
            return
        stats["diagnostics"] += len(result.diagnostics)
        internal = [d for d in result.diagnostics if d.code == "E002"]
        if internal:
            stats["exceptions"] += 1
            print(f"INTERNAL {internal[0].message}", file=sys.stderr)
        stats["unpositioned"] += sum(
            1 for d in result.diagnostics if d.position.line < 1 or d.position.col < 1
        )

    start = time.perf_counter()
    case()
    return time.perf_counter() - start


if __name__ == "__main__":
    generate_only = run(check=False)
    total = run(check=True)
    print(
        f"{stats['cases']} cases in {total:.1f} s ({stats['cases'] / total:.0f}/s); "
        f"generation alone {generate_only:.1f} s; checking cost {(total - generate_only) / max(1, stats['cases']) * 1000:.2f} ms/case"
    )
    print(
        f"diagnostics: {stats['diagnostics']}, exceptions: {stats['exceptions']}, without position: {stats['unpositioned']}"
    )
    raise SystemExit(1 if stats["exceptions"] or stats["unpositioned"] else 0)
