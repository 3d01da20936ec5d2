"""Checking small inline playbooks in the rule-family tests (test_check_tools.py,
test_check_gates.py, test_check_quantum_cursor.py): a canonical header, the findings of one
family with their positions, the severities of one code."""

from __future__ import annotations

import textwrap

from noetl_compile.check import check_paths
from noetl_compile.diagnostics import Severity

CANONICAL = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: t}
workload: {pg_auth: pg_local}
workflow:
"""


def canonical(steps: str) -> str:
    """The header plus dedented steps (case-v2 or canonical: the steps decide the dialect)."""
    return CANONICAL + textwrap.dedent(steps)


def findings(
    tmp_path, text: str, prefix: str = "C", dialect: str | None = None
) -> list[tuple[str, int, int, str]]:
    path = tmp_path / "playbook.yaml"
    path.write_text(textwrap.dedent(text))
    results, problems = check_paths([str(path)], dialect=dialect)
    assert not problems
    return [
        (d.code, d.position.line, d.position.col, d.message)
        for d in results[0].diagnostics
        # C515 (a kind the runtime cannot execute) has tests of its own; keep these about config.
        if d.code.startswith(prefix) and (d.code != "C515" or prefix == "C515")
    ]


def severities(tmp_path, text: str, code: str) -> list[Severity]:
    path = tmp_path / "playbook.yaml"
    path.write_text(textwrap.dedent(text))
    results, _ = check_paths([str(path)])
    return [d.severity for d in results[0].diagnostics if d.code == code]
