"""Table (b)'s rows and their cases (template_name_rows.yaml) stay in step with the scan and the
recorded cases: every scanned name has cases or a reason, every case a row names exists, and
every generated case still holds the playbook its probe builds (so a changed probe is
re-recorded, never left beside a stale recording)."""

from __future__ import annotations

import yaml

from tests.differential.template_name_cases import (
    CASES,
    build_case,
    load_spec,
    probe_cases,
    row_key,
    statuses,
)
from tests.differential.template_names import stored

SPEC = load_spec()
ROWS = stored()["rows"]
KEYS = {row_key(r) for r in ROWS}


def test_every_scanned_row_has_cases_or_a_reason():
    status = statuses(ROWS)
    missing = sorted(k for k, v in status.items() if v == "no case listed")
    assert not missing, f"rows with no case and no reason: {missing}"
    assert len(status) == len(ROWS) == len(KEYS)


def test_every_row_the_spec_names_is_scanned():
    named = set(SPEC["rows"]) | {k for p in SPEC["probes"].values() for k in p["rows"]}
    assert named <= KEYS, sorted(named - KEYS)


def test_every_named_case_is_recorded():
    named = {c for e in SPEC["rows"].values() for c in e.get("cases", [])}
    named |= set(probe_cases(SPEC))
    missing = sorted(c for c in named if not (CASES / "template_names" / f"{c}.yaml").exists())
    assert not missing, f"cases to record (template_name_cases --out, then record.py): {missing}"


def test_each_generated_case_holds_its_probes_playbook():
    for case_name, (_, probe, kind) in probe_cases(SPEC).items():
        recorded = yaml.safe_load(
            (CASES / "template_names" / f"{case_name}.yaml").read_text(encoding="utf-8")
        )
        built = build_case(case_name, probe, kind)
        assert recorded["playbook"] == built["playbook"], case_name
        assert recorded["dialect"] == built["dialect"], case_name
        assert recorded["source"]["commit"] == built["source"]["commit"], case_name
        assert "expect" in recorded, case_name


def test_the_status_names_a_divergent_cases_row_and_code():
    """A case listed in divergences.yaml shows in its rows' status as `differs`, with the
    section-1 row that cites it and that row's code."""
    from tests.differential.runner import load_divergences
    from tests.differential.template_name_cases import _section_one, row_status

    divergences = load_divergences()
    text = row_status(
        {"cases": ["step_result_by_name_list"]}, divergences, _section_one(), SPEC["groups"]
    )
    assert text.startswith("case step_result_by_name_list; step_result_by_name_list differs: row ")
    assert "`{{ step }}` rendered as" in text and "D9" in text
    for group, start in SPEC["groups"].items():
        assert any(r[0].startswith(start) for r in _section_one()), (group, start)
    assert row_status({"none": "x"}, divergences, []) == "no case: x"
