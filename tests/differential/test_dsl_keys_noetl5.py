"""Table (a) for NoETL 5 (docs/semantics.md section 5, its own generated block): the rows the
scan of dsl_keys_noetl5.py found in NoETL 5's Rust sources, pinned in
tests/data/noetl5-dsl-keys.json, each with a status (dsl_keys_noetl5_status.py) that is a case of
tests/noetl5/cases/ or a rule checked here against the code it names. NoETL 5 cannot be built
here, so the re-scan itself needs the three repositories' git dirs (NOETL5_SERVER_GIT,
NOETL5_WORKER_GIT, NOETL5_TOOLS_GIT) and skips, saying so, where they are not given."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from noetl_compile.engine_noetl5 import NOETL5
from noetl_compile.noetl5_tools import TOOLS, not_run
from noetl_compile.read.noetl5_schema import NOT_EXECUTED
from noetl_compile.runtime_support import NEEDS
from tests.differential import dsl_keys_noetl5 as scan
from tests.differential import dsl_keys_noetl5_status as status
from tests.differential.rust_source import get_reads, source_text, struct_fields
from tests.noetl5.cases_runner import load_cases

DATA = scan.stored()
ROWS = DATA["rows"]
PAGE = scan.SEMANTICS.read_text(encoding="utf-8")
DEPARTS = PAGE.split("### NoETL 5: where noetlc departs", 1)[1].split("\n## ", 1)[0]
MIRRORS = {
    "noetl/server": Path(os.environ.get("NOETL5_SERVER_GIT", "/nonexistent")),
    "noetl/worker": Path(os.environ.get("NOETL5_WORKER_GIT", "/nonexistent")),
    "noetl/tools": Path(os.environ.get("NOETL5_TOOLS_GIT", "/nonexistent")),
}


def test_the_block_in_section_5_is_the_generators_output_of_the_pinned_rows():
    assert PAGE.count(scan.BEGIN) == 1 and PAGE.count(scan.END) == 1
    block = PAGE.split(scan.BEGIN, 1)[1].split(scan.END, 1)[0]
    assert scan.BEGIN + block + scan.END == scan.render(DATA), (
        "regenerate: python -m tests.differential.dsl_keys_noetl5 --write"
    )
    # at the end of section 5, before section 6
    assert PAGE.index(scan.END) < PAGE.index("\n## 6. ") and PAGE.index(scan.BEGIN) > PAGE.index(
        "\n## 5. "
    )


def test_the_pinned_rows_are_a_scan_of_the_profiles_commits():
    assert DATA["commits"] == dict(NOETL5.commits)
    assert len(ROWS) >= 300, len(ROWS)
    seen = set()
    for row in ROWS:
        repo, path, line = row["where"].rsplit(":", 2)
        assert repo in MIRRORS and path.endswith(".rs") and line.isdigit(), row
        assert row["places"] >= 1 and row["default"] and row["read_by"], row
        ident = (row["key"], row["read_by"], row["default"])
        assert ident not in seen, ident
        seen.add(ident)
    # the playbook model, the tools' structs and the get() readers all contribute
    readers = {r["read_by"] for r in ROWS}
    assert {"Step", "ToolSpec", "HttpConfig", "pipeline rule then", "command args"} <= readers
    by = {(r["key"], r["read_by"]): r["default"] for r in ROWS}
    # defaults the Rust source applies, read from its attributes and chains
    assert by[("method", "HttpConfig")] == "'GET'"  # enum's #[default] variant
    assert by[("as_objects", "PostgresConfig")] == "true"  # default = "fn" returning a literal
    assert by[("backoff", "pipeline rule then")] == '"none"'  # unwrap_or("none")
    assert by[("url", "HttpConfig")] == "required"
    assert by[("mode", "LoopSpec")] == "'sequential'"


def test_every_case_a_row_cites_exists_and_every_differs_is_a_row_of_section_1():
    cases = load_cases()
    rows = {(r["key"], r["read_by"]) for r in ROWS}
    assert set(status.CASES) <= rows, sorted(set(status.CASES) - rows)
    for key, ids in status.CASES.items():
        for case_id in ids:
            assert case_id in cases, (key, case_id)
    for row in ROWS:
        text = status.status_of(row)
        for part in text.split("; "):
            if part.startswith("differs: "):
                row_text, _, case_id = part.removeprefix("differs: ").rpartition(" (")
                assert cases[case_id.rstrip(")")]["differs"]["row"] == row_text, part
                assert row_text in DEPARTS, row_text


def test_each_no_case_rule_holds_for_the_code_it_names():
    for reader, kind in status.SERVICE_KINDS.items():
        assert kind in NEEDS, (reader, kind)  # no executor: C515 at the tool
    for reader, kind in status.TOOL_KINDS.items():
        assert kind in TOOLS, (reader, kind)
    counts: dict[str, int] = {}
    for row in ROWS:
        text = status.status_of(row)
        assert text in status.RULES or "matches:" in text or "differs:" in text, (row, text)
        kind = text if text in status.RULES else "case"
        counts[kind] = counts.get(kind, 0) + 1
        if text == "not-run (S116)":
            at = status.S116_AT.get(row["read_by"]) or status.S116_AT.get(
                (row["key"], row["read_by"])
            )
            assert (
                at in NOT_EXECUTED if at else not_run(status.TOOL_KINDS[row["read_by"]], row["key"])
            )
        if text == "internal":
            assert {row["read_by"], (row["key"], row["read_by"])} & status.INTERNAL, row
    assert counts.get("service", 0) >= 100 and counts.get("case", 0) >= 60, counts


def test_the_tokenizer_reads_structs_and_get_chains():
    source = (
        "/// doc {\n"
        "#[derive(Deserialize)]\n"
        '#[serde(rename_all = "snake_case")]\n'
        "pub enum Mode { Fast, #[default] SlowPath }\n"
        "#[derive(Debug, Deserialize)]\n"
        "pub struct Cfg {\n"
        "    pub url: String,\n"
        '    #[serde(default, alias = "input")]\n'
        "    pub args: HashMap<String, Value>,\n"
        '    #[serde(rename = "do", default = "default_do")]\n'
        "    pub action: String,\n"
        "    #[serde(default)]\n"
        "    pub mode: Mode,\n"
        "    pub limit: Option<u32>, // a comment: }\n"
        "    #[serde(flatten)]\n"
        "    pub extra: HashMap<String, Value>,\n"
        "}\n"
        'fn default_do() -> String { "continue".to_string() }\n'
        "fn run(rule: &Value) {\n"
        '    let raw = r#"{ "not": "a brace" "#;\n'
        '    let to = rule.get("to").and_then(|v| v.as_str()).unwrap_or("end");\n'
        '    let n = rule\n        .get("n")\n        .ok_or_else(|| err())?;\n'
        '    let other = state.get("x");\n'
        '    let label = rule\n        .extra\n        .get("name").unwrap_or("");\n'
        "}\n"
        "#[cfg(test)]\nmod tests {\n"
        '    fn t() { rule.get("only_in_tests"); }\n'
        "}\n"
    )
    text = source_text(source)
    assert len(text) == len(source) and "only_in_tests" not in text
    fields = {f["key"]: (f["default"], f["aliases"], f["line"]) for f in struct_fields(text, "Cfg")}
    assert fields == {
        "url": ("required", [], 7),
        "args": ("{}", ["input"], 9),
        "do": ("'continue'", [], 11),
        "mode": ("'slow_path'", [], 13),
        "limit": ("None", [], 14),
    }
    readers = {"rule": "rule", "rule.extra": "extra"}
    reads = {(r["key"], r["read_by"]): (r["default"], r["line"]) for r in get_reads(text, readers)}
    assert reads == {
        ("to", "rule"): ('"end"', 21),
        ("n", "rule"): ("required (error)", 23),
        ("name", "extra"): ('""', 28),  # `rule\n.extra\n.get(..)`: a chain split over lines
    }


@pytest.mark.skipif(
    not all((p / "HEAD").exists() for p in MIRRORS.values()),
    reason="NOETL5_SERVER_GIT / NOETL5_WORKER_GIT / NOETL5_TOOLS_GIT not set: the re-scan of "
    "NoETL 5's sources does not run (the pinned rows are still checked above)",
)
def test_a_rescan_of_noetl5s_sources_gives_the_pinned_rows():
    assert scan.scan(MIRRORS) == ROWS, (
        "NoETL 5's sources scan differently: python -m tests.differential.dsl_keys_noetl5 "
        "--server ... --worker ... --tools ... --write, then review the diff"
    )
