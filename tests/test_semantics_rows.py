"""No silent divergence (issue 33): every row of docs/semantics.md section 1 that a playbook's
text can trigger names the `noetlc check` code reported at the construct, and the recorded cases
the row cites get that code when checked.

A row's last column holds its codes (D9xx for a difference from NoETL's engine, or the code of
another family that already stops or warns), or `none:` and why no playbook text triggers it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from noetl_compile.check import check_text
from noetl_compile.codes import differences
from noetl_compile.rules import RULES

ROOT = Path(__file__).parents[1]
CASES = ROOT / "tests" / "differential" / "cases"
# The cited cases that show a difference (a row also cites cases where both sides agree).
DIVERGENT = set(yaml.safe_load((CASES.parent / "divergences.yaml").read_text(encoding="utf-8")))
_CODE = re.compile(r"\b[A-Z][0-9]{3}\b")
_CASE = re.compile(r"`([a-z0-9_]+/[a-z0-9_]+)`")

# Cited cases whose difference no construct of their text shows, with why.
NOT_SHOWN_BY_TEXT = {
    # A raised error before a plain `next` (dc55c492 stops; 138c10ed goes on): any call can
    # fail, so marking every plain `next` of an unmarked playbook would say nothing.
    "case_v2/case_error_no_route": "a failed call before a plain `next`: every call can fail",
    # A failed step read by name in the step its plain arc reaches (D950 marks the reads where
    # an arc routes the failure): every call can fail.
    "template_names/c_step_by_name_failed": "a failed step read after a plain arc: any call fails",
    # A sink's data naming a field the call's result lacks (`{{ result.nope.x }}`): which
    # fields a python call returns is known only when it runs (D953 marks the certain failures).
    "dsl_keys/c2_sink_error_tool_shape_absent": "an undefined field of a call's result in a sink",
    # A case-v2 sink whose write the database refuses (a missing table): any write can fail.
    "tools_case_v2/v2_case_sink_write_fails": "a sink write the database refuses: any can fail",
}
# NoETL 5 cases whose difference no construct of their text shows, with why.
NOETL5_NOT_SHOWN_BY_TEXT = {
    "loop/cursor_step_result": "the result differs only where a template reads it (D958 there)",
}
# A case a row cites for what both engines share, whose difference is another row's.
CITED_FOR_AGREEMENT = {
    ("v1 argument spellings", "v1/next_data_params"): "an arc's `data`: both read it (D910's row)",
}


def _cells(line: str) -> list[str]:
    # A `|` inside a cell is written `\|` (a Jinja filter): not a column separator.
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def section_one_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
    section = text.split("## 1.", 1)[1].split("\n### ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    header, rows = _cells(lines[0]), [_cells(line) for line in lines[1:]]
    assert header[-1] == "`noetlc check`", header
    assert all(len(row) == len(header) for row in rows), [
        r[0] for r in rows if len(r) != len(header)
    ]
    return rows


ROWS = section_one_rows()


def noetl5_rows() -> list[list[str]]:
    """Section 1's table "NoETL 5: where noetlc departs from its source" (no check column:
    a row names its code in its text)."""
    text = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
    section = text.split("### NoETL 5: where noetlc departs from its source", 1)[1]
    section = section.split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    return [_cells(line) for line in lines[1:]]


NOETL5_ROWS = noetl5_rows()


def test_every_row_names_its_check_or_why_none():
    for row in ROWS:
        cell = row[-1]
        codes = _CODE.findall(cell)
        assert codes or cell.startswith("none: "), f"row {row[0]!r} names no check code"
        unknown = [code for code in codes if code not in RULES]
        assert not unknown, f"row {row[0]!r} names codes the catalogue lacks: {unknown}"


def test_every_difference_code_names_a_row_that_cites_it():
    # A row of the NoETL 5 table names its code in its noetlc column.
    cited_by = [(row, _CODE.findall(row[-1])) for row in ROWS] + [
        (row, _CODE.findall(row[2])) for row in NOETL5_ROWS
    ]
    cited = {code for _, codes in cited_by for code in codes}
    for rule in differences.RULES:
        assert rule.code in cited, f"{rule.code} is cited by no row of section 1"
        assert rule.title.startswith("runs differently on NoETL: "), rule.code
        named = re.search(r"row '([^']+)'", rule.why)
        assert named, f"{rule.code}'s explanation names no row"
        start = named.group(1).split(" ...")[0]
        rows = [row for row, codes in cited_by if rule.code in codes]
        assert any(row[0].startswith(start) for row in rows), (
            f"{rule.code} names row {start!r}, but the rows citing it are "
            f"{[row[0][:40] for row in rows]}"
        )


@pytest.mark.parametrize("row", ROWS, ids=[row[0][:48] for row in ROWS])
def test_each_cited_case_gets_its_rows_code(row):
    """The recorded cases that show a row's difference (listed in divergences.yaml) are the
    playbooks a migrating team has: checking them must say so, at the construct."""
    codes = set(_CODE.findall(row[-1]))
    if not codes:
        return
    cited = [c for c in _CASE.findall(row[-2]) if c in DIVERGENT]
    for case_id in cited:
        if case_id in NOT_SHOWN_BY_TEXT or any(
            row[0].startswith(start) and case_id == cited_case
            for start, cited_case in CITED_FOR_AGREEMENT
        ):
            continue
        case = yaml.safe_load((CASES / f"{case_id}.yaml").read_text(encoding="utf-8"))
        text = yaml.safe_dump(case["playbook"], sort_keys=False)
        found = {d.code for d in check_text(text, f"{case_id}.yaml").diagnostics}
        assert codes & found, f"{case_id} (row {row[0][:50]!r}): check reports {sorted(found)}"


def test_a_difference_is_reported_at_its_construct():
    """D917 at the unconditional `next` list of an unmarked playbook (the fan-out the case-v2
    engine would run in full), with the line and column of `next`'s value."""
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: fan}\nworkflow:\n"
        "  - step: start\n    tool: {kind: noop}\n    next:\n      - step: load_pg\n"
        "      - step: load_s3\n"
        "  - step: load_pg\n    tool: {kind: noop}\n  - step: load_s3\n    tool: {kind: noop}\n"
    )
    found = [d for d in check_text(text, "fan.yaml").diagnostics if d.code == "D917"]
    assert [(d.position.line, d.position.col) for d in found] == [(8, 7)]
    assert "load_pg" in found[0].message and "case-v2" in found[0].message
    marked = text.replace(
        "next:\n      - step: load_pg\n      - step: load_s3\n",
        "next:\n      spec: {mode: inclusive}\n      arcs:\n"
        "        - step: load_pg\n        - step: load_s3\n",
    )
    assert "D917" not in {d.code for d in check_text(marked, "fan.yaml").diagnostics}


def test_each_noetl5_case_a_row_cites_gets_the_rows_code():
    """The NoETL 5 cases that show a row's difference (their `differs.row`), checked as NoETL 5
    playbooks: the code the row names in its noetlc column is reported."""
    from tests.noetl5.cases_runner import load_cases

    checked = 0
    for case_id, case in load_cases().items():
        row_name = (case.get("differs") or {}).get("row")
        if not row_name:
            continue
        [row] = [row for row in NOETL5_ROWS if row[0] == row_name]
        codes = set(_CODE.findall(row[2]))
        if not codes or case_id in NOETL5_NOT_SHOWN_BY_TEXT:
            continue
        text = yaml.safe_dump(case["playbook"], sort_keys=False)
        found = {d.code for d in check_text(text, f"{case_id}.yaml", dialect="noetl5").diagnostics}
        assert codes & found, f"{case_id} (row {row_name!r}): check reports {sorted(found)}"
        checked += 1
    assert checked >= 7, checked


def test_a_noetl5_cursor_step_read_downstream_is_d958_at_the_read():
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: c}\nworkflow:\n"
        "  - step: start\n    tool: {kind: noop}\n    next: [{step: work}]\n"
        "  - step: work\n    loop:\n      cursor: {auth: pg, claim: SELECT 1 AS id}\n"
        "      iterator: job\n      spec: {mode: cursor}\n"
        "    tool: {kind: noop}\n    next: [{step: after}]\n"
        "  - step: after\n    tool: {kind: noop, result: {n: '{{ work.stats.total }}'}}\n"
    )
    found = [d for d in check_text(text, "c.yaml", dialect="noetl5").diagnostics]
    d958 = [d for d in found if d.code == "D958"]
    assert [(d.position.line, d.position.col) for d in d958] == [(16, 40)], found
    # The claim is a SELECT (no D956); the cursor without `kind` claims on postgres (no C512).
    assert not {"D956", "C512"} & {d.code for d in found}
    updating = text.replace("claim: SELECT 1 AS id", "claim: UPDATE t SET a = 1 RETURNING id")
    assert "D956" in {d.code for d in check_text(updating, "c.yaml", dialect="noetl5").diagnostics}


def test_section_five_is_the_stored_scan_of_each_engine():
    """docs/semantics.md section 5 is generated from the stored scan (tests/data), the recorded
    cases (cases/dsl_keys, their `row:`) and divergences.yaml; regenerate with
    `python -m tests.differential.dsl_keys --write` (add `--noetl ENGINE=CHECKOUT` per engine
    to re-scan)."""
    from tests.differential.dsl_keys import BEGIN, END, ENGINES, render, stored

    data = stored()
    doc = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    assert doc[start:end] == render(data)
    assert set(data["commits"]) == set(ENGINES)
    for engine, bases in ENGINES.items():
        rows = [r for r in data["rows"] if r["engine"] == engine]
        assert len(rows) >= 150 and all(r["first"].startswith(bases) for r in rows), engine
        assert len({(r["key"], r["default"]) for r in rows}) == len(rows), engine


def test_every_recorded_key_case_names_a_row_of_the_scan():
    """A case under cases/dsl_keys/ says which row it records (`row:`); the row must exist, so a
    re-scan that drops or renames a key cannot leave a case counted for nothing."""
    from tests.differential.dsl_keys import recorded_cases, stored

    rows = {(r["engine"], r["key"], r["default"]) for r in stored()["rows"]}
    recorded = recorded_cases()
    assert recorded and set(recorded) <= rows, sorted(set(recorded) - rows)


def test_a_row_without_a_case_says_why():
    """Each row's status is a recorded case or a no-case rule; a rule is decided per place
    (one playbook-reachable place keeps the row `open`), never typed per row."""
    from tests.differential.dsl_keys import NO_CASE, _rule, stored

    words = {word for word, _ in NO_CASE}
    for row in stored()["rows"]:
        assert row["no_case"] in words | {None}, row
    # The rules, on places whose group is plain from the path or the key.
    assert _rule("canonical", "__loop_retry", "control_args", "noetl/core/dsl/v2/engine.py") == (
        "internal"
    )
    assert _rule("canonical", "image", "runtime_cfg", "noetl/tools/container/executor.py") == (
        "service"
    )
    assert _rule("canonical", "method", "config", "noetl/worker/v2_worker_nats.py") is None
    # `log-only` is reviewed per (key, default, file): the display name of an http tool is, the
    # same key with another default or in another file is not.
    http = "noetl/tools/http/executor.py"
    assert _rule("canonical", "task", "task_config", http, "'http_task'") == "log-only"
    assert _rule("canonical", "task", "task_config", http, "None") is None
    assert (
        _rule("v1", "task", "task_config", "noetl/plugin/playbook/executor.py", "'playbook_task'")
        is None
    )
    # `internal` per place too: the v1 iterator's own config dict, an event's `meta`; the same key
    # read from a step (`version` of a playbook task) stays playbook text.
    iteration = "noetl/plugin/iterator/execution.py"
    assert _rule("v1", "total_count", "config", iteration, "len(iter_payload)") == "internal"
    events = "noetl/server/api/event/service/event_service.py"
    assert _rule("v1", "version", "metadata", events, "None") == "internal"
    assert (
        _rule("v1", "version", "task_config", "noetl/plugin/playbook/executor.py", "'latest'")
        is None
    )


def test_the_scan_keeps_dsl_blocks_and_leaves_state_out():
    from tests.differential.dsl_keys import is_dsl_receiver

    assert all(map(is_dsl_receiver, ("task_config", "step", "retry_spec", "sink_tool", "case")))
    assert not any(map(is_dsl_receiver, ("loop_state", "result", "event_payload", "cred_data")))


def test_section_six_is_the_stored_scan_of_the_render_contexts():
    """docs/semantics.md section 6 is generated from the stored scan (tests/data) and noetlc's
    profiles; regenerate with `python -m tests.differential.template_names --noetl ... --write`."""
    from tests.differential.template_names import BEGIN, BUILDERS, END, profile_rows, render, stored

    data = stored()
    doc = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    assert doc[start:end] == render(data)
    # noetlc's half is read from the profiles now: a profile change regenerates the page.
    assert data["profile"] == profile_rows()
    assert set(data["commits"]) == set(BUILDERS)
    names = {(r["engine"], r["name"]) for r in data["rows"]}
    # The names the issue names, as each engine binds them.
    assert {
        ("canonical", "output.data"),
        ("canonical", "ctx"),
        ("case-v2", "response"),
        ("v1", "<iterator_name>"),
    } <= names
    aliases = {r["name"]: r["aliases"] for r in data["rows"] if r["engine"] == "canonical"}
    assert aliases["ctx"] == ["workload"]


def test_the_context_scan_follows_dicts_placed_under_a_key():
    import ast

    from tests.differential.template_names import names_in

    source = (
        "def build(x):\n"
        "    inner = {'a': 1}\n"
        "    ctx = {'one': x, 'same': x, **x.results}\n"
        "    ctx['inner'] = inner\n"
        "    inner['b'] = 2\n"
        "    ctx['nested'] = {'c': 3}\n"
        "    return ctx\n"
    )
    found = {r["name"]: r["reads"] for r in names_in(ast.parse(source), "ctx")}
    assert found == {
        "one": "x",
        "same": "x",
        "**x.results": "x.results",
        "inner": "inner",
        "inner.a": "1",
        "inner.b": "2",
        "nested": "{'c': 3}",
        "nested.c": "3",
    }


def test_the_reads_noetl_binds_otherwise_are_reported_where_they_apply():
    """D948 at a loop item's position in a loop step (not outside a loop), D950 at a failed
    step read where an arc routes its failure (not after a plain arc: any call can fail),
    D944 at `output.data` read whole (not at one of its fields)."""
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p}\nworkflow:\n"
        "  - step: start\n    tool: {kind: python, code: 'result = {}'}\n"
        "    next:\n      arcs:\n"
        "        - step: recover\n          when: \"{{ event.name == 'call.error' }}\"\n"
        "        - step: each\n          when: '{{ output.data is none or output.data.x }}'\n"
        "  - step: recover\n    tool: {kind: python, code: 'result = {}'}\n"
        "    input: {why: '{{ start.error }}'}\n"
        "  - step: each\n    loop: {in: '{{ [1, 2] }}', iterator: n}\n"
        "    tool: {kind: python, code: 'result = {}'}\n"
        "    input: {first: '{{ loop.first }}', n: '{{ iter.n }}'}\n"
        "    next: [{step: later}]\n"
        "  - step: later\n    tool: {kind: python, code: 'result = {}'}\n"
        "    input: {s: '{{ start.x }}', i: '{{ loop.index }}'}\n"
    )
    found = [(d.code, d.position.line) for d in check_text(text, "p.yaml").diagnostics]
    assert ("D950", 15) in found and ("D948", 19) in found and ("D944", 12) in found, found
    assert [c for c, _ in found].count("D950") == 1  # `later` reads start after a plain arc
    assert [c for c, _ in found].count("D948") == 1  # `later` is no loop step
    case_v2 = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p}\nworkflow:\n"
        "  - step: start\n    tool: {kind: python, code: 'result = {}'}\n"
        "    case:\n      - when: \"{{ event.name == 'call.done' }}\"\n"
        "        then: {next: [{step: probe}]}\n"
        "  - step: probe\n    tool:\n      kind: python\n      code: 'result = {}'\n"
        "      args: {v: '{{ start.a }}', w: '{{ workload.x }}'}\n"
    )
    found = [(d.code, d.position.line) for d in check_text(case_v2, "p.yaml").diagnostics]
    assert [c for c, line in found if c == "D949"] == ["D949"] and ("D949", 14) in found, found
    assert "D949" not in [d.code for d in check_text(text, "p.yaml").diagnostics]
