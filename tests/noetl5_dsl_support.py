"""What the NoETL 5 DSL tests share (test_noetl5_dsl.py, test_noetl5_dsl_runs.py): the folders of
our NoETL 5 playbooks and of the server's forms, the schema's property paths, and a check's codes
and errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "tests" / "noetl5_dsl"
PLAYBOOKS = FOLDER / "playbooks"
SERVER_FORMS = FOLDER / "server_forms"
SCHEMA = json.loads((FOLDER / "schema_paths.json").read_text(encoding="utf-8"))


def code_counts(result) -> Counter:
    return Counter(d.code for d in result.diagnostics)


def error_lines(result) -> list[str]:
    return [
        f"{d.position.line}:{d.code} {d.message}" for d in result.diagnostics if d.severity >= 3
    ]
