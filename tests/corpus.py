"""Where the shared playbook corpus lives, for tests and benches (never edited by us)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("NOETLC_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if p.suffix in (".yaml", ".yml"))
