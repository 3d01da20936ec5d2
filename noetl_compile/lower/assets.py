"""Tables as Airflow Assets: which tables a step writes (its task's ``outlets``) and reads.

A table is declared only when the compiler knows it for every run of the default workload:

* **writes**: a step ``sink`` with ``table`` (or SQL in ``statement``/``sql``/``command``...);
  a ``postgres``/``duckdb`` tool whose inline SQL (``command``, ``query``... not base64, not a
  script file) writes it (``INSERT INTO``, ``UPDATE``, ``DELETE FROM``, ``MERGE INTO``,
  ``CREATE TABLE`` but not a temporary one, ``TRUNCATE``, ``COPY t FROM``); a ``transfer``
  target ``table``;
* **reads** (the task's ``inlets``, and for ``noetlc compile --schedule-on-assets``):
  ``FROM``/``JOIN`` of those tools' SQL and of a transfer source query, ``COPY t TO``.

The runtime reports both to OpenLineage when its provider is installed
(``airflow_plugin/operators/lineage.py``), mapping each URI to the dataset naming spec.

Where a table lives is part of its identity, and a playbook names it only by its connection
(postgres ``auth``, an Airflow Connection id) or file (duckdb ``database``); the host is in the
connection, known at run time, so Airflow's ``postgres://host:port/db/schema/table`` scheme (the
postgres provider refuses one without a host) cannot be written at compile time. The URI is
``x-noetl://<kind>/<connection or database file>/<schema>/<table>``, each part percent-encoded;
an unquoted identifier is lower-cased (as PostgreSQL and DuckDB fold it), the schema defaults
to ``public`` (postgres) or ``main`` (duckdb). A ``{{ workload.key }}`` (canonical: ``{{ key }}``)
connection is resolved from the workload's default. Not declared: a table, connection or file
given by any other template (known only at run time), a duckdb table in ``:memory:`` or in the
execution's own file (no ``database``), other tool kinds.

The SQL scan is a hand-written tokenizer, linear in the text: strings, comments, dollar quotes
and ``{{ }}`` tags are skipped as wholes; a name holding a tag is not a known table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

from .ir import Unit

__all__ = ["sql_tables", "step_tables", "table_uri", "unit_assets"]

# An ``x-`` scheme is Airflow's mark of a custom scheme: Airflow skips the semantic normalisation
# it runs for provider schemes, and with it the providers manager's discovery that an unknown
# scheme costs on the first Asset of every DAG file parse (~150 ms measured).
SCHEME = "x-noetl"
_SQL_KINDS = ("postgres", "duckdb")
_DEFAULT_SCHEMA = {"postgres": "public", "duckdb": "main"}
# NoETL's SQL tool aliases read inline (tools/sql.py INLINE_ALIASES), plus the sink's own.
_INLINE_SQL = ("query", "queries", "command", "commands", "cmd", "cmds")
_SINK_SQL = ("statement", "sql")
# A word before `(` that opens a group, not a function call (its FROM is a table's).
_NOT_CALLS = frozenset(
    [
        "as",
        "in",
        "exists",
        "from",
        "join",
        "any",
        "all",
        "some",
        "values",
        "select",
        "where",
        "and",
        "or",
        "not",
        "on",
        "using",
        "with",
        "union",
        "intersect",
        "except",
        "lateral",
        "into",
        "table",
    ]
)
_TEMPLATE = object()  # a token standing for a {{ }} / {% %} tag


def _tokens(sql: str) -> Iterator[tuple[str, Any]]:
    """(kind, value): word (lower-cased), ident (quoted, as written), tag, or the character."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif c == "-" and sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "/" and sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "{" and i + 1 < n and sql[i + 1] in "{%#":
            close = {"{": "}}", "%": "%}", "#": "#}"}[sql[i + 1]]
            j = sql.find(close, i + 2)
            i = n if j < 0 else j + 2
            yield "tag", _TEMPLATE
        elif c == "'":
            j = i + 1
            while True:  # '' inside a string is a quote; each character is looked at once
                j = sql.find("'", j)
                if j < 0 or not sql.startswith("''", j):
                    break
                j += 2
            i = n if j < 0 else j + 1
            yield "string", None
        elif c == '"':
            j = i + 1
            while True:  # "" inside a quoted name is a quote
                j = sql.find('"', j)
                if j < 0 or not sql.startswith('""', j):
                    break
                j += 2
            yield "ident", sql[i + 1 : j].replace('""', '"') if j >= 0 else None
            i = n if j < 0 else j + 1
        elif c == "$":
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            if j < n and sql[j] == "$" and not sql[i + 1 : j][:1].isdigit():
                tag = sql[i : j + 1]
                end = sql.find(tag, j + 1)
                i = n if end < 0 else end + len(tag)
                yield "string", None
            else:
                i = j
                yield "other", "$"
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] in "_$"):
                j += 1
            # `raw_{{ day }}`, `{{ p }}_t`: a word glued to a tag is part of a run-time name.
            glued = sql.startswith(("{{", "{%"), j) or sql[max(i - 2, 0) : i] in ("}}", "%}")
            yield ("tag", _TEMPLATE) if glued else ("word", sql[i:j].lower())
            i = j
        else:
            i += 1
            yield c, c


def _name(tokens: list[tuple[str, Any]], at: int) -> tuple[list[str] | None, int]:
    """A possibly qualified name starting at ``at`` -> (parts or None when unknown, next index)."""
    parts: list[str] | None = []
    i = at
    while i < len(tokens):
        kind, value = tokens[i]
        if kind == "word" or kind == "ident" and value:
            part = value
        elif kind == "tag":
            part = None
        else:
            break
        if part is None:
            parts = None
        elif parts is not None:
            parts.append(part)
        i += 1
        if i < len(tokens) and tokens[i][0] == ".":
            i += 1
            continue
        break
    return (parts or None), i


def sql_tables(sql: str) -> tuple[list[list[str]], list[list[str]]]:
    """(written, read) table names of ``sql``, each a list of name parts, in order of mention."""
    tokens = list(_tokens(sql))
    writes: list[list[str]] = []
    reads: list[list[str]] = []
    ctes: set[str] = set()
    calls: list[bool] = []  # per open parenthesis: whether it is a function call's
    open_calls = 0  # how many of them are (counted, so a FROM costs O(1) however deep)
    temporary = False  # the statement so far says TEMP/TEMPORARY
    previous: tuple[str, Any] = (";", ";")
    statement: list[str] = []  # the words of the current statement so far (leading keywords)

    def word(i: int) -> str | None:
        return tokens[i][1] if i < len(tokens) and tokens[i][0] == "word" else None

    for i, (kind, value) in enumerate(tokens):
        if kind == ";":
            statement, calls, open_calls, temporary = [], [], 0, False
        elif kind == "(":
            calls.append(previous[0] == "word" and previous[1] not in _NOT_CALLS)
            open_calls += calls[-1]
        elif kind == ")":
            if calls:
                open_calls -= calls.pop()
        elif kind == "word":
            statement.append(value)
            temporary = temporary or value in ("temp", "temporary")
            if (
                value == "as"
                and previous[0] in ("word", "ident")
                and tokens[i + 1 : i + 2] == [("(", "(")]
            ):
                ctes.add(str(previous[1]))
            target: list[list[str]] | None = None
            at = i + 1
            if (
                value == "into"
                and previous[1] in ("insert", "merge")
                or value == "update"
                and previous[0] != "word"
                or value == "from"
                and previous[1] == "delete"
            ):
                target = writes
            elif value == "truncate":
                target = writes
                at += word(at) == "table"
            elif value == "table" and "create" in statement[:1] and not temporary:
                target = writes
                if word(at) == "if" and word(at + 1) == "not" and word(at + 2) == "exists":
                    at += 3
            elif value == "copy" and previous[0] == ";":
                parts, after = _name(tokens, at)
                direction = word(after)
                if parts and direction in ("from", "to"):
                    (writes if direction == "from" else reads).append(parts)
            elif value in ("from", "join") and not open_calls:
                target = reads
            if target is not None:
                if word(at) == "only":
                    at += 1
                parts, after = _name(tokens, at)
                # `FROM f(...)` calls a function; `INSERT INTO t (...)` lists columns.
                is_call = after < len(tokens) and tokens[after][0] == "("
                if parts and not (is_call and target is reads):
                    target.append(parts)
        previous = (kind, value)
    reads = [p for p in reads if not (len(p) == 1 and p[0] in ctes)]
    return writes, reads


def _resolve(value: Any, params: Mapping[str, Any], dialect: str) -> str | None:
    """A plain string, or ``{{ workload.key }}`` (``{{ key }}`` in canonical) from its default."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if "{{" not in text and "{%" not in text:
        return text
    if not (text.startswith("{{") and text.endswith("}}") and text.count("{{") == 1):
        return None
    expr = text[2:-2].strip()
    key = expr[len("workload.") :] if expr.startswith("workload.") else None
    if key is None and dialect == "canonical":
        key = expr
    if key is None or not key.isidentifier():
        return None
    default = params.get(key)
    return _resolve(default, {}, dialect) if isinstance(default, str) else None


def table_uri(kind: str, location: str, parts: list[str], quoted: bool = False) -> str | None:
    """``x-noetl://<kind>/<location>/<schema>/<table>`` (see the module docstring)."""
    if not parts or len(parts) > 3:
        return None
    schema = parts[-2] if len(parts) >= 2 else _DEFAULT_SCHEMA[kind]
    segments = [kind, location, schema, parts[-1]]
    return f"{SCHEME}://" + "/".join(quote(s, safe="") for s in segments)


def _table_name(text: str) -> list[str] | None:
    """A sink's or transfer's ``table`` (``schema.table``; a double-quoted part keeps its case)."""
    if "{{" in text or "{%" in text:
        return None
    tokens = list(_tokens(text))
    parts, after = _name(tokens, 0)
    return parts if parts and after == len(tokens) else None


def _location(kind: str, config: Mapping[str, Any], params: Mapping[str, Any], dialect: str):
    if kind == "postgres":
        for key in ("auth", "credential", "credentials"):
            if config.get(key) not in (None, "", {}):
                return _resolve(config.get(key), params, dialect)
        return None
    database = _resolve(config.get("database"), params, dialect)
    return None if database in (None, ":memory:") else database


def _kind(config: Mapping[str, Any]) -> str:
    for key in ("kind", "type", "tool"):
        value = config.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().lower()
    return ""


def _sql_texts(config: Mapping[str, Any], aliases: tuple[str, ...]) -> Iterator[str]:
    for alias in aliases:
        value = config.get(alias)
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, str))


class _Found:
    def __init__(self, params: Mapping[str, Any], dialect: str) -> None:
        self.params, self.dialect = params, dialect
        self.writes: list[str] = []
        self.reads: list[str] = []

    def add(self, into: list[str], kind: str, location: str | None, parts: list[str] | None):
        if not location or not parts:
            return
        uri = table_uri(kind, location, parts)
        if uri and uri not in into:
            into.append(uri)

    def sql(self, kind: str, config: Mapping[str, Any], aliases: tuple[str, ...], reads=True):
        location = _location(kind, config, self.params, self.dialect)
        if not location:
            return
        for text in _sql_texts(config, aliases):
            writes, found_reads = sql_tables(text)
            for parts in writes:
                self.add(self.writes, kind, location, parts)
            if reads:
                for parts in found_reads:
                    self.add(self.reads, kind, location, parts)

    def sink(self, spec: Mapping[str, Any]) -> None:
        destination = spec.get("tool", spec.get("storage"))
        dest = destination if isinstance(destination, Mapping) else {}
        kind = (
            destination.strip().lower()
            if isinstance(destination, str)
            else _kind(dest) or _kind({k: v for k, v in spec.items() if k != "tool"})
        )
        if kind not in _SQL_KINDS:
            return
        config = {**{k: v for k, v in spec.items() if k not in ("tool", "storage")}, **dest}
        table = config.get("table")
        if isinstance(table, str):
            location = _location(kind, config, self.params, self.dialect)
            self.add(self.writes, kind, location, _table_name(table))
        else:
            self.sql(kind, config, _SINK_SQL + _INLINE_SQL, reads=False)

    def transfer(self, tool: Mapping[str, Any]) -> None:
        source, target = tool.get("source"), tool.get("target")
        if isinstance(source, Mapping) and _kind(source) in _SQL_KINDS:
            self.sql(_kind(source), source, ("query", "sql"))
        if isinstance(target, Mapping) and _kind(target) in _SQL_KINDS:
            kind = _kind(target)
            table = target.get("table")
            if isinstance(table, str):
                location = _location(kind, target, self.params, self.dialect)
                self.add(self.writes, kind, location, _table_name(table))

    def walk(self, value: Any) -> None:
        if isinstance(value, list):
            for item in value:
                self.walk(item)
            return
        if not isinstance(value, Mapping):
            return
        kind = value.get("kind")
        if kind == "transfer":
            self.transfer(value)
        elif kind in _SQL_KINDS:
            self.sql(kind, value, _INLINE_SQL)
        for key, item in value.items():
            if key in ("sink", "save") and isinstance(item, Mapping):
                self.sink(item)
            elif key not in ("source", "target") or kind != "transfer":
                self.walk(item)


def step_tables(
    payload: Mapping[str, Any], params: Mapping[str, Any], dialect: str
) -> tuple[list[str], list[str]]:
    """(written, read) asset URIs of one step payload (its tool, pipeline, sinks, case arms)."""
    found = _Found(params, dialect)
    found.walk(payload)
    return found.writes, found.reads


def unit_assets(
    units: list[Unit], payloads: Mapping[str, Mapping[str, Any]], params, dialect: str
) -> list[str]:
    """Set each unit's outlets and inlets (on its result task: one event when the step, or the
    whole loop, succeeded; the inlets are what OpenLineage reports as the task's inputs) and
    return the URIs the playbook reads. ``payloads``: step -> full payload."""
    reads: list[str] = []
    for unit in units:
        writes: list[str] = []
        unit_reads: list[str] = []
        for step in unit.steps:
            written, read = step_tables(payloads.get(step, {}), params, dialect)
            writes += [w for w in written if w not in writes]
            unit_reads += [r for r in read if r not in unit_reads]
        reads += [r for r in unit_reads if r not in reads]
        if not (writes or unit_reads) or unit.kind in ("nested", "gate"):
            continue
        for task in unit.tasks:
            if unit.full_id(task.task_id) == unit.result_task:
                task.outlets = writes
                task.inlets = unit_reads
    return reads
