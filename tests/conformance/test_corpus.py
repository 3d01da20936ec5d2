"""Conformance: every corpus playbook checks without an exception, and gives exactly the
errors listed for it in expectations.yaml (none for most), each with a reason.

Each top-level corpus folder is checked as its own run (one project, one catalog); a run over the
whole corpus must add exactly R208 (two playbooks claiming one catalog path) and R209 (a call to
such a path), nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from noetl_compile.check import check_paths
from noetl_compile.diagnostics import Severity
from tests.corpus import CORPUS, corpus_files, corpus_projects

EXPECTATIONS = Path(__file__).with_name("expectations.yaml")

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module")
def corpus_results():
    found = {}
    for project in corpus_projects():
        results, problems = check_paths([str(project)])
        assert not problems
        found.update({Path(r.path).relative_to(CORPUS).as_posix(): r for r in results})
    return found


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


def test_a_whole_corpus_run_adds_only_the_catalog_conflicts(corpus_results):
    results, _ = check_paths([str(CORPUS)])
    keys: dict[str, set[str]] = {}
    for result in results:
        if result.playbook is not None and result.playbook.catalog_key:
            keys.setdefault(result.playbook.catalog_key.strip("/"), set()).add(result.path)
    shared = {k for k, files in keys.items() if len(files) > 1}
    added = {}
    for result in results:
        relative = Path(result.path).relative_to(CORPUS).as_posix()
        alone = {(d.code, d.position, d.message) for d in corpus_results[relative].diagnostics}
        added[relative] = sorted(
            (d.code, d.message)
            for d in result.diagnostics
            if (d.code, d.position, d.message) not in alone
        )
    twins = {Path(path).relative_to(CORPUS).as_posix() for k in shared for path in keys[k]}
    assert len(twins) > 150  # v1/case-v2/canonical carry many of the same fixtures
    for relative, extra in added.items():
        codes = {code for code, _ in extra}
        assert codes <= {"R208", "R209"}, (relative, extra)
        assert ("R208" in codes) == (relative in twins), relative
        for code, message in extra:
            if code == "R208":
                # the message names the other file(s)
                assert str(CORPUS) in message, message
