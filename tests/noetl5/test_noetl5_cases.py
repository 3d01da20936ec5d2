"""NoETL 5's source, case by case, against noetlc (``cases_runner.py`` says what a case holds).

Every case names the line of NoETL 5's source (noetl/tools, noetl/server at the profile's
commits) its expectation comes from. A case either matches, or names the row of
docs/semantics.md that says why noetlc differs (``differs``) and still differs in exactly those
fields, so neither side can drift unnoticed.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from noetl_compile.engine_noetl5 import NOETL5
from tests.noetl5.cases_runner import differences, load_cases, needs, refusal, run_case

ROOT = Path(__file__).parents[2]
CASES = load_cases()
SEMANTICS = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
REPOSITORIES = {"noetl/tools", "noetl/server", "noetl/worker"}


def test_enough_cases_of_every_kind_each_citing_its_source_line():
    assert len(CASES) >= 60, len(CASES)
    areas = Counter(case["area"] for case in CASES.values())
    assert {
        "tool_args",
        "defaults",
        "result_shapes",
        "guards",
        "step_args",
        "label_form",
        "nested",
        "workload",
    } <= set(areas), areas
    for case_id, case in CASES.items():
        area, name = case_id.split("/")
        assert case["name"] == name and case["area"] == area, case_id
        source = case["source"]
        assert source["repository"] in REPOSITORIES, case_id
        # The commit of the profile's own citations: one NoETL 5 read, not a mix of versions.
        assert NOETL5.commits[source["repository"]].startswith(source["commit"]), case_id
        assert "src/" in source["file"] and int(source["line"]) > 0, case_id
        assert case.get("says"), case_id
        assert case["expect"]["status"] in ("completed", "failed"), case_id


def test_every_difference_is_a_row_of_docs_semantics():
    for case_id, case in CASES.items():
        differs = case.get("differs")
        if differs:
            assert differs.get("fields") and differs.get("reason"), case_id
            assert differs["row"] in SEMANTICS, f"{case_id}: no row {differs['row']!r}"


def test_match_rate_is_reported():
    matched = sum(1 for case in CASES.values() if not case.get("differs"))
    print(f"\nNoETL 5 cases: {matched}/{len(CASES)} match NoETL 5's source")
    assert matched >= len(CASES) * 3 // 4


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_case(case_id, airflow_db, run_dag, tmp_path, request):
    case = CASES[case_id]
    if case.get("refused"):
        # noetlc stops the playbook at compile with this code: where NoETL 5 refuses it too
        # (its parser), the case matches; where NoETL 5 runs it, the case differs in `compile`.
        report = refusal(case, tmp_path)
        assert case["refused"] in report, report
        differs = case.get("differs")
        assert differs is None or differs["fields"] == ["compile"], case_id
        return
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
    if case.get("detected"):
        assert "S119" in actual["report"], f"{case_id} was not read as NoETL 5:\n{actual['report']}"
    found = differences(case["expect"], actual)
    differs = case.get("differs")
    if differs is None:
        assert not found, f"{case_id} differs from NoETL 5's source:\n" + "\n".join(
            f"  {k}: {v}" for k, v in found.items()
        )
    else:
        assert sorted(found) == sorted(differs["fields"]), (
            f"{case_id}: listed as differing in {sorted(differs['fields'])} "
            f"({differs['reason']}), now differs in {sorted(found)}: {found}"
        )


def test_a_given_parent_execution_id_is_the_childs_recorded_parent(airflow_db, run_dag, tmp_path):
    """playbook.rs:343: the child is started under the call's `parent_execution_id`; its run
    events carry it (the caller's own execution otherwise, as every other nested case)."""
    case = CASES["nested/playbook_parent_execution_id"]
    actual = run_case(case, run_dag=run_dag, dags_folder=airflow_db, workdir=tmp_path)
    assert not differences(case["expect"], actual)
    started = [e for e in actual["events"] if e.name == "PlaybookExecutionRequested"]
    assert len(started) == 2, [e.name for e in actual["events"]]
    parent, child = started
    assert parent.parent_execution_id is None
    assert str(child.parent_execution_id) == "4242"
    assert str(child.execution_id) != str(parent.execution_id)
