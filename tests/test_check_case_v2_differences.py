"""D953 and D960 (noetl_compile/check/differences_case_v2.py): reported where a case-v2
playbook's text makes dc55c492's outcome certain, at the key that decides it, and nowhere else
(the recorded cases: tests/differential/cases/dsl_keys/c2_sink_error_tool_*,
c2_sink_tool_text_*, c2_auth_spec_tool_*)."""

from __future__ import annotations

import pytest

from noetl_compile.check import check_text

_SINK = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: s}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'id': 3}"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          sink:
            tool: TOOL
            auth: pg_local
            table: t
            data: {id: "{{ result.id }}"}
          next: [{step: after}]
  - step: after
    tool: {kind: python, code: "result = {'after': True}"}
"""

_AUTH = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: a}
workflow:
  - step: start
    args: {m: 1}
    tool:
      kind: postgres
      auth: AUTH
      command: SELECT 1 AS n;
    next: [{step: after}]
  - step: after
    tool: {kind: python, code: "result = {'after': True}"}
"""


def _found(text: str, code: str):
    return [d for d in check_text(text, "p.yaml").diagnostics if d.code == code]


@pytest.mark.parametrize(
    ("tool", "what"),
    [
        ("postgress", "kind 'postgress'"),
        ("{kind: s3, table: t}", "kind 's3'"),
        ("[postgres]", "(a list)"),
        ("null", "(null)"),
        ("true", "(a boolean)"),
        ("{kind: 5, table: t}", "a kind that is not text (a number)"),
    ],
)
def test_d953_at_a_sink_dc55c492_cannot_run(tool: str, what: str):
    found = _found(_SINK.replace("TOOL", tool), "D953")
    assert [(d.position.line, d.position.col) for d in found] == [(11, 19)]
    assert what in found[0].message and "'start'" in found[0].message
    assert "writes nothing" in found[0].message and found[0].hint


@pytest.mark.parametrize("tool", ["postgres", "' Postgres '", "{kind: postgres, table: t}"])
def test_d953_at_a_postgres_sink_without_auth(tool: str):
    """dc55c492's postgres sink connects only through `auth` or `spec` (a case sink gets no
    `with`): without them it records an error `sink.done` and the run completes
    (tools_case_v2/v2_case_sink_text_without_auth)."""
    text = _SINK.replace("TOOL", tool).replace("            auth: pg_local\n", "")
    found = _found(text, "D953")
    assert [(d.position.line, d.position.col) for d in found] == [(11, 19)]
    assert "no `auth`, so no connection" in found[0].message


@pytest.mark.parametrize(
    "tool",
    [
        "postgres",
        "' Postgres '",  # the sink executor strips and lower-cases the kind
        "event_log",
        "{kind: duckdb, table: t}",
        "{type: http, url: 'http://127.0.0.1/x'}",
        "{table: t}",  # a mapping without kind or type is the event log there
        "{kind: postgres, auth: pg_local}",  # the mapping's `auth` over the sink's
        "{kind: postgres, spec: {dsn: 'postgresql://db/x'}}",
        "'{{ workload.sink_kind }}'",  # rendered at run time: unknown here
    ],
)
def test_no_d953_where_dc55c492_has_a_sink(tool: str):
    assert _found(_SINK.replace("TOOL", tool), "D953") == []


@pytest.mark.parametrize(
    ("auth", "key"),
    [
        ("{source: credential, key: pg_local, tool: duckdb}", "tool"),
        ("{key: pg_local, type: mysql}", "type"),
        ("{key: pg_local, service: http, tool: postgres}", "service"),
    ],
)
def test_d960_at_the_key_naming_another_service(auth: str, key: str):
    found = _found(_AUTH.replace("AUTH", auth), "D960")
    assert len(found) == 1 and f"(its `{key}`)" in found[0].message
    assert found[0].position.line == 9
    assert f"drop `{key}`" in found[0].hint


@pytest.mark.parametrize(
    "auth",
    [
        "pg_local",
        "{source: credential, key: pg_local}",
        "{source: credential, key: pg_local, tool: postgres}",
        "{key: pg_local, type: postgres, tool: duckdb}",  # `type` decides before `tool`
        "{source: env, name: PG_DSN, tool: duckdb}",  # only a credential item reads `tool`
        "{pg: {key: pg_local, tool: duckdb}}",  # an alias map, not one item
        "{key: pg_local, tool: '{{ workload.service }}'}",
    ],
)
def test_no_d960_where_dc55c492_connects(auth: str):
    assert _found(_AUTH.replace("AUTH", auth), "D960") == []
