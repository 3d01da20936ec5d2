"""Typos never pass silently: one misspelling per case (a tool field of each kind, a
`workload.`/`ctx.`/`vars.` path, a filter, a templated or sink `auth`, a `--set`/`--conf` key),
each reported at the misspelt word with the name that was meant.

A case is a playbook with one line marked `#<`; the diagnostic must sit on that line, at the
column where the misspelt word starts, and say "did you mean '<meant>'".
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from noetl_compile.check import check_paths
from noetl_compile.cli import main

CONNECTIONS = {"pg_local", "pg_prod", "http_api"}


def canonical(
    tool: str, workload: str = "base_url: http://x\n  pg_auth: pg_local", extra=""
) -> str:
    tool = textwrap.indent(textwrap.dedent(tool).strip("\n"), "      ")
    return (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t/t}\n"
        f"workload:\n  {workload}\nworkflow:\n  - step: start\n    tool:\n{tool}\n{extra}"
    )


def http(line: str) -> str:
    return canonical(f"kind: http\nurl: http://x\n{line}  #<")


def with_metadata(lines: str) -> str:
    return canonical("kind: python\ncode: result = 1").replace(
        "metadata: {name: t, path: t/t}\n", f"metadata:\n  name: t\n  path: t/t\n{lines}"
    )


def loop_case(line: str, collection: str = '"{{ workload.orders }}"', item: str = "order") -> str:
    """A loop step over `collection` binding `item`, whose input holds ``line``."""
    return (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t/t}\n"
        "workload:\n  orders: [{id: 1, total: 40}, {id: 2, total: 75}]\nworkflow:\n"
        f"  - step: start\n    loop:\n      in: {collection}\n      iterator: {item}\n"
        f"    tool:\n      kind: python\n      input:\n        {line}  #<\n"
        "      code: result = 1\n"
    )


# (case id, playbook text, code, misspelt word, meant name)
CASES = [
    # -- the compiler's playbook-level options (metadata.noetlc) -------------------------------
    ("noetlc-fuse", with_metadata("  noetlc:\n    fuze: true  #<\n"), "S103", "fuze", "fuse"),
    ("noetlc-key", with_metadata("  noetcl:  #<\n    fuse: true\n"), "S103", "noetcl", "noetlc"),
    # -- tool fields, per kind (C516) ------------------------------------------------------------
    ("http-method", http("mehtod: POST"), "C516", "mehtod", "method"),
    ("http-headers", http("hedaers: {A: b}"), "C516", "hedaers", "headers"),
    ("http-params", http("parms: {a: 1}"), "C516", "parms", "params"),
    ("http-verify", http("verfy_ssl: false"), "C516", "verfy_ssl", "verify_ssl"),
    (
        "http-redirects",
        http("follow_redirect: true"),
        "C516",
        "follow_redirect",
        "follow_redirects",
    ),
    ("http-timeout", http("timout: 5"), "C516", "timout", "timeout"),
    ("http-payload", http("payloda: {a: 1}"), "C516", "payloda", "payload"),
    ("http-uri", canonical("kind: http\nuri: http://x  #<"), "C502", "uri", "url"),
    ("http-uri-c516", canonical("kind: http\nuri: http://x  #<"), "C516", "uri", "url"),
    (
        "pg-command",
        canonical("kind: postgres\nauth: pg_local\ncomand: SELECT 1  #<\nquery: SELECT 1"),
        "C516",
        "comand",
        "command",
    ),
    (
        "pg-auth",
        canonical("kind: postgres\nauht: pg_local  #<\nauth: pg_local\nquery: SELECT 1"),
        "C516",
        "auht",
        "auth",
    ),
    (
        "pg-query",
        canonical("kind: postgres\nauth: pg_local\nquery: SELECT 1\nquerry: SELECT 2  #<"),
        "C516",
        "querry",
        "query",
    ),
    (
        "pg-pool",
        canonical("kind: postgres\nauth: pg_local\nquery: SELECT 1\npoool: true  #<"),
        "C516",
        "poool",
        "pool",
    ),
    (
        "duckdb-database",
        canonical("kind: duckdb\nquery: SELECT 1\ndatabse: x.duckdb  #<"),
        "C516",
        "databse",
        "database",
    ),
    (
        "duckdb-commands",
        canonical("kind: duckdb\nquery: SELECT 1\ncommnds: [SELECT 1]  #<"),
        "C516",
        "commnds",
        "commands",
    ),
    (
        "python-libs",
        canonical("kind: python\ncode: result = 1\nlib: {np: numpy}  #<"),
        "C516",
        "lib",
        "libs",
    ),
    (
        "python-input",
        canonical("kind: python\ncode: result = 1\nimput: {a: 1}  #<"),
        "C516",
        "imput",
        "input",
    ),
    (
        "python-code-b64",
        canonical("kind: python\ncode: result = 1\ncode_b46: eA==  #<"),
        "C516",
        "code_b46",
        "code_b64",
    ),
    (
        "playbook-return",
        canonical("kind: playbook\npath: t/t\nreturn_stp: end  #<"),
        "C516",
        "return_stp",
        "return_step",
    ),
    (
        "playbook-payload",
        canonical("kind: playbook\npath: t/t\npaylaod: {a: 1}  #<"),
        "C516",
        "paylaod",
        "payload",
    ),
    (
        "transfer-source",
        canonical("kind: transfer\ntarget: {tool: duckdb}\nsorce: {tool: postgres}  #<"),
        "C516",
        "sorce",
        "source",
    ),
    (
        "transfer-chunk",
        canonical("kind: transfer\nsource: {}\ntarget: {}\nchunksize: 5  #<"),
        "C516",
        "chunksize",
        "chunk_size",
    ),
    (
        "secrets-provider",
        canonical("kind: secrets\nname: tok\nprovder: airflow  #<"),
        "C516",
        "provder",
        "provider",
    ),
    ("noop-name", canonical("kind: noop\nnmae: x  #<"), "C516", "nmae", "name"),
    ("common-desc", canonical("kind: noop\ndecs: x  #<"), "C516", "decs", "desc"),
    (
        "gate-subject",
        canonical("kind: gate\ngate: approve\nsubjet: Go?  #<"),
        "C510",
        "subjet",
        "subject",
    ),
    (
        "quantum-shots",
        canonical("kind: quantum\ncircuit: 'OPENQASM 3.0;'\nshot: 10  #<"),
        "C511",
        "shot",
        "shots",
    ),
    # -- names after workload. / ctx. / vars. (T307), bare names ---------------------------------
    (
        "workload-path",
        http("headers: {u: '{{ workload.base_urll }}'}"),
        "T307",
        "base_urll",
        "base_url",
    ),
    ("ctx-path", http("headers: {u: '{{ ctx.base_urll }}'}"), "T307", "base_urll", "base_url"),
    ("bare-name", http("headers: {u: '{{ base_urll }}'}"), "T307", "base_urll", "base_url"),
    ("workload-pg", http("headers: {u: '{{ workload.pg_aut }}'}"), "T307", "pg_aut", "pg_auth"),
    (
        "ctx-written",
        canonical(
            "kind: python\ncode: result = 1",
            extra="    set: {ctx.total_rows: 1}\n    next: {arcs: [{step: b}]}\n  - step: b\n"
            "    tool: {kind: python, input: {n: '{{ ctx.total_rowz }}'}, code: result = n}  #<\n",
        ),
        "T307",
        "total_rowz",
        "total_rows",
    ),
    (
        "vars-path",
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t/t}\nworkflow:\n"
        "  - step: start\n    tool: {kind: python, code: 'result = 1'}\n"
        "    vars: {count: '{{ result }}'}\n    next: [{step: b}]\n"
        "  - step: b\n    tool: {kind: python, args: {n: '{{ vars.cuont }}'}, code: result = n}  #<\n",
        "T307",
        "cuont",
        "count",
    ),
    # -- a misspelt `next` drops the step's edges: an error (S118) -------------------------------
    (
        "next-key",
        canonical(
            "kind: noop",
            extra="    nxt: {arcs: [{step: b}]}  #<\n  - step: b\n    tool: {kind: noop}\n",
        ),
        "S118",
        "nxt",
        "next",
    ),
    # -- loop-scoped names (T307): iter.*, loop.*, the fields of the loop's items ----------------
    ("iter-iterator", loop_case('a: "{{ iter.ordr }}"'), "T307", "ordr", "order"),
    ("iter-index", loop_case('a: "{{ iter._indx }}"'), "T307", "_indx", "_index"),
    ("loop-field", loop_case('a: "{{ loop.indx }}"'), "T307", "indx", "index"),
    ("item-field", loop_case('a: "{{ order.totl }}"'), "T307", "totl", "total"),
    ("iter-item-field", loop_case('a: "{{ iter.order.totl }}"'), "T307", "totl", "total"),
    (
        "item-field-literal-list",
        loop_case('a: "{{ city.nmae }}"', collection="[{name: Paris}, {name: Oslo}]", item="city"),
        "T307",
        "nmae",
        "name",
    ),
    # -- filters (T304) ----------------------------------------------------------------------------
    (
        "filter-uppercase",
        http("headers: {u: '{{ base_url | uppercase }}'}"),
        "T304",
        "uppercase",
        "upper",
    ),
    (
        "filter-lowercase",
        http("headers: {u: '{{ base_url | lowercase }}'}"),
        "T304",
        "lowercase",
        "lower",
    ),
    (
        "filter-to-json",
        http("headers: {u: '{{ base_url | to_json }}'}"),
        "T304",
        "to_json",
        "tojson",
    ),
    ("filter-length", http("headers: {u: '{{ base_url | lenght }}'}"), "T304", "lenght", "length"),
    (
        "filter-default",
        http("headers: {u: '{{ base_url | defualt(1) }}'}"),
        "T304",
        "defualt",
        "default",
    ),
    ("filter-len", http("headers: {u: '{{ base_url | len }}'}"), "T304", "len", "length"),
    ("filter-strip", http("headers: {u: '{{ base_url | strip }}'}"), "T304", "strip", "trim"),
    # -- connections (R203), with --connections ------------------------------------------------
    (
        "auth-literal",
        canonical("kind: postgres\nauth: pg_lcal  #<\nquery: SELECT 1"),
        "R203",
        "pg_lcal",
        "pg_local",
    ),
    (
        "auth-templated-workload",
        canonical(
            "kind: postgres\nauth: '{{ pg_auth }}'  #<\nquery: SELECT 1",
            workload="pg_auth: pg_locl",
        ),
        "R203",
        "'{{ pg_auth }}'",
        "pg_local",
    ),
    (
        "auth-templated-default",
        canonical("kind: postgres\nauth: \"{{ other | default('pg_prd') }}\"  #<\nquery: SELECT 1"),
        "R203",
        '"{{ other',
        "pg_prod",
    ),
    (
        "auth-case-sink",
        canonical(
            "kind: python\ncode: result = 1",
            extra="    case:\n      - when: '{{ event.name == \"call.done\" }}'\n        then:\n"
            "          sink: {tool: {kind: postgres, auth: pg_locla, table: t}}  #<\n",
        ),
        "R203",
        "pg_locla",
        "pg_local",
    ),
    (
        "auth-case-sink-templated",
        canonical(
            "kind: python\ncode: result = 1",
            workload="pg_auth: pg_prdo",
            extra="    case:\n      - when: '{{ event.name == \"call.done\" }}'\n        then:\n"
            "          sink: {tool: {kind: postgres, auth: '{{ workload.pg_auth }}', table: t}}  #<\n",
        ),
        "R203",
        "'{{ workload.pg_auth }}'",
        "pg_prod",
    ),
    (
        "auth-pipeline-task",
        canonical("kind: python\ncode: result = 1", extra="").replace(
            "    tool:\n      kind: python\n      code: result = 1\n",
            "    tool:\n      - name: a\n        kind: postgres\n        auth: http_apj  #<\n"
            "        query: SELECT 1\n",
        ),
        "R203",
        "http_apj",
        "http_api",
    ),
]


@pytest.mark.parametrize(
    ("text", "code", "word", "meant"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_typo_is_reported_at_the_word_with_the_name_meant(
    tmp_path: Path, text, code, word, meant
):
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    marked = [i for i, line in enumerate(text.splitlines(), 1) if line.endswith("#<")]
    assert len(marked) == 1, text
    line_text = text.splitlines()[marked[0] - 1]
    results, problems = check_paths([str(path)], connections=CONNECTIONS)
    assert not problems
    found = [
        d
        for d in results[0].diagnostics
        if d.code == code and (f"mean {meant!r}" in d.message or f"mean `{meant}`" in d.message)
    ]
    assert found, [f"{d.code} {d.message}" for d in results[0].diagnostics]
    diagnostic = found[0]
    assert (diagnostic.position.line, diagnostic.position.col) == (
        marked[0],
        line_text.index(word) + 1,
    ), diagnostic
    assert f"did you mean {meant!r}" in diagnostic.message or f"did you mean `{meant}`" in (
        diagnostic.message
    ), diagnostic.message


RUN_CASES = [
    ("set", ["--set", "amont=50"], "--set amont", "amount"),
    ("set-case", ["--set", "Amount=5"], "--set Amount", "amount"),
    ("conf", ["--conf", '{"regoin": "us"}'], "--conf regoin", "region"),
    ("set-second", ["--set", "amount=5", "--set", "regon=us"], "--set regon", "region"),
]


@pytest.mark.parametrize(
    ("args", "where", "meant"), [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES]
)
def test_a_run_override_of_an_undeclared_key_is_a_usage_error(capsys, args, where, meant):
    """Refused before anything starts (no Airflow import): exit 2, the option and key, the key meant."""
    code = main(["run", "playbooks/branching.yaml", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert f"noetlc: error: {where}: " in err and f"did you mean {meant!r}?" in err
    assert "--set-new" in err  # the explicit way to add a key


def test_the_suite_has_at_least_40_cases():
    assert len(CASES) + len(RUN_CASES) >= 40


def test_loop_scoped_names_that_resolve_are_not_reported(tmp_path: Path):
    """The iterator, what an iteration adds, the loop's fields, an `iter.` variable a step sets
    and the items' own keys: none is reported."""
    path = tmp_path / "fine.yaml"
    line = (
        'a: "{{ iter.order.id }} {{ order.total }} {{ iter._index }} {{ iter._last }} '
        '{{ loop.index }} {{ loop.first }} {{ loop.length }} {{ loop_index }} {{ iter.seen }}"'
    )
    path.write_text(loop_case(line).replace("  #<", "") + "    set: {iter.seen: 1}\n")
    results, problems = check_paths([str(path)])
    assert not problems
    assert [f"{d.code} {d.message}" for d in results[0].diagnostics if d.code[0] == "T"] == []
