"""Every recorded case of NoETL's own engine, run through noetlc (compile, then ``dag.test()``).

A case listed in ``divergences.yaml`` must still differ in exactly the listed fields (an
unexpected match fails too, so the list cannot go stale); every other case must match in every
compared field (see ``runner.py`` for the fields and the only normalisation). The match rate is
printed and checked by :func:`test_match_rate_is_reported`.

Set ``NOETLC_DIFF_RECORD=FILE`` to append each case's observed differences to FILE as YAML
(used to rebuild ``divergences.yaml`` after a runtime change; the test still asserts).
"""

from __future__ import annotations

import os

import pytest
import yaml

from tests.differential.runner import (
    differences,
    load_cases,
    load_divergences,
    needs,
    pinned_values,
    run_case,
)

pytestmark = pytest.mark.slow

CASES = load_cases()
DIVERGENCES = load_divergences()


def test_cases_are_well_formed():
    assert len(CASES) >= 100
    for case_id, case in CASES.items():
        assert {"name", "area", "dialect", "engine", "source", "playbook", "expect"} <= set(case), (
            case_id
        )
        assert case["source"].get("repository") == "noetl/noetl" and case["source"].get("commit"), (
            case_id
        )
        assert case["expect"]["status"] in ("completed", "failed", "running", "rejected"), case_id
    stale = sorted(set(DIVERGENCES) - set(CASES))
    assert not stale, f"divergences.yaml names cases that do not exist: {stale}"
    for case_id, entry in DIVERGENCES.items():
        assert entry.get("fields") and entry.get("reason"), case_id
        # A declared difference is pinned by value: NoETL's and noetlc's, per field.
        assert sorted(entry.get("values") or {}) == sorted(entry["fields"]), case_id


def test_every_dialect_with_a_recorded_engine_is_covered():
    dialects = {case["dialect"] for case in CASES.values()}
    assert {"canonical", "case-v2", "v1"} <= dialects, dialects


def test_semantics_doc_counts_every_divergence_group():
    """docs/semantics.md section 2 names each group of divergences.yaml with its case count."""
    from collections import Counter
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "semantics.md").read_text(encoding="utf-8")
    for group, count in Counter(e["group"] for e in DIVERGENCES.values()).items():
        assert f"| `{group}`" in doc and f"| {count} |" in doc.split(f"| `{group}`", 1)[1][:40], (
            f"docs/semantics.md does not list group {group} with {count} cases"
        )


def test_match_rate_is_reported():
    matched = len(CASES) - len(DIVERGENCES)
    rate = matched / len(CASES)
    print(f"\ndifferential: {matched}/{len(CASES)} cases match NoETL's engine ({rate:.1%})")
    assert matched > 0


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_case(case_id, airflow_db, run_dag, tmp_path, request):
    case = CASES[case_id]
    # Tool cases reach the test Postgres and the local API; the others start neither.
    services = needs(case)
    http_base = request.getfixturevalue("http_server") if "http" in services else None
    pg_dsn = None
    if "postgres" in services:
        request.getfixturevalue("pg_connections")
        pg_dsn = request.getfixturevalue("pg_test_dsn")
    actual = run_case(
        case,
        run_dag=run_dag,
        dags_folder=airflow_db,
        workdir=tmp_path,
        http_base=http_base,
        pg_dsn=pg_dsn,
    )
    found = differences(case["expect"], actual)
    values = pinned_values(case["expect"], actual, found)
    record = os.environ.get("NOETLC_DIFF_RECORD")
    if record:
        with open(record, "a", encoding="utf-8") as f:
            yaml.safe_dump({case_id: {"differences": found, "values": values}}, f, width=200)
    listed = DIVERGENCES.get(case_id)
    if listed is None:
        assert not found, f"{case_id} differs from NoETL's engine:\n" + "\n".join(
            f"  {k}: {v}" for k, v in found.items()
        )
    else:
        assert sorted(found) == sorted(listed["fields"]), (
            f"{case_id}: listed as differing in {sorted(listed['fields'])} "
            f"({listed['reason']}), now differs in {sorted(found)}: {found}"
        )
        # Inside a declared difference noetlc's value is pinned too: a change there is a
        # regression (or a fix) that must be looked at, not a difference that merely persists.
        moved = {
            field: {"pinned": listed["values"][field], "now": values[field]}
            for field in found
            if values[field] != listed["values"][field]
        }
        assert not moved, f"{case_id}: a declared difference changed value: {moved}"


# Playbooks recorded on the case-v2 engine (dc55c492) that carry no mark of that generation:
# noetlc reads them as canonical (docs/semantics.md section 1: the same shapes are recorded on
# the canonical engine with canonical outcomes, e.g. final_status/join_reached_twice). Forced
# with `--dialect case-v2` they end as dc55c492 ended them; the fields left are the case-v2 loop
# step's recorded result (group case-v2-loop-exit-event, by design).
UNMARKED_CASE_V2 = {
    "case_v2/two_branches": [],
    "case_v2/case_error_no_route": [],
    "case_v2/first_step_not_start": [],  # S105: the case-v2 engine requires a step `start`
    "case_v2/loop_string_in": ["results.start"],
}


@pytest.mark.parametrize("case_id", sorted(UNMARKED_CASE_V2))
def test_unmarked_case_v2_playbooks_run_as_noetl_ran_them_under_their_dialect(
    case_id, airflow_db, run_dag, tmp_path
):
    from noetl_compile.read import detect_dialect

    case = CASES[case_id]
    assert case["dialect"] == "case-v2" and detect_dialect(case["playbook"]) == "canonical"
    assert DIVERGENCES[case_id]["group"] == "unmarked-case-v2"
    actual = run_case(
        case, run_dag=run_dag, dags_folder=airflow_db, workdir=tmp_path, dialect="case-v2"
    )
    found = differences(case["expect"], actual)
    assert sorted(found) == UNMARKED_CASE_V2[case_id], found
