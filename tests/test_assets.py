"""Tables as Airflow Assets in the compiled DAG (noetl_compile/lower/assets.py): which writes are
declared as outlets, their URIs, ``--schedule-on-assets``, and that no table name reaches the
file as code."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest

from noetl_compile.compile import compile_paths
from noetl_compile.lower.assets import sql_tables, step_tables, table_uri

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("sql", "writes", "reads"),
    [
        ("INSERT INTO t (a) VALUES (1)", [["t"]], []),
        (
            "insert into S.T select * from src join other o on true",
            [["s", "t"]],
            [["src"], ["other"]],
        ),
        ('UPDATE "MixedCase" SET a = 1', [["MixedCase"]], []),
        ("DELETE FROM only t WHERE x IN (SELECT id FROM keep)", [["t"]], [["keep"]]),
        ("CREATE TABLE IF NOT EXISTS a.b (x int)", [["a", "b"]], []),
        ("CREATE TEMP TABLE scratch (x int)", [], []),
        ("CREATE OR REPLACE TABLE sales AS SELECT 1", [["sales"]], []),
        ("TRUNCATE TABLE t; COPY u FROM '/x'; COPY v TO STDOUT", [["t"], ["u"]], [["v"]]),
        ("MERGE INTO tgt USING src ON true WHEN MATCHED THEN DO NOTHING", [["tgt"]], []),
        ("INSERT INTO q VALUES (1) ON CONFLICT (id) DO UPDATE SET a = 2", [["q"]], []),
        ("SELECT extract(year FROM ts), substring(s from 2) FROM real_t", [], [["real_t"]]),
        ("SELECT * FROM generate_series(1, 3) g", [], []),
        ("WITH recent AS (SELECT * FROM base) SELECT * FROM recent", [], [["base"]]),
        ("INSERT INTO {{ workload.table }} VALUES (1)", [], []),
        ("INSERT INTO raw_{{ day }} VALUES (1)", [], []),
        ("-- INSERT INTO commented\nSELECT 'INSERT INTO quoted', $$ DELETE FROM dollar $$", [], []),
        ("/* UPDATE t */ SELECT 1", [], []),
    ],
)
def test_sql_tables(sql: str, writes: list, reads: list) -> None:
    assert sql_tables(sql) == (writes, reads)


@pytest.mark.parametrize(
    "unit",
    [
        "'",
        "$a",
        "{{",
        '"',
        "(",
        "( from ",
        "f( from ",
        "table ",
        "a.",
        "with x as (",
        "insert into ",
        "table a.",
    ],
)
def test_sql_scan_is_linear_on_hostile_text(unit: str) -> None:
    """Four times the text costs about four times the CPU (quadratic would be sixteen); CPU time
    of this process, best of three, so other processes on the machine do not count."""
    import time

    def best(text: str) -> float:
        times = []
        for _ in range(3):
            started = time.process_time()
            sql_tables(text)
            times.append(time.process_time() - started)
        return min(times)

    small, large = best("create table " + unit * 5_000), best("create table " + unit * 20_000)
    assert large < 10 * small + 0.02, (unit, small, large)


def test_uri_parts_are_percent_encoded() -> None:
    assert (
        table_uri("postgres", "pg_local", ["orders"]) == "x-noetl://postgres/pg_local/public/orders"
    )
    assert table_uri("duckdb", "/tmp/a b.duckdb", ["s", "T/x"]) == (
        "x-noetl://duckdb/%2Ftmp%2Fa%20b.duckdb/s/T%2Fx"
    )


def test_declared_writes_and_what_stays_undeclared() -> None:
    params = {"pg_auth": "pg_local", "db": "/data/w.duckdb", "table": "t"}
    payload = {
        "tool": {"kind": "python", "code": "..."},
        "sink": {"tool": "postgres", "auth": "{{ workload.pg_auth }}", "table": "public.scores"},
        "case": [
            {
                "then": {
                    "sink": {
                        "tool": {"kind": "duckdb", "database": "{{ workload.db }}", "table": "agg"}
                    }
                }
            },
            {
                "then": {
                    "sink": {
                        "tool": {
                            "kind": "postgres",
                            "auth": "pg_local",
                            "table": "{{ workload.table }}",
                        }
                    }
                }
            },  # run-time name
            {"then": {"sink": {"tool": {"kind": "duckdb", "table": "own_file"}}}},  # no database
            {
                "then": {
                    "sink": {"tool": {"kind": "postgres", "auth": "{{ other }}", "table": "x"}}
                }
            },  # v1: a bare name is no workload key
        ],
    }
    writes, reads = step_tables(payload, params, "v1")
    assert writes == [
        "x-noetl://postgres/pg_local/public/scores",
        "x-noetl://duckdb/%2Fdata%2Fw.duckdb/main/agg",
    ]
    assert reads == []
    transfer = {
        "tool": {
            "kind": "transfer",
            "source": {"kind": "postgres", "auth": "pg_local", "query": "SELECT * FROM src"},
            "target": {"kind": "duckdb", "database": ":memory:", "table": "t"},
        }
    }
    assert step_tables(transfer, {}, "canonical") == (
        [],
        ["x-noetl://postgres/pg_local/public/src"],
    )


def _write(folder: Path, name: str, body: str) -> None:
    (folder / name).write_text(textwrap.dedent(body))


PRODUCER = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: producer, path: t/producer}
    workload: {pg_auth: pg_local}
    workflow:
      - step: start
        tool:
          kind: postgres
          auth: "{{ pg_auth }}"
          command: INSERT INTO %s (a) VALUES (1)
"""
CONSUMER = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: consumer, path: t/consumer}
    workload: {pg_auth: pg_local}
    workflow:
      - step: start
        tool:
          kind: postgres
          auth: "{{ pg_auth }}"
          query: SELECT count(*) FROM orders
"""


def _dag_call(text: str) -> dict[str, ast.expr]:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "DAG":
            return {k.arg: k.value for k in node.keywords}
    raise AssertionError("no DAG call")


def test_schedule_on_assets_and_stable_outlets(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    _write(src, "producer.yaml", PRODUCER % "orders")
    _write(src, "consumer.yaml", CONSUMER)
    out = tmp_path / "out"
    plain = compile_paths([str(src)], str(out), check_only=True)
    texts = {Path(f.output).stem: f.text for f in plain.files}
    assert 'outlets=[Asset("x-noetl://postgres/pg_local/public/orders")]' in texts["producer"]
    assert "inlets=" not in texts["producer"]
    # What a task reads is its inlets (OpenLineage reports them as its inputs).
    assert 'inlets=[Asset("x-noetl://postgres/pg_local/public/orders")]' in texts["consumer"]
    assert "outlets=" not in texts["consumer"]
    assert ast.unparse(_dag_call(texts["consumer"])["schedule"]) == "None"
    scheduled = compile_paths([str(src)], str(out), check_only=True, schedule_on_assets=True)
    texts2 = {Path(f.output).stem: f.text for f in scheduled.files}
    assert texts2["producer"] == texts["producer"]  # its own write never schedules it
    assert ast.unparse(_dag_call(texts2["consumer"])["schedule"]) == (
        "[Asset('x-noetl://postgres/pg_local/public/orders')]"
    )
    again = compile_paths([str(src)], str(out), check_only=True, schedule_on_assets=True)
    assert [f.text for f in again.files] == [f.text for f in scheduled.files]  # deterministic


def test_a_table_name_cannot_inject_code(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    hostile = "x\")]; import os; os.system('id'); y=[(\""
    _write(src, "producer.yaml", PRODUCER % ('"' + hostile.replace('"', '""') + '"'))
    report = compile_paths([str(src)], str(tmp_path / "out"), check_only=True)
    (text,) = [f.text for f in report.files]
    tree = ast.parse(text)
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Asset"
    ]
    assert calls, text
    for call in calls:
        (arg,) = call.args
        assert isinstance(arg, ast.Constant)
        assert arg.value == "x-noetl://postgres/pg_local/public/" + quote(hostile, safe="")
    assert "os.system" not in {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call)}


def test_compiled_outlets_load_in_airflow(tmp_path: Path) -> None:
    pytest.importorskip("airflow")
    import importlib.util

    src = tmp_path / "src"
    src.mkdir()
    _write(src, "producer.yaml", PRODUCER % "orders")
    _write(src, "consumer.yaml", CONSUMER)
    report = compile_paths([str(src)], str(tmp_path / "out"), schedule_on_assets=True)
    assert not report.failed
    dags = {}
    for path in sorted((tmp_path / "out").glob("*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        dags[path.stem] = module.dag
    (task,) = [t for t in dags["producer"].tasks if t.outlets]
    assert [a.uri for a in task.outlets] == ["x-noetl://postgres/pg_local/public/orders"]
    (reader,) = dags["consumer"].tasks
    assert [a.uri for a in reader.inlets] == ["x-noetl://postgres/pg_local/public/orders"]
    assert [a.uri for a in dags["consumer"].timetable.asset_condition.objects] == [
        "x-noetl://postgres/pg_local/public/orders"
    ]
