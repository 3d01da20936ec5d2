"""Where the playbook corpus lives, for tests and benches (never edited by us).

The corpus is NoETL's public playbooks at pinned commits plus the project's seed playbooks
(``tests/data/corpus-pins.json`` names every file and its sha256). Found, in this order:

1. ``NOETLC_CORPUS``, where set;
2. ``../shared/corpus`` beside the checkout, where it exists (this project's workspace);
3. the cache that ``scripts/fetch-corpus.py`` fills (``~/.cache/noetlc-tests/corpus``), used
   only when it is exactly the pinned corpus. ``tests/conftest.py`` fetches it once per test
   run when it is missing (unless ``NOETLC_CORPUS_FETCH=0``).

A test that reads the corpus carries the ``corpus`` mark. Where there is no corpus, conftest
skips those tests with :data:`SKIP_REASON` and the run's summary counts them as not run.
"""

from __future__ import annotations

import importlib.util
import json
import os
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "tests" / "data" / "corpus-pins.json"
FETCH_SCRIPT = ROOT / "scripts" / "fetch-corpus.py"
FETCH_COMMAND = "python3 scripts/fetch-corpus.py"


@cache
def fetch_module() -> ModuleType:
    """``scripts/fetch-corpus.py`` as a module (its file name is not an importable name)."""
    spec = importlib.util.spec_from_file_location("noetlc_fetch_corpus", FETCH_SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _locate() -> tuple[Path, str]:
    if os.environ.get("NOETLC_CORPUS"):
        return Path(os.environ["NOETLC_CORPUS"]), "NOETLC_CORPUS"
    shared = ROOT.parent / "shared" / "corpus"
    if shared.is_dir():
        return shared, "../shared/corpus"
    return fetch_module().default_dest(), f"the cache of {FETCH_COMMAND}"


CORPUS, SOURCE = _locate()
FROM_CACHE = SOURCE.startswith("the cache")
SKIP_REASON = (
    f"not run: needs NoETL's public playbooks, which are not at {CORPUS}; "
    f"get them with `{FETCH_COMMAND}` (network) or point NOETLC_CORPUS at a copy"
)


def pins() -> dict:
    return json.loads(PINS.read_text(encoding="utf-8"))


_available: bool = False


def available() -> bool:
    """Whether the corpus is there. A folder named by NOETLC_CORPUS or ../shared is taken as it
    is (tests/test_corpus_fetch.py compares it with the pins); the cache must match the pins."""
    global _available
    if not _available:
        if FROM_CACHE:
            _available = not fetch_module().problems(CORPUS, pins())
        else:
            _available = CORPUS.is_dir()
    return _available


def _pinned_paths() -> list[Path]:
    # Without the corpus, the names it would have: tests parametrized over it are collected
    # one by one (and each counted as not run) rather than vanishing into an empty parameter set.
    return sorted(CORPUS / name for name in fetch_module().pinned_names(pins()))


def corpus_files() -> list[Path]:
    paths = sorted(CORPUS.rglob("*")) if available() else _pinned_paths()
    return [p for p in paths if p.suffix in (".yaml", ".yml")]


def seed(name: str) -> Path:
    """One of the project's own seed playbooks (the corpus' ``seeds/``), always in the repository:
    each golden case ``golden/seeds_<name>`` holds a byte copy (tests/test_golden.py checks)."""
    return ROOT / "golden" / f"seeds_{name}" / "playbook.yaml"


def corpus_projects() -> list[Path]:
    """The corpus' top-level folders (v1, case-v2, canonical, seeds): separate projects of separate
    NoETL generations. Many playbooks exist in two of them under one catalog path, which is
    R208 in a run over the whole corpus (one catalog cannot hold both), so a project is one run."""
    if available():
        return sorted(p for p in CORPUS.iterdir() if p.is_dir())
    return sorted({CORPUS / p.relative_to(CORPUS).parts[0] for p in corpus_files()})
