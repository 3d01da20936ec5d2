"""The README's examples block: the ```sh block that starts with `noetlc demo up`, one command per
line (every bundled playbook as a new user runs it, then `noetlc demo down`).

Each playbook's header promises results (``# Result: STEP {json}``): :func:`broken_promises` holds
what `noetlc run` printed under ``results:`` against them.

One reader for both places that run it: tests/runtime/test_readme_examples.py (with the project's
Python) and scripts/smoke_airflow.py (with each Airflow version's). Standard library only: the
smoke imports it before it knows what else its virtualenv holds.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"


class ReadmeError(ValueError):
    """The README's examples block is missing, doubled, or holds a line that is not a command."""


def examples_block(readme: Path = README) -> list[str]:
    """The non-blank lines of the one ```sh block whose first command is `noetlc demo up`."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in readme.read_text(encoding="utf-8").splitlines():
        if current is None and line.strip() == "```sh":
            current = []
        elif current is not None and line.strip() == "```":
            blocks.append(current)
            current = None
        elif current is not None:
            current.append(line)
    found = [b for b in blocks if b and b[0].split("#")[0].strip() == "noetlc demo up"]
    if len(found) != 1:
        raise ReadmeError(
            f"{readme}: {len(found)} ```sh blocks start with `noetlc demo up`; the examples "
            "need exactly one"
        )
    return [line for line in found[0] if line.strip()]


def command(line: str) -> tuple[dict[str, str], list[str]]:
    """(environment assignments, noetlc's arguments) of one line: ``A=1 noetlc run x.yaml # c``
    gives ``({"A": "1"}, ["run", "x.yaml"])``."""
    words = shlex.split(line, comments=True)
    env: dict[str, str] = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or words[0] != "noetlc":
        raise ReadmeError(f"README examples block: not a noetlc command: {line!r}")
    return env, words[1:]


def promised_results(playbook: Path) -> list[tuple[str, Any]]:
    """The ``# Result: STEP JSON`` lines of a playbook's header comment."""
    promised = []
    for line in playbook.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# Result: "):
            step, _, value = line.removeprefix("# Result: ").partition(" ")
            try:
                promised.append((step, json.loads(value)))
            except json.JSONDecodeError as exc:
                raise ReadmeError(
                    f"{playbook.name}: its `# Result: {step}` is no JSON ({exc})"
                ) from exc
    return promised


def printed_results(stdout: str) -> dict[str, str]:
    """``results:`` of `noetlc run`'s text report: step -> the JSON text printed for it (empty
    when the report has no results section)."""
    lines = stdout.splitlines()
    if "results:" not in lines:
        return {}
    results = {}
    for line in lines[lines.index("results:") + 1 :]:
        if not line.startswith("  "):
            break
        step, _, value = line.strip().partition(" ")
        results[step] = value.strip()
    return results


def broken_promises(playbook: Path, stdout: str) -> list[str]:
    """What a run's report got wrong against its playbook's header: each promised step's result
    must hold every key given there with that value, in nested objects too (or equal it, for a
    result that is not an object). A playbook that promises nothing is itself a broken promise."""
    promised = promised_results(playbook)
    if not promised:
        return [f"{playbook.name} promises no result in its header"]
    printed = printed_results(stdout)
    broken = []
    for step, want in promised:
        if step not in printed:
            broken.append(f"{step}: not in the report's results")
            continue
        got = _promised_part(json.loads(printed[step]), want)
        if got != want:
            broken.append(f"{step} = {got}, the header promises {want}")
    return broken


def _promised_part(got: Any, want: Any) -> Any:
    """The part of ``got`` a promise ``want`` speaks of: for an object, only the keys it names
    (nested objects alike), a missing one as ``<missing>``; anything else as it is."""
    if isinstance(want, dict) and isinstance(got, dict):
        return {
            key: _promised_part(got.get(key, "<missing>"), value) for key, value in want.items()
        }
    return got
