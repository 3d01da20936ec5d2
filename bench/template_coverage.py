"""How much of the corpus's Jinja the lark grammar parses, and how fast templates are scanned.

Walks every playbook of the shared corpus, collects each templated string value and runs
`scan_template` on it. Prints the number of strings and of expressions (`{{ }}` bodies and
`{% %}` statements), how many expressions of Jinja-valid templates the grammar parsed, the ones
it did not, the syntax errors Jinja found, and the mean scan time with a cold cache (per
distinct string, and per playbook).

    python bench/template_coverage.py [corpus-dir]
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from a checkout, without installing

from noetl_compile.analyze.expressions import is_templated, scan_template, template_tags
from tests.corpus import CORPUS


def templated_strings(corpus: Path = CORPUS) -> list[tuple[Path, str]]:
    """(file, string) for every string value (or key) containing `{{` or `{%` in the corpus."""
    found: list[tuple[Path, str]] = []

    def walk(value: Any, path: Path) -> None:
        if isinstance(value, str):
            if is_templated(value):
                # Plain text: a loaded string keeps its scan, the timings below want cold ones.
                found.append((path, str(value)))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(key, path)
                walk(item, path)
        elif isinstance(value, list):
            for item in value:
                walk(item, path)

    for path in sorted(corpus.rglob("*.yaml")):
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        walk(document, path)
    return found


@dataclass
class Coverage:
    strings: int
    expressions: int
    valid_expressions: int  # in templates Jinja accepts
    unparsed: list[tuple[Path, str]]
    syntax_errors: list[tuple[Path, str, str]]  # (file, message, text around the offset)

    @property
    def parsed(self) -> int:
        return self.valid_expressions - len(self.unparsed)

    @property
    def percent(self) -> float:
        return 100.0 * self.parsed / self.valid_expressions if self.valid_expressions else 100.0


def measure(strings: list[tuple[Path, str]]) -> Coverage:
    coverage = Coverage(len(strings), 0, 0, [], [])
    for path, text in strings:
        tags = len(template_tags(text))
        coverage.expressions += tags
        scan = scan_template(text)
        if scan.error is not None:
            offset = scan.error.offset
            excerpt = text[max(0, offset - 30) : offset + 30].replace("\n", "\\n")
            coverage.syntax_errors.append((path, scan.error.message, excerpt))
            continue
        coverage.valid_expressions += tags
        coverage.unparsed.extend((path, source) for source in scan.unparsed)
    return coverage


def microseconds_per_scan(texts: list[str]) -> float:
    """Mean time of a cold-cache `scan_template` call over distinct strings."""
    scan_template.cache_clear()
    start = time.perf_counter()
    for text in texts:
        scan_template(text)
    elapsed = time.perf_counter() - start
    scan_template.cache_clear()
    return 1e6 * elapsed / len(texts)


def microseconds_per_playbook(strings: list[tuple[Path, str]]) -> float:
    """Mean time to scan all templates of one playbook, starting each file with a cold cache."""
    by_file: dict[Path, list[str]] = {}
    for path, text in strings:
        by_file.setdefault(path, []).append(text)
    elapsed = 0.0
    for texts in by_file.values():
        scan_template.cache_clear()
        start = time.perf_counter()
        for text in texts:
            scan_template(text)
        elapsed += time.perf_counter() - start
    scan_template.cache_clear()
    return 1e6 * elapsed / len(by_file)


def main(corpus: Path) -> None:
    strings = templated_strings(corpus)
    unique = list(dict.fromkeys(text for _, text in strings))
    per_scan = min(microseconds_per_scan(unique) for _ in range(3))
    per_playbook = min(microseconds_per_playbook(strings) for _ in range(3))
    coverage = measure(strings)
    print(f"templated strings:          {coverage.strings} ({len(unique)} distinct)")
    print(f"expressions:                {coverage.expressions}")
    print(f"  in Jinja-valid templates: {coverage.valid_expressions}")
    print(f"  parsed by the grammar:    {coverage.parsed} ({coverage.percent:.2f} %)")
    print(
        f"scan_template, cold cache:  {per_scan:.1f} us per distinct string, "
        f"{per_playbook:.0f} us per playbook"
    )
    print(f"\nnot parsed by the grammar ({len(coverage.unparsed)}):")
    for path, source in coverage.unparsed:
        print(f"  {path.relative_to(corpus)}: {source!r}")
    print(f"\nJinja syntax errors ({len(coverage.syntax_errors)}):")
    for path, message, excerpt in coverage.syntax_errors:
        print(f"  {path.relative_to(corpus)}: {message}\n      at: ...{excerpt}...")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else CORPUS)
