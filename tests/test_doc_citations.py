"""The tests our docs cite exist: a `tests/...py::name` in a doc or a comment names a test module
of this repository that defines `name`, and a `tests/...py` path in the docs, under a folder
this repository has, is a file (a split or a rename once left docs/semantics.md citing tests
that had moved). Paths of NoETL's own repository (its `tests/worker/...`) live under folders we
do not have and are left alone."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_CITATION = re.compile(r"(?<![\w/])(tests/[\w/]+\.py)(?:::(\w+))?")  # one start per path: linear
_SKIPPED = ("golden/", "dags/", "tests/differential/cases/", "tests/invalid/")


def _citing_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md", "*.py", "*.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if not name.startswith(_SKIPPED)]


def test_every_cited_test_exists() -> None:
    missing = []
    files = _citing_files()
    assert len(files) > 100, "git ls-files found too few files: not a checkout?"
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in _CITATION.finditer(text):
            cited, name = ROOT / match.group(1), match.group(2)
            if not cited.parent.is_dir():
                continue  # a path of NoETL's repository, not ours
            where = f"{path.relative_to(ROOT)}: {match.group(0)}"
            if not cited.is_file():
                missing.append(f"{where} (no such file)")
            elif name and not re.search(rf"def {name}\b", cited.read_text(encoding="utf-8")):
                missing.append(f"{where} (no such test)")
    assert not missing, "\n".join(missing)
