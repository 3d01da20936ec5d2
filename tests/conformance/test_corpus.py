"""Conformance: every corpus playbook checks without an exception, and gives exactly the
errors listed for it in expectations.yaml (none for most), each with a reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from noetl_compile.check import check_paths
from noetl_compile.diagnostics import Severity
from tests.corpus import CORPUS, corpus_files

EXPECTATIONS = Path(__file__).with_name("expectations.yaml")


@pytest.fixture(scope="module")
def corpus_results():
    if not CORPUS.is_dir():
        pytest.fail(f"the shared corpus is missing at {CORPUS}")
    results, problems = check_paths([str(CORPUS)])
    assert not problems
    return {Path(r.path).relative_to(CORPUS).as_posix(): r for r in results}


def load_expectations() -> dict[str, dict[str, str]]:
    data = yaml.safe_load(EXPECTATIONS.read_text()) or {}
    return {path: dict(codes) for path, codes in data.items()}


def test_every_corpus_file_was_checked(corpus_results):
    assert len(corpus_results) == len(corpus_files()) > 250


def test_errors_match_expectations(corpus_results):
    expectations = load_expectations()
    mismatches = []
    for path, result in sorted(corpus_results.items()):
        found = sorted({d.code for d in result.diagnostics if d.severity is Severity.ERROR})
        expected = sorted(expectations.get(path, {}))
        if found != expected:
            detail = [
                f"{d.position.line}:{d.position.col} {d.code} {d.message}"
                for d in result.diagnostics
                if d.severity is Severity.ERROR
            ]
            mismatches.append(
                f"{path}: expected {expected}, found {found}\n    " + "\n    ".join(detail)
            )
    assert not mismatches, "\n".join(mismatches)


def test_expectations_name_real_files_and_give_reasons(corpus_results):
    for path, codes in load_expectations().items():
        assert path in corpus_results, f"expectations.yaml names a file not in the corpus: {path}"
        for code, reason in codes.items():
            assert isinstance(reason, str) and len(reason.split()) >= 4, (
                f"{path} {code}: give a reason"
            )


def test_every_diagnostic_has_a_position(corpus_results):
    for result in corpus_results.values():
        for d in result.diagnostics:
            assert d.position.line >= 1 and d.position.col >= 1, d
