"""Where the shared playbook corpus lives, for tests and benches (never edited by us)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("NOETLC_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if p.suffix in (".yaml", ".yml"))


def corpus_projects() -> list[Path]:
    """The corpus' top-level folders (v1, case-v2, canonical, seeds): separate projects of separate
    NoETL generations. Many playbooks exist in two of them under one catalog path, which is
    R208 in a run over the whole corpus (one catalog cannot hold both), so a project is one run."""
    return sorted(p for p in CORPUS.iterdir() if p.is_dir())
