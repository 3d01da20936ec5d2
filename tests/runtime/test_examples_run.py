"""The bundled examples, compiled and run for real under ``dag.test()``: every loop shape, a
cyclic region, a nested playbook (its child inline: no scheduler runs a child DAG here), a v1
loop with ``end_loop``; step results asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetl_compile.cli import main

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"


@pytest.fixture
def run_example(airflow_db, run_dag, tmp_path):
    def run(*names: str, conf=None):
        out = tmp_path / "dags"
        assert (
            main(["compile", *(str(PLAYBOOKS / f"{n}.yaml") for n in names), "-o", str(out)]) == 0
        )
        sources = {}
        for path in sorted(out.glob("*.py")):
            text = path.read_text()
            dag_id = text.split('dag_id="', 1)[1].split('"', 1)[0]
            sources[dag_id] = text
            # Children must be DAG files of the dags folder: the inline run finds them there.
            (airflow_db / f"{dag_id}.py").write_text(text)
        dag_id = f"examples.{names[0]}"
        return run_dag(sources[dag_id], dag_id, conf)

    return run


def test_parallel_loop_maps_items_and_routes_on_loop_done(run_example):
    out = run_example("loop_parallel")
    assert out.state == "success", out.states
    tail = out.xcom["measure.tail"]["result"]
    assert [r["city"] for r in tail["results"]] == ["Paris", "Oslo", "Cairo", "Lima"]
    assert tail["stats"] == {"total": 4, "success": 4, "failed": 0}
    assert out.xcom["report"]["result"] == {"total_letters": 5 + 4 + 5 + 4}
    # Mapped instances are named by their items in the UI (map_index_template), not 0..3; in
    # process (dag.test(), noetlc run) the parallel loop is one instance running them on threads.
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        labels = [
            ti.rendered_map_index
            for ti in session.query(TaskInstance)
            .filter_by(dag_id="examples.loop_parallel", run_id=out.run_id, task_id="measure.body")
            .order_by(TaskInstance.map_index)
        ]
    assert labels == ["Paris .. Lima (4 items)"]


def test_large_loop_keeps_noetls_bound_of_128_results(run_example):
    out = run_example("large_loop")  # 5,000 items
    assert out.state == "success", out.states
    chunks = out.xcom["square.head"]
    assert len(chunks) == 1 and len(chunks[0]["items"]) == 5000  # in process: one instance
    result = out.xcom["square.tail"]["result"]
    assert result["stats"] == {"total": 5000, "success": 5000, "failed": 0}
    assert result["omitted_results_count"] == 5000 - 128
    assert [r["square"] for r in result["results"][:2]] == [4872**2, 4873**2]
    # Fused (its metadata.noetlc.fuse): the loop's tail ran `total` too.
    assert out.xcom["square.tail"]["results"]["total"] == {
        "items": 5000,
        "kept": 128,
        "omitted": 4872,
        "last_square": 4999**2,
    }


def test_sequential_loop_sees_earlier_ctx_writes(run_example):
    out = run_example("loop_sequential_ctx")
    assert out.state == "success", out.states


def test_v1_loop_with_end_loop_result(run_example):
    out = run_example("whitepaper_v1")
    assert out.state == "success", out.states
    result = out.xcom["city_loop.tail"]["results"]
    assert result["end_city_loop"] == {"alerts": [{"city": "Paris", "alert": True}]}


def test_nested_parent_runs_child_inline(run_example):
    out = run_example("nested_parent", "nested_child")
    assert out.state == "success", out.states
    assert out.xcom["call_child"]["result"] == {"greeting": "hello Ada"}
    assert out.xcom["end"]["result"] == {"child": {"greeting": "hello Ada"}}


def test_pagination_region_follows_the_cycle_until_the_last_page(run_example, http_server):
    out = run_example("pagination_region", conf={"api_url": http_server})
    assert out.state == "success", out.states
    region = out.xcom["region_fetch_page"]
    assert region["order"].count("fetch_page") == 3  # max_pages: 3 pages, then the exit arc
    assert out.states["done"] == "success"


def test_case_sink_upserts_into_postgres_and_vars_flow(run_example, pg_connections, pg_test_dsn):
    import psycopg

    with psycopg.connect(pg_test_dsn, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS order_counts")
        db.execute("CREATE TABLE order_counts (label text PRIMARY KEY, count int)")
        db.execute("INSERT INTO order_counts VALUES ('orders', 1)")
    out = run_example("case_sink_vars")
    assert out.state == "success", out.states
    assert out.states["low"] == "skipped" and out.states["failed"] == "skipped"
    assert out.xcom["high"]["result"] == {"message": "high: 7"}
    sink = out.xcom["start"]["result"]["_sink"]
    assert sink["rows_written"] == 1 and sink["mode"] == "upsert"
    with psycopg.connect(pg_test_dsn) as db:
        assert db.execute("SELECT label, count FROM order_counts").fetchall() == [("orders", 7)]


def test_http_retry_policy_then_body_downstream(run_example, http_server):
    out = run_example("http_fetch", conf={"api_url": http_server})
    assert out.state == "success", out.states
    assert out.xcom["summarize"]["result"] == {"status": 200, "items": 10, "first_id": 1}
    # The flaky endpoint failed the first call: the policy retried inside the task.
    assert out.xcom["fetch"]["result"]["status"] == "ok"


def test_postgres_and_v1_step_sink_upsert(run_example, pg_connections):
    out = run_example("postgres_upsert")
    assert out.state == "success", out.states
    assert out.xcom["score"]["result"]["_sink"]["rows_written"] == 2
    # A v1 postgres step keys its result by statement (profile postgres_result_per_statement).
    assert out.xcom["read_back"]["result"]["command_0"]["rows"] == [
        {"name": "ada", "score": 10},
        {"name": "bob", "score": 2},
        {"name": "cy", "score": 3},
    ]


def test_duckdb_multi_statement_aggregation(run_example):
    out = run_example("duckdb_report")
    assert out.state == "success", out.states
    assert out.xcom["report"]["result"] == {"north": 150, "south": 80}


def test_secret_is_used_downstream_and_never_stored(run_example, monkeypatch):
    from airflow_plugin.hooks.secrets import clear_secret_cache

    monkeypatch.setenv("AIRFLOW_VAR_API_TOKEN", "tok-0123456789abcdef")
    clear_secret_cache()  # the value another test of this process looked up must not be reused
    out = run_example("secrets_use")
    assert out.state == "success", out.states
    assert out.xcom["use_token"]["result"] == {"token_length": 20, "looks_like_token": True}
    assert "0123456789abcdef" not in repr(out.xcom)


def test_transfer_postgres_to_duckdb_in_chunks(run_example, pg_connections):
    out = run_example("transfer_pg_duckdb")
    assert out.state == "success", out.states
    transfer = out.xcom["start"]["result"]
    assert transfer["rows_transferred"] == 2500 and transfer["chunks_processed"] == 3
    assert out.xcom["check"]["result"]["rows"] == [{"n": 2500, "total": 2500 * 2501}]


def test_playbook_task_inside_a_loop_runs_the_child_per_item(run_example):
    out = run_example("nested_in_loop", "nested_child")
    assert out.state == "success", out.states
    assert out.xcom["collect"]["result"] == {
        "greetings": ["HELLO ADA", "HELLO GRACE", "HELLO LINUS"]
    }


def test_args_routed_into_a_loop_step_bind_every_iteration(airflow_db, run_dag, tmp_path):
    # case-v2 args routed by a case rule into a loop step: the args reach the head (the
    # router's downstream) and must bind in every mapped body instance too. (A plain `next`
    # passes none in case-v2, as dc55c492: S117.)
    source = tmp_path / "loop_args.yaml"
    source.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\n"
        "metadata: {name: loop_args, path: tests/loop_args}\n"
        "workflow:\n"
        "  - step: start\n"
        "    tool: {kind: python, code: 'result = 1'}\n"
        "    case:\n"
        "      - when: \"{{ event.name == 'step.exit' }}\"\n"
        "        then: {next: [{step: scale, args: {factor: 10}}]}\n"
        "  - step: scale\n"
        "    loop: {in: '{{ [1, 2, 3] }}', iterator: n, mode: parallel}\n"
        "    tool: {kind: python, args: {n: '{{ n }}'}, code: 'result = n * factor'}\n"
    )
    out_dir = tmp_path / "dags"
    assert main(["compile", str(source), "-o", str(out_dir)]) == 0
    (dag_file,) = out_dir.glob("*.py")
    out = run_dag(dag_file.read_text(), "tests.loop_args")
    assert out.state == "success", out.states
    assert out.xcom["scale.tail"]["result"]["results"] == [10, 20, 30]


def test_catalog_never_takes_a_parent_for_its_child(tmp_path):
    from airflow_plugin.runtime.catalog import find_playbook

    # The parent sorts first and names the child in `trigger_dag_id=`.
    (tmp_path / "a_parent.py").write_text('x = Op(trigger_dag_id="z.child")\n')
    (tmp_path / "z_child.py").write_text(
        'PAYLOADS = {"start": {"step": "start"}}\n'
        "class _T:\n    task_id = 'start'\n"
        "class _D:\n    roots = [_T()]\n    params = {}\n"
        "dag = _D()\n"
        'SOURCE = """\nwith DAG(\n    dag_id="z.child",\n"""\n'
    )
    assert find_playbook("z.child", tmp_path).file.endswith("z_child.py")
