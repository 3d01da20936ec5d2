"""The table of NoETL 5's tool arguments (noetl_compile/noetl5_tools.py) against the checker's
tool schemas and docs/noetl5.md: every key a NoETL 5 tool reads is known for its kind (no C516,
"the runtime ignores it"), the ones the runtime does not act on are S116 at the key, and the
page's tables are the table's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from noetl_compile.check import check_paths, check_text
from noetl_compile.noetl5_tools import TOOLS, keys_of, not_run, rewrite_page
from noetl_compile.tool_catalogue import fields_of

ROOT = Path(__file__).resolve().parents[1]

# A value of each type the table names, as YAML flow text; credentials are templates (X601).
_VALUE = {
    "string": '"x"',
    "integer": "5",
    "boolean": "true",
    "mapping": '{a: "1"}',
    "list | mapping": '["1"]',
    "any": '"x"',
}
_SPECIAL = {
    "password": '"{{ workload.pg_password }}"',
    "connection_string": '"{{ workload.pg_dsn }}"',
    "code": '"result = 1"',
    "path": "examples/child",
    "url": "http://127.0.0.1:9/x",
    "query": '"SELECT $1"',
    "command": '"SELECT $1"',
}


def _playbook(kind: str, marker: bool) -> str:
    lines = [
        "apiVersion: noetl.io/v2",
        "kind: Playbook",
        "metadata: {name: t, path: t}",
        "workload: {pg_password: '', pg_dsn: ''}",
    ]
    if marker:
        lines.append("executor: {profile: local}")
    lines += ["workflow:", "  - step: start", "    tool:", f"      kind: {kind}"]
    for key in TOOLS[kind].keys:
        lines.append(f"      {key.name}: {_SPECIAL.get(key.name) or _VALUE[key.type]}")
    return "\n".join(lines) + "\n"


def _diagnostics(tmp_path: Path, text: str) -> list:
    path = tmp_path / "playbook.yaml"
    path.write_text(text, encoding="utf-8")
    results, problems = check_paths([str(path)])
    assert not problems
    return results[0].diagnostics


def test_the_table_covers_the_kinds_the_runtime_runs_and_names_its_sources():
    assert set(TOOLS) == {"postgres", "duckdb", "http", "python", "noop", "playbook"}
    assert sum(len(t.keys) for t in TOOLS.values()) == 49
    for tool in TOOLS.values():
        names = [k.name for k in tool.keys]
        assert len(names) == len(set(names)), tool.kind
        for key in tool.keys:
            assert re.fullmatch(r"noetl/tools@ded94546 src/tools/\w+\.rs:\d+", key.source), key
            assert key.type in _VALUE, key


@pytest.mark.parametrize("kind", sorted(TOOLS))
def test_every_key_is_a_field_of_its_kind_in_the_checkers_schema(kind):
    assert keys_of(kind) <= fields_of(kind)


@pytest.mark.parametrize("marker", [True, False], ids=["noetl5", "canonical"])
@pytest.mark.parametrize("kind", sorted(TOOLS))
def test_no_key_a_noetl5_tool_reads_is_reported_as_ignored(tmp_path, kind, marker):
    diagnostics = _diagnostics(tmp_path, _playbook(kind, marker))
    assert [d.message for d in diagnostics if d.code == "C516"] == []
    reported = {
        key.name
        for key in TOOLS[kind].keys
        for d in diagnostics
        if d.code == "S116" and d.message.startswith(f"`{key.name}` of the {kind} tool")
    }
    assert reported == {key.name for key in TOOLS[kind].keys if not_run(kind, key.name)}


def test_not_run_keys_say_why_at_their_line(tmp_path):
    text = _playbook("playbook", True)
    line = next(
        i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith("catalog_id:")
    )
    [s116] = [
        d
        for d in _diagnostics(tmp_path, text)
        if d.code == "S116" and d.message.startswith("`catalog_id` of the playbook tool")
    ]
    assert s116.position.line == line
    assert "catalog" in s116.message


def test_only_the_catalog_keys_and_the_wait_bound_of_playbook_are_not_run():
    # postgres `schema`, http `response_type`, python `python` run (issue 30's last three); a
    # playbook call's `timeout` bounds no wait on Airflow (tests/noetl5/cases/nested/
    # playbook_timeout_pipeline_task).
    assert {(t.kind, k.name) for t in TOOLS.values() for k in t.keys if k.airflow} == {
        ("playbook", "catalog_id"),
        ("playbook", "version"),
        ("playbook", "timeout"),
    }


def test_a_misspelt_key_is_still_c516(tmp_path):
    text = _playbook("postgres", True).replace("params:", "parmas:")
    [c516] = [d for d in _diagnostics(tmp_path, text) if d.code == "C516"]
    assert "parmas" in c516.message and "params" in c516.message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("password", "Hunter2Pass!x"),
        ("connection_string", "postgresql://app:S3cretPassw0rd@db.example.com:5432/app"),
    ],
)
def test_a_literal_postgres_password_is_x601(tmp_path, key, value):
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t}\n"
        "executor: {profile: local}\nworkflow:\n  - step: start\n    tool:\n"
        f"      kind: postgres\n      host: db.example.com\n      {key}: {json.dumps(value)}\n"
        "      query: SELECT 1\n"
    )
    x601 = [d for d in _diagnostics(tmp_path, text) if d.code == "X601"]
    assert x601 and value not in x601[0].message


def test_docs_page_tables_are_the_tables_data():
    page = ROOT / "docs" / "noetl5.md"
    text = page.read_text(encoding="utf-8")
    assert rewrite_page(text) == text, "run: python -m noetl_compile.noetl5_tools docs/noetl5.md"
    for tool in TOOLS.values():
        for key in tool.keys:
            assert key.source in text


@pytest.mark.parametrize("key", ["connection_string", "host"])
def test_noetl5_postgres_connecting_with_its_own_keys_needs_no_auth(tmp_path, key):
    body = (
        "workload: {dsn: ''}\nworkflow:\n  - step: start\n    tool:\n      kind: postgres\n"
        f'      {key}: "{{{{ workload.dsn }}}}"\n      query: SELECT 1\n'
    )
    head = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t}\n"
    noetl5 = _diagnostics(tmp_path, head + "executor: {profile: local}\n" + body)
    assert [d.message for d in noetl5 if d.code == "C503"] == []
    # Without a marker, the key itself makes the file NoETL 5 (S119 says so, at the key)...
    detected = _diagnostics(tmp_path, head + body)
    assert [(d.code, d.position.line) for d in detected if d.code in ("C503", "S119")] == [
        ("S119", 9)
    ]
    # ...and the April canonical engine, forced, refuses a postgres call without `auth`: C503.
    canonical = check_text(head + body, "t.yaml", dialect="canonical").diagnostics
    assert [d.code for d in canonical if d.code == "C503"] == ["C503"]


def test_the_run_playbook_checks_clean_as_noetl5():
    """tests/noetl5_tools/tool_args_run.yaml (run by tests/runtime/test_noetl5_tool_args.py)."""
    results, _ = check_paths([str(ROOT / "tests" / "noetl5_tools" / "tool_args_run.yaml")])
    [result] = results
    assert result.playbook.generation == "noetl5"
    assert [(d.code, d.message) for d in result.diagnostics] == []
