"""`noetlc upgrade --unsafe-fixes` and `--report`: the catalogue of unsafe fixes, what is applied
only when asked, the migration report, the corpus count, and the two documented examples (the
whitepaper's v1 loop, the formal specification's case/sink example: tests/data/upgrade/, copies
of the seed examples) upgraded, checked clean and run before and after.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from noetl_compile.check import check_text
from noetl_compile.diagnostics import Severity
from noetl_compile.engine_profiles import profile_of
from noetl_compile.upgrade import ENGINE_DIFFERENCE_CODES, upgrade_text
from noetl_compile.upgrade.command import report, run
from noetl_compile.upgrade.edits import COMMENT_PREFIX
from noetl_compile.upgrade.unsafe import ASPECTS, KINDS
from tests.corpus import CORPUS
from tests.upgrade_support import corpus_upgrades, relative

DATA = Path(__file__).parent / "data" / "upgrade"
WHITEPAPER = DATA / "whitepaper_weather_loop.yaml"
SPEC = DATA / "spec_case_sink.yaml"


def _codes(diagnostics) -> Counter:
    """Check's codes less the D9xx infos, which say how the engine of the file's own generation
    differs and so change with the generation by design (as upgrade's own U803 test reads)."""
    return Counter(d.code for d in diagnostics if d.code not in ENGINE_DIFFERENCE_CODES)


def test_the_catalogue_declares_each_kind_per_aspect_from_the_profiles() -> None:
    assert len(KINDS) >= 9
    for kind in KINDS.values():
        assert kind.differences, kind.name
        assert {d.aspect for d in kind.differences} <= set(ASPECTS), kind.name
        if kind.field is not None:
            # The first difference carries the profile field's own documentation and values.
            before, after = profile_of("case-v2"), profile_of("canonical")
            said = kind.declared("case-v2")[0].says
            assert f"{kind.field}: case-v2 {getattr(before, kind.field)}" in said
            assert f"canonical {getattr(after, kind.field)}" in said
    postgres = KINDS["postgres-result"].note("case-v2")
    assert "postgres_result_per_statement: case-v2 True, canonical False" in postgres


def test_the_docs_list_every_kind_of_the_catalogue() -> None:
    page = (Path(__file__).parents[1] / "docs" / "editor.md").read_text(encoding="utf-8")
    listed = {line.split("`")[1] for line in page.splitlines() if line.startswith("| `")}
    assert set(KINDS) <= listed, set(KINDS) - listed


@pytest.mark.parametrize("path", [WHITEPAPER, SPEC], ids=["whitepaper", "spec"])
def test_nothing_unsafe_is_applied_unless_asked(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    exact = upgrade_text(text, str(path))
    assert not exact.writable and exact.unsafe_available and not exact.unsafe_applied
    assert all("U805" != d.code for d in exact.diagnostics)
    offered = [d for d in exact.diagnostics if "--unsafe-fixes" in d.message]
    assert offered and all(d.code == "U801" for d in offered)

    unsafe = upgrade_text(text, str(path), unsafe=True)
    assert unsafe.writable, unsafe.diagnostics
    notes = [d for d in unsafe.diagnostics if d.code == "U805"]
    assert notes and all(d.severity is Severity.WARNING for d in notes)
    # Each applied kind's note is in the file, at the construct, with the catalogue's text.
    for name in {name for name, _, _ in unsafe.unsafe_applied}:
        text_note = KINDS[name].note(exact.dialect)
        assert f"# {COMMENT_PREFIX} {text_note}" in unsafe.text, name
    again = check_text(unsafe.text, str(path))
    assert again.playbook.dialect == "canonical"
    assert not [d for d in again.diagnostics if d.severity is Severity.ERROR]
    before = _codes(check_text(text, str(path)).diagnostics)
    assert _codes(again.diagnostics) <= before


def test_the_two_examples_use_the_kinds_they_need() -> None:
    loop = upgrade_text(WHITEPAPER.read_text(encoding="utf-8"), "w.yaml", unsafe=True)
    assert {name for name, _, _ in loop.unsafe_applied} == {"loop-body"}
    assert "- step: fetch_and_evaluate\n    loop:\n" in loop.text
    assert "fetch_and_evaluate.results | selectattr('alert') | list" in loop.text
    assert "city_loop_results" not in loop.text and "end_loop:" not in loop.text
    spec = upgrade_text(SPEC.read_text(encoding="utf-8"), "s.yaml", unsafe=True)
    assert {name for name, _, _ in spec.unsafe_applied} == {
        "sink-removed",
        "call-done-result",
        "failure-arc",
    }
    assert "{step: error_handler, when: \"{{ event.name == 'call.error' }}\"}" in spec.text
    assert "#   tool: {kind: postgres" in spec.text  # the sink, kept as a comment


@pytest.mark.parametrize(
    "old, new",
    [
        # another read of the per-iteration results, which the fold would not keep
        ("  - step: end\n", '  - step: end\n    with: {n: "{{ city_loop_results }}"}\n'),
        # a second body step
        ("    next:\n      - step: end_city_loop\n", "    next:\n      - step: more\n"),
    ],
    ids=["results read elsewhere", "two body steps"],
)
def test_a_loop_body_the_fold_would_change_more_is_left(old: str, new: str) -> None:
    text = WHITEPAPER.read_text(encoding="utf-8")
    assert old in text
    text = text.replace(old, new, 1)
    if "step: more" in text:
        text += "  - step: more\n    next:\n      - step: end_city_loop\n"
    upgrade = upgrade_text(text, "w.yaml", unsafe=True)
    assert "loop-body" not in {name for name, _, _ in upgrade.unsafe_applied}
    assert not upgrade.writable
    assert any("v1 loop" in d.message for d in upgrade.diagnostics if d.code == "U801")


def test_the_cli_counts_the_unsafe_fixes_without_applying_them(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for path in (WHITEPAPER, SPEC):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert run(["."], mode="write") == 1
    out = capsys.readouterr().out
    assert "0 upgraded, 2 need a hand" in out
    assert "4 unsafe fix(es) would complete 2 more playbook(s): --unsafe-fixes" in out
    assert (tmp_path / SPEC.name).read_text(encoding="utf-8") == SPEC.read_text(encoding="utf-8")

    assert run(["."], mode="diff", unsafe=True) == 0
    out = capsys.readouterr().out
    assert "--- a/spec_case_sink.yaml\n+++ b/spec_case_sink.yaml" in out
    assert "+    # noetlc upgrade: unsafe fix `failure-arc`" in out
    assert "U805 [warning] unsafe fix `loop-body`" in out
    assert "would complete" not in out

    assert run(["."], mode="write", unsafe=True) == 0
    written = (tmp_path / WHITEPAPER.name).read_text(encoding="utf-8")
    assert check_text(written, "w.yaml").playbook.dialect == "canonical"


def test_the_report_gives_each_file_a_verdict_and_the_totals(tmp_path: Path, capsys) -> None:
    from tests.test_upgrade_runs import V1_ROUTES

    (tmp_path / "exact.yaml").write_text(V1_ROUTES, encoding="utf-8")
    (tmp_path / "unsafe.yaml").write_text(SPEC.read_text(encoding="utf-8"), encoding="utf-8")
    current = (Path(__file__).parents[1] / "playbooks" / "pipeline_retry.yaml").read_text()
    (tmp_path / "current.yaml").write_text(current, encoding="utf-8")
    stuck = SPEC.read_text(encoding="utf-8").replace(
        "    next: fetch_user\n", "    next: fetch_user\n    retry: [{when: x}]\n"
    )
    (tmp_path / "stuck.yaml").write_text(stuck, encoding="utf-8")

    assert report([str(tmp_path)], as_json=True) == 0
    data = json.loads(capsys.readouterr().out)
    verdicts = {Path(f["path"]).name: f for f in data["files"]}
    assert {name: f["verdict"] for name, f in verdicts.items()} == {
        "current.yaml": "current",
        "exact.yaml": "exact",
        "stuck.yaml": "not rewritable",
        "unsafe.yaml": "unsafe",
    }
    fixes = verdicts["unsafe.yaml"]["fixes"]
    assert {f["kind"] for f in fixes} == {"sink-removed", "call-done-result", "failure-arc"}
    arc = next(f for f in fixes if f["kind"] == "failure-arc")
    assert arc["step"] == "fetch_user" and arc["line"] == 30
    assert {d["aspect"] for d in arc["differences"]} == {"final status", "steps", "events"}
    why = verdicts["stuck.yaml"]["why"]
    assert why and why[0]["code"] == "U801" and "retry" in why[0]["message"]
    assert data["totals"] == {
        "exact": 1,
        "unsafe": 1,
        "not rewritable": 1,
        "current": 1,
        "files": 4,
        "unsafe fixes": 3,
    }

    assert report([str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "migration report" in text and "failure-arc (line 30)" in text
    assert "4 playbook(s): 1 exact, 1 unsafe (3 unsafe fixes" in text
    assert "1 not rewritable, 1 current" in text


@pytest.mark.corpus
def test_seventy_of_eighty_corpus_playbooks_upgrade_and_check_clean() -> None:
    upgrades = corpus_upgrades()
    assert len(upgrades) >= 75, f"the corpus is missing ({CORPUS})"
    counts: Counter = Counter()
    left = []
    for path, exact in upgrades.items():
        if exact.writable:
            counts["exact"] += 1
            continue
        unsafe = upgrade_text(exact.original, str(path), unsafe=True)
        if not unsafe.writable:
            counts["not rewritable"] += 1
            left.append(relative(path))
            continue
        counts["unsafe"] += 1
        counts["fixes"] += len(unsafe.unsafe_applied)
        after = check_text(unsafe.text, str(path))
        assert after.playbook.dialect == "canonical", path
        before = _codes(check_text(exact.original, str(path)).diagnostics)
        assert _codes(after.diagnostics) <= before, (path, after.diagnostics)
        assert sum(COMMENT_PREFIX in line for line in unsafe.text.splitlines()) >= 1
    print(f"\nupgrade with --unsafe-fixes: {dict(counts)}; not rewritable: {left}")
    assert counts["exact"] >= 21
    assert counts["exact"] + counts["unsafe"] >= 70


def _run_both(path: Path, conf: dict, setup: list[str], fixtures) -> tuple:
    import psycopg

    from tests.corpus_run import runner
    from tests.corpus_run.test_corpus_run import RESET_SQL
    from tests.upgrade_support import run_text

    airflow_db, run_dag, tmp_path, monkeypatch, dsn = fixtures
    text = path.read_text(encoding="utf-8")
    upgrade = upgrade_text(text, str(path), unsafe=True)
    runs = []
    for side, body in (("before", text), ("after", upgrade.text)):
        with psycopg.connect(dsn, autocommit=True) as db:
            db.execute(RESET_SQL)
            for statement in setup:
                db.execute(statement)
        root = tmp_path / side / "corpus"
        monkeypatch.setattr(runner, "CORPUS", root)
        runs.append(
            run_text(root, "seeds/p.yaml", body, conf, airflow_db, run_dag, tmp_path / side)
        )
    return upgrade, runs[0], runs[1]


def test_the_whitepaper_loop_runs_after_the_upgrade(
    airflow_db, run_dag, http_server, tmp_path, monkeypatch, pg_connections, pg_test_dsn
) -> None:
    from tests.test_upgrade_unsafe_runs import agreement, measured

    fixtures = (airflow_db, run_dag, tmp_path, monkeypatch, pg_test_dsn)
    upgrade, before, after = _run_both(WHITEPAPER, {"base_url": http_server}, [], fixtures)
    assert (before.state, after.state) == ("success", "success"), after.describe()
    alerts = [{"city": "Paris", "alert": True}, {"city": "Cairo", "alert": True}]
    assert before.results["end_city_loop"]["alerts"] == alerts
    assert after.results["end_city_loop"]["alerts"] == alerts
    assert [r["city"] for r in after.results["fetch_and_evaluate"]["results"]] == [
        "Paris",
        "Oslo",
        "Cairo",
    ]
    assert agreement(upgrade.unsafe_applied, before, measured(before, after)) == []


def test_the_spec_case_sink_example_runs_after_the_upgrade(
    airflow_db, run_dag, http_server, tmp_path, monkeypatch, pg_connections, pg_test_dsn
) -> None:
    from tests.test_upgrade_unsafe_runs import agreement, measured

    fixtures = (airflow_db, run_dag, tmp_path, monkeypatch, pg_test_dsn)
    setup = ["CREATE TABLE seed_users (id integer PRIMARY KEY, email text)"]
    upgrade, before, after = _run_both(SPEC, {"api": http_server}, setup, fixtures)
    assert (before.state, after.state) == ("success", "success"), after.describe()
    assert after.results["success_handler"]["greeting"].startswith("hello ")
    assert "error_handler" not in after.results
    # The sink is the declared difference: its events are gone, nothing else changed here.
    differences = measured(before, after)
    assert set(differences) <= {"events", "results"}
    assert agreement(upgrade.unsafe_applied, before, differences) == []
