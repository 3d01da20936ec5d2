"""SQL text shared by the SQL tools: aliases, statement splitting, markers, JSON-safe values."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import ipaddress
import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_plugin.hooks.sqltext import (
    SqlConfigError,
    bind_named,
    first_keyword,
    has_keyword,
    leading_keyword,
    positional_markers,
    quote_ident,
    quote_table,
    split_statements,
    table_parts,
    tokens,
)
from airflow_plugin.hooks.values import jsonable_row, jsonable_value
from airflow_plugin.tools.registry import ToolNotAvailable
from airflow_plugin.tools.sql import (
    SINK_ALIASES,
    ResultLimits,
    collect_rows,
    read_sql,
    result_limits,
)

# --------------------------------------------------------------------------------------------
# Splitting
# --------------------------------------------------------------------------------------------

SPLIT_CASES = [
    ("one statement", "SELECT 1", ["SELECT 1"]),
    ("trailing semicolon and blanks", "  SELECT 1 ;  \n", ["SELECT 1"]),
    ("two statements", "SELECT 1; SELECT 2;", ["SELECT 1", "SELECT 2"]),
    ("empty statements dropped", ";; SELECT 1;;\n;", ["SELECT 1"]),
    ("semicolon in a string", "SELECT 'a;b'; SELECT 2", ["SELECT 'a;b'", "SELECT 2"]),
    ("doubled quote in a string", "SELECT 'it''s;x'; SELECT 2", ["SELECT 'it''s;x'", "SELECT 2"]),
    (
        "backslash is plain in a standard string",
        "SELECT 'a\\'; SELECT 2",
        ["SELECT 'a\\'", "SELECT 2"],
    ),
    (
        "backslash escapes in an E string",
        "SELECT E'a\\';b'; SELECT 2",
        ["SELECT E'a\\';b'", "SELECT 2"],
    ),
    (
        "lower-case e prefix",
        "SELECT e'x\\'y;'; SELECT 2",
        ["SELECT e'x\\'y;'", "SELECT 2"],
    ),
    (
        "an identifier ending in e is not a prefix",
        "SELECT name'x;'; SELECT 2",
        ["SELECT name'x;'", "SELECT 2"],
    ),
    (
        "double-quoted identifier",
        'SELECT 1 AS "a;b"; SELECT 2',
        ['SELECT 1 AS "a;b"', "SELECT 2"],
    ),
    (
        "doubled quote in an identifier",
        'SELECT 1 AS "x"";y"; SELECT 2',
        ['SELECT 1 AS "x"";y"', "SELECT 2"],
    ),
    (
        "dollar quoting",
        "CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql; SELECT f()",
        ["CREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql", "SELECT f()"],
    ),
    (
        "tagged dollar quoting with $$ inside",
        "DO $body$ BEGIN PERFORM 'x;'; RAISE NOTICE '$$;'; END $body$; SELECT 1",
        ["DO $body$ BEGIN PERFORM 'x;'; RAISE NOTICE '$$;'; END $body$", "SELECT 1"],
    ),
    (
        "positional parameter is not a dollar quote",
        "SELECT $1; SELECT 2",
        ["SELECT $1", "SELECT 2"],
    ),
    (
        "dollar inside an identifier is not a quote",
        "SELECT a$b$c FROM t; SELECT 2",
        ["SELECT a$b$c FROM t", "SELECT 2"],
    ),
    ("line comment", "SELECT 1; -- a; b\nSELECT 2", ["SELECT 1", "-- a; b\nSELECT 2"]),
    ("comment-only statement dropped", "SELECT 1; -- done;\n", ["SELECT 1"]),
    ("block comment", "SELECT /* ; */ 1; SELECT 2", ["SELECT /* ; */ 1", "SELECT 2"]),
    (
        "nested block comment",
        "SELECT /* a /* ; */ ; */ 1; SELECT 2",
        ["SELECT /* a /* ; */ ; */ 1", "SELECT 2"],
    ),
    ("block comment only", "/* nothing; here */ ;", []),
    ("quote inside a comment", "SELECT 1; -- it's\nSELECT 2", ["SELECT 1", "-- it's\nSELECT 2"]),
    ("unterminated string is kept", "SELECT 'abc; SELECT 2", ["SELECT 'abc; SELECT 2"]),
    ("only whitespace", " \n\t ", []),
    (
        "corpus sink statement",
        'INSERT INTO t (data) VALUES (\'{"a": "x;y"}\'::jsonb);\n',
        ['INSERT INTO t (data) VALUES (\'{"a": "x;y"}\'::jsonb)'],
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in SPLIT_CASES], ids=[c[0] for c in SPLIT_CASES]
)
def test_split_statements(text, expected):
    assert split_statements(text) == expected


@given(st.text(alphabet="ab;'\"$e-/*\\\n ", max_size=60))
def test_tokens_give_the_text_back(text):
    assert "".join(value for _, value in tokens(text)) == text


@given(
    st.lists(
        st.sampled_from(["SELECT 'a;b'", 'SELECT "x;"', "SELECT $$;$$", "SELECT 1"]),
        min_size=1,
        max_size=5,
    )
)
def test_split_is_inverse_of_join(statements):
    assert split_statements(";\n".join(statements)) == statements


def _split_by_tokens(text):
    """The statements as the token stream delimits them (what the plain-split shortcut of
    split_statements must agree with)."""
    statements, current = [], []
    for kind, value in [*tokens(text), ("semicolon", ";")]:
        if kind != "semicolon":
            current.append((kind, value))
            continue
        if any(k != "comment" and v.strip() for k, v in current):
            statements.append("".join(v for _, v in current).strip())
        current = []
    return statements


@given(st.text(alphabet="ab1 ;\n\t()-/*'\"$", max_size=60))
def test_split_shortcut_agrees_with_the_tokenizer(text):
    # Texts without quotes, dollars or comment markers take a plain split; others the tokenizer.
    assert split_statements(text) == _split_by_tokens(text)


@pytest.mark.parametrize(
    ("statement", "head", "first"),
    [
        ("INSERT INTO t VALUES (1)", "INSERT", ("INSERT",)),
        ("  \n vacuum t", "VACUUM", ("VACUUM",)),
        ("-- c\nCREATE DATABASE x", None, ("CREATE",)),
        ("(SELECT 1)", None, ("SELECT",)),
        ("", None, ()),
    ],
)
def test_leading_keyword_is_first_keyword_or_none(statement, head, first):
    assert leading_keyword(statement) == head
    assert head is None or (head,) == first_keyword(statement)
    assert first_keyword(statement) == first


# --------------------------------------------------------------------------------------------
# Aliases
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alias", ["query", "queries", "command", "commands", "cmd", "cmds"])
def test_every_inline_alias_string_and_list(alias):
    assert read_sql({alias: "SELECT 1; SELECT 2"}) == ["SELECT 1", "SELECT 2"]
    assert read_sql({alias: ["SELECT 1;", "SELECT 2; SELECT 3"]}) == [
        "SELECT 1",
        "SELECT 2",
        "SELECT 3",
    ]


@pytest.mark.parametrize("alias", ["command_b64", "commands_b64", "query_b64"])
def test_every_base64_alias(alias):
    encoded = base64.b64encode("SELECT 'é'; SELECT 2".encode()).decode()
    assert read_sql({alias: encoded}) == ["SELECT 'é'", "SELECT 2"]


def test_priority_is_script_then_base64_then_inline(tmp_path):
    script = tmp_path / "q.sql"
    script.write_text("SELECT 'script';")
    b64 = base64.b64encode(b"SELECT 'b64'").decode()
    both = {"query": "SELECT 'inline'", "command_b64": b64}
    assert read_sql(both) == ["SELECT 'b64'"]
    assert read_sql({**both, "script": {"uri": str(script), "source": {"type": "file"}}}) == [
        "SELECT 'script'"
    ]
    # the inline aliases in NoETL's order: query before command
    assert read_sql({"command": "SELECT 'c'", "query": "SELECT 'q'"}) == ["SELECT 'q'"]


def test_base64_and_script_sql_is_rendered_with_the_context(tmp_path):
    script = tmp_path / "q.sql"
    script.write_text("SELECT {{ n }}; SELECT '{{ n * 2 }}'")
    config = {"script": {"uri": str(script), "source": {"type": "file"}}}
    assert read_sql(config, context={"n": 7}) == ["SELECT 7", "SELECT '14'"]
    # lenient, like every tool config: text that cannot be rendered is kept as written
    assert read_sql(config, context={}) == ["SELECT {{ n }}", "SELECT '{{ n * 2 }}'"]
    encoded = base64.b64encode(b"SELECT {{ n }}").decode()
    assert read_sql({"command_b64": encoded}, context={"n": 3}) == ["SELECT 3"]
    # inline SQL was rendered by the runtime already: never a second time
    assert read_sql({"query": "SELECT '{{ n }}'"}, context={"n": 1}) == ["SELECT '{{ n }}'"]


def test_sink_aliases_only_when_asked():
    with pytest.raises(SqlConfigError, match="no SQL given"):
        read_sql({"statement": "SELECT 1"})
    assert read_sql({"statement": "SELECT 1"}, extra_aliases=SINK_ALIASES) == ["SELECT 1"]
    assert read_sql({"sql": "SELECT 2"}, extra_aliases=SINK_ALIASES) == ["SELECT 2"]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "no SQL given: expected one of script, command_b64"),
        ({"query": ""}, "no SQL given"),
        ({"command_b64": "not base64!"}, "`command_b64` is not valid base64"),
        ({"query": 42}, "`query` must be SQL text"),
        ({"commands": ["SELECT 1", 2]}, r"`commands\[1\]` must be SQL text"),
        ({"script": {"uri": "/nonexistent/x.sql", "source": {"type": "file"}}}, "cannot read SQL"),
    ],
)
def test_sql_config_errors(config, message):
    with pytest.raises(SqlConfigError, match=message):
        read_sql(config)


def test_script_from_cloud_storage_is_not_available():
    with pytest.raises(ToolNotAvailable, match="source type 's3'"):
        read_sql({"script": {"uri": "s3://b/x.sql", "source": {"type": "s3"}}})


def test_comment_only_sql_gives_no_statements():
    assert read_sql({"query": "-- nothing to do\n/* really */"}) == []


# --------------------------------------------------------------------------------------------
# Classification, markers, identifiers
# --------------------------------------------------------------------------------------------


def test_first_keyword_and_has_keyword_skip_comments_and_strings():
    assert first_keyword("-- x\n/* y */ create   DATABASE foo", 2) == ("CREATE", "DATABASE")
    assert has_keyword("INSERT INTO t VALUES (1) RETURNING id", "returning")
    assert not has_keyword("INSERT INTO t VALUES ('returning') -- returning", "RETURNING")


def test_bind_named_pyformat():
    sql, used = bind_named(
        "INSERT INTO t VALUES (:id, :email, ':id', '50%', x::int) -- :id",
        ["id", "email"],
        "pyformat",
    )
    assert used == ["id", "email"]
    assert sql == ("INSERT INTO t VALUES (%(id)s, %(email)s, ':id', '50%%', x::int) -- :id")


def test_bind_named_dollar_and_untouched_without_markers():
    sql, used = bind_named("SELECT :a, :b, :a", ["a"], "dollar")
    assert (sql, used) == ("SELECT $a, :b, $a", ["a"])
    assert bind_named("SELECT '50%'", ["a"], "pyformat") == ("SELECT '50%'", [])


def test_positional_markers():
    assert positional_markers("INSERT INTO t VALUES (%s, '%s', %s)", "qmark") == (
        "INSERT INTO t VALUES (?, '%s', ?)"
    )
    assert positional_markers("VALUES (?, '?')", "format") == "VALUES (%s, '?')"


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("id", '"id"'),
        ("ID", '"id"'),  # PostgreSQL folds the unquoted name NoETL wrote
        ("My Column", '"My Column"'),
        ('a"; DROP TABLE t; --', '"a""; DROP TABLE t; --"'),
    ],
)
def test_quote_ident(name, quoted):
    assert quote_ident(name) == quoted


def test_table_names():
    assert table_parts("public.iterator_save_test") == ["public", "iterator_save_test"]
    assert quote_table("public.Users") == '"public"."users"'
    assert quote_table('"My Schema"."a.b"') == '"My Schema"."a.b"'
    assert quote_table("t; DROP TABLE x") == '"t; DROP TABLE x"'
    for bad in ["", "a.", ".a", '"open', "a.b.c.d"]:
        with pytest.raises(SqlConfigError):
            quote_table(bad)


# --------------------------------------------------------------------------------------------
# JSON-safe values
# --------------------------------------------------------------------------------------------

UTC2 = dt.timezone(dt.timedelta(hours=2))

JSON_CASES = [
    (decimal.Decimal(12), 12),
    (decimal.Decimal("12.30"), 12.3),
    (decimal.Decimal("NaN"), "NaN"),
    (decimal.Decimal("-Infinity"), "-Infinity"),
    (float("inf"), "Infinity"),
    (dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC2), "2024-01-02T03:04:05+02:00"),
    (dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05"),
    (dt.date(2024, 1, 2), "2024-01-02"),
    (dt.time(12, 0, tzinfo=UTC2), "12:00:00+02:00"),
    (
        dt.timedelta(days=32, hours=3, minutes=4, seconds=5, microseconds=500000),
        "32 days 03:04:05.5",
    ),
    (dt.timedelta(seconds=-1), "-00:00:01"),
    (dt.timedelta(days=-3), "-3 days"),
    (dt.timedelta(0), "00:00:00"),
    (uuid.UUID("12345678-1234-5678-1234-567812345678"), "12345678-1234-5678-1234-567812345678"),
    (b"\xde\xad\xbe\xef", "\\xdeadbeef"),
    (memoryview(b"\x01"), "\\x01"),
    (ipaddress.ip_address("10.0.0.1"), "10.0.0.1"),
    ({"a": [decimal.Decimal("1.5"), (1, 2)]}, {"a": [1.5, [1, 2]]}),
    ({1: "x"}, {"1": "x"}),
]


@pytest.mark.parametrize(
    # Ids by position and type: repr() of a memoryview holds its address, which differs between
    # xdist workers and breaks collection.
    ("value", "expected"),
    JSON_CASES,
    ids=[f"{i}-{type(c[0]).__name__}" for i, c in enumerate(JSON_CASES)],
)
def test_jsonable_value(value, expected):
    converted = jsonable_value(value)
    assert converted == expected
    json.dumps(converted, allow_nan=False)


def test_jsonable_row_keeps_shape():
    assert jsonable_row({"n": decimal.Decimal(1)}) == {"n": 1}
    assert jsonable_row((decimal.Decimal("1.5"), None)) == [1.5, None]


def test_collect_rows_caps_rows_and_bytes(monkeypatch):
    data = [(i, "x" * 100) for i in range(10)]

    def fetcher():
        pending = list(data)

        def fetchmany(size):
            batch = pending[:size]
            del pending[:size]
            return batch

        return fetchmany

    rows, cut = collect_rows(fetcher(), ["i", "s"], ResultLimits(max_rows=0, max_bytes=0))
    assert len(rows) == 10 and cut is None
    rows, cut = collect_rows(fetcher(), ["i", "s"], ResultLimits(max_rows=4, max_bytes=0))
    assert [r["i"] for r in rows] == [0, 1, 2, 3] and cut["reason"] == "max_rows"
    rows, cut = collect_rows(fetcher(), ["i", "s"], ResultLimits(max_rows=10, max_bytes=0))
    assert len(rows) == 10 and cut is None  # exactly at the limit is not a cut
    rows, cut = collect_rows(fetcher(), ["i", "s"], ResultLimits(max_rows=0, max_bytes=400))
    assert len(rows) == 3 and cut["reason"] == "max_bytes"
    monkeypatch.setenv("NOETL_POSTGRES_MAX_RESULT_ROWS", "7")
    monkeypatch.setenv("NOETL_POSTGRES_MAX_RESULT_BYTES", "oops")
    assert result_limits("POSTGRES") == ResultLimits(max_rows=7, max_bytes=1024 * 1024)
