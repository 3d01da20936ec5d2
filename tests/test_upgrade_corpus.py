"""`noetlc upgrade` over the corpus: every upgraded playbook checks clean with the same findings
and the same step payloads (the runtime's whole input) apart from routing, whose targets must
stay the same; the ceiling of what cannot be upgraded; comments survive."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from noetl_compile.check import check_text
from noetl_compile.upgrade import upgrade_text
from noetl_compile.upgrade.edits import COMMENT_PREFIX
from tests.corpus import CORPUS
from tests.upgrade_payloads import findings, step_payloads
from tests.upgrade_support import blockers, corpus_upgrades, relative


@pytest.fixture(scope="module")
def upgraded() -> dict[Path, object]:
    upgrades = corpus_upgrades()
    assert len(upgrades) >= 75, f"the corpus is missing ({CORPUS})"
    return upgrades


@pytest.mark.corpus
def test_corpus_upgrades(upgraded) -> None:
    counts = Counter()
    for path, upgrade in upgraded.items():
        counts[upgrade.dialect, "read"] += 1
        # Never an internal failure: what is not upgraded says why, at a position (U801), or is
        # refused because the rewrite would check differently (U803: the safety net, e.g. a v1
        # secrets task whose upgraded tool keys the per-kind field catalogue does not know).
        # A written upgrade may carry U804 warnings: exact within a bound it states.
        assert all(d.code in ("U801", "U803", "U804") for d in upgrade.diagnostics), (
            upgrade.diagnostics
        )
        if upgrade.writable:
            counts[upgrade.dialect, "upgraded"] += 1
            before = check_text(upgrade.original, str(path))
            after = check_text(upgrade.text, str(path))
            assert after.playbook.dialect == "canonical"
            assert Counter(findings(after.diagnostics)) <= Counter(findings(before.diagnostics)), (
                path,
                after.diagnostics,
            )
            counts[upgrade.dialect, "checked clean"] += 1
            assert step_payloads(upgrade.text, str(path)) == step_payloads(
                upgrade.original, str(path)
            )
            counts[upgrade.dialect, "payloads equal"] += 1
        else:
            assert upgrade.diagnostics, path
            left = [d for d in upgrade.diagnostics if d.code == "U801"]
            counts[upgrade.dialect, "left with U801" if left else "refused, U803"] += 1
            lines = upgrade.text.splitlines()
            assert sum(COMMENT_PREFIX in line for line in lines) >= len(
                {d.position.line for d in left}
            )
    print(f"\ncorpus upgrade: {dict(sorted(counts.items()))}")
    assert counts["case-v2", "upgraded"] >= 11 and counts["v1", "upgraded"] >= 10


@pytest.mark.corpus
def test_the_ceiling(upgraded) -> None:
    """Which playbooks any exact upgrade could reach: those with no construct whose meaning the
    canonical generation lacks (retry, sink, ...: tests/upgrade_support.py BLOCKERS, evidence in
    docs/editor.md). Every playbook not written names its blockers, each in a known class."""
    written = [path for path, upgrade in upgraded.items() if upgrade.writable]
    hard: Counter = Counter()
    open_ = []
    for path, upgrade in upgraded.items():
        if upgrade.writable:
            continue
        classes = blockers(upgrade)
        assert classes, (path, upgrade.diagnostics)
        without = sorted(name for name, exists in classes.items() if not exists)
        hard.update(without)
        if not without:
            open_.append(relative(path))
    ceiling = len(written) + len(open_)
    print(
        f"\nupgrade ceiling: {len(written)} of {len(upgraded)} written, ceiling {ceiling}; "
        f"no equivalent (files): {dict(hard.most_common())}; open: {open_}"
    )
    assert len(written) >= 21
    # Every file the canonical generation can express is upgraded: the ceiling is reached.
    assert open_ == []
    # retry and sink, the two largest classes, stay unreachable by any exact rewrite.
    assert hard["retry"] >= 15 and hard["sink"] >= 8


@pytest.mark.corpus
def test_a_comment_on_each_step_survives(upgraded) -> None:
    survived = 0
    for path, upgrade in upgraded.items():
        if not upgrade.writable:
            continue
        lines = upgrade.original.splitlines(keepends=True)
        marked = []
        for line in lines:
            stripped = line.lstrip()
            if stripped.startswith("- step:"):
                indent = line[: len(line) - len(stripped)]
                name = stripped.split(":", 1)[1].split("#")[0].strip()
                marked.append(f"{indent}# before {name}\n")
                line = line.rstrip("\n") + f"  # on {name}\n"
            marked.append(line)
        text = "".join(marked)
        again = upgrade_text(text, str(path))
        assert again.writable, again.diagnostics
        for comment in (m.strip() for m in marked if "# before " in m or "  # on " in m):
            fragment = comment if comment.startswith("#") else comment.split("  ", 1)[1]
            assert fragment in again.text, (path, fragment)
        survived += 1
    assert survived >= 9
