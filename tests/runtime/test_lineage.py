"""OpenLineage from real runs: ``noetlc run`` (dag.test()'s loop) with the OpenLineage provider
installed and its ``file`` transport configured, a real PostgreSQL cluster, real DuckDB files
and the local HTTP API. The events the provider writes must name each task's input and output
datasets by OpenLineage's naming spec, and no secret (a connection password, a query-string
token, URL credentials) may appear anywhere in them.

Also the pieces under it without Airflow: dataset names from compiler URIs and URLs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_plugin.hooks.lineage import (
    Dataset,
    collecting,
    http_dataset,
    note_http,
    table_dataset,
)
from tests.harness.postgres import airflow_conn_env
from tests.harness.run_cli import noetlc_run, report_of

pytest_plugins = ["tests.harness.postgres", "tests.harness.http_server"]

PG_PASSWORD = "PW-SECRET-9931"  # the postgres connection's password (trust auth ignores it)
QUERY_TOKEN = "QUERY-SECRET-7731"  # a secret sent as ?api_key=
URL_PASSWORD = "URL-SECRET-5521"  # the http connection's password (basic auth)
SECRETS = (PG_PASSWORD, QUERY_TOKEN, URL_PASSWORD)

V1 = """\
    apiVersion: noetl.io/v1
    kind: Playbook
    name: lineage_v1
    path: tests/lineage_v1
    workload:
      pg_auth: pg_lineage
    workflow:
      - step: start
        tool: postgres
        auth: "{{ workload.pg_auth }}"
        command: |
          CREATE TABLE IF NOT EXISTS src_orders (id int, amount int);
          CREATE TABLE IF NOT EXISTS fetched_users (id int, username text, email text);
          DELETE FROM src_orders;
          INSERT INTO src_orders VALUES (1, 10), (2, 20), (3, 30);
        next:
          - step: rollup
      - step: rollup
        tool: postgres
        auth: "{{ workload.pg_auth }}"
        command: |
          CREATE TABLE IF NOT EXISTS order_totals (n int, total int);
          INSERT INTO order_totals SELECT count(*), sum(amount) FROM src_orders;
        next:
          - step: token
      - step: token
        tool: secrets
        secret_name: lineage_api_token
        next:
          - step: fetch
      - step: fetch
        tool: http
        method: GET
        auth: lineage_api
        endpoint: /api/v1/users
        params: {api_key: "{{ token.secret_value }}", limit: 3}
        sink:
          tool: postgres
          auth: "{{ workload.pg_auth }}"
          table: fetched_users
          args: "{{ fetch.data.users }}"
        next:
          - step: end
      - step: end
"""
CANONICAL = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: lineage_canonical, path: tests/lineage_canonical}
    workload:
      pg_auth: pg_lineage
      duck: %s
    workflow:
      - step: start
        tool:
          kind: transfer
          source:
            kind: postgres
            auth: "{{ pg_auth }}"
            query: SELECT id, amount FROM src_orders
          target:
            kind: duckdb
            database: "{{ duck }}"
            table: orders_copy
          mode: replace
        next:
          arcs:
            - step: report
      - step: report
        tool:
          kind: duckdb
          database: "{{ duck }}"
          query: CREATE OR REPLACE TABLE big_orders AS SELECT * FROM orders_copy WHERE amount > 10
"""


# -- naming, no Airflow --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://api.example.com/v1/users?token=x#frag", ("https://api.example.com", "/v1/users")),
        ("http://u:p@127.0.0.1:8080/a/b?api_key=s", ("http://127.0.0.1:8080", "/a/b")),
        ("https://h:443", ("https://h", "/")),
        ("http://[::1]:5555/x", ("http://[::1]:5555", "/x")),
        ("HTTP://Host.Example/x", ("http://host.example", "/x")),
        ("ftp://h/x", None),
        ("/relative/path", None),
        ("http://h:notaport/x", None),
    ],
)
def test_http_dataset_names_host_and_path_only(url: str, expected) -> None:
    got = http_dataset(url)
    assert (got and (got.namespace, got.name)) == (expected or None)


def test_table_dataset_from_compiler_uris(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(
        airflow_conn_env("pg_x"), f"postgresql://u:{PG_PASSWORD}@db.internal:6543/sales"
    )
    monkeypatch.setenv(airflow_conn_env("pg_nohost"), "postgresql://u:p@/sales")
    from airflow_plugin.hooks.connections import clear_cache

    clear_cache()
    assert table_dataset("x-noetl://postgres/pg_x/public/orders") == Dataset(
        "postgres://db.internal:6543", "sales.public.orders"
    )
    monkeypatch.chdir(tmp_path)
    assert table_dataset("x-noetl://duckdb/data%2Fw.duckdb/main/t") == Dataset(
        f"duckdb://{tmp_path}/data/w.duckdb", "w.main.t"
    )
    # Not ours, a connection nobody defined, one without a host: left out, never a guess.
    assert table_dataset("postgres://h:5432/db/public/t") is None
    assert table_dataset("x-noetl://postgres/pg_undefined_here/public/t") is None
    assert table_dataset("x-noetl://postgres/pg_nohost/public/t") is None
    assert table_dataset("x-noetl://snowflake/x/public/t") is None


def test_http_notes_only_inside_a_collecting_block() -> None:
    note_http("GET", "http://h/x")  # no task collecting: dropped, no error
    with collecting() as seen:
        note_http("GET", "http://h/x?token=1")
        note_http("get", "http://h/x")
        note_http("POST", "http://h/y")
    assert seen.inputs == [Dataset("http://h", "/x")]
    assert seen.outputs == [Dataset("http://h", "/y")]


def test_operators_do_not_import_the_provider() -> None:
    """A DAG file's operators and the tools load without OpenLineage: the provider is imported
    only when it calls the operator hook (the extra `lineage` is optional)."""
    import subprocess
    import sys

    # Airflow itself reads every installed provider's package info (get_provider_info); the
    # OpenLineage client and the provider's extractors, listener and facets must stay unloaded.
    code = (
        "import sys\n"
        "import airflow_plugin.operators.step, airflow_plugin.operators.loop\n"
        "import airflow_plugin.tools.http, airflow_plugin.hooks.lineage\n"
        "assert 'airflow.sdk' in sys.modules\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('openlineage')\n"
        "    or m.startswith('airflow.providers.openlineage.')\n"
        "    and not m.endswith('.get_provider_info'))\n"
        "print('LOADED', loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "LOADED []", out.stdout[-2000:]


# -- real runs -----------------------------------------------------------------------------------


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _datasets(event: dict[str, Any], side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event.get(side) or []]


def _by_job(events: list[dict[str, Any]], event_type: str) -> dict[str, dict[str, Any]]:
    return {e["job"]["name"]: e for e in events if e.get("eventType") == event_type}


@pytest.fixture(scope="module")
def lineage_run(pg_cluster, http_server: str, tmp_path_factory: pytest.TempPathFactory):
    """Both playbooks run once with OpenLineage writing to a file; -> (events, file text, ns)."""
    # The test command installs the `lineage` extra: a missing provider is a failure, not a skip.
    import airflow.providers.openlineage  # noqa: F401

    tmp = tmp_path_factory.mktemp("lineage")
    pg_cluster.create_database("lineage_db")
    folder = tmp / "playbooks"
    folder.mkdir()
    duck = tmp / "data" / "warehouse.duckdb"
    (folder / "lineage_v1.yaml").write_text(textwrap.dedent(V1))
    (folder / "lineage_canonical.yaml").write_text(textwrap.dedent(CANONICAL % duck))
    ol_file = tmp / "openlineage.jsonl"
    env = {
        airflow_conn_env("pg_lineage"): (
            f"postgresql://postgres:{PG_PASSWORD}@{pg_cluster.host}:{pg_cluster.port}/lineage_db"
        ),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(ol_file), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "noetl-test",
    }
    # The API's base URL and basic-auth credentials come from a connection, the query token from
    # a secret (an Airflow Variable): the ways a playbook holds secrets (never its workload).
    host, port = http_server.removeprefix("http://").split(":")
    env[airflow_conn_env("lineage_api")] = f"http://alice:{URL_PASSWORD}@{host}:{port}"
    env["AIRFLOW_VAR_LINEAGE_API_TOKEN"] = QUERY_TOKEN
    home = tmp / "home"
    first = noetlc_run(home, folder / "lineage_v1.yaml", "--json", env=env)
    assert first.returncode == 0, (first.stdout, first.stderr[-3000:])
    second = noetlc_run(home, folder / "lineage_canonical.yaml", "--json", env=env)
    assert second.returncode == 0, (second.stdout, second.stderr[-3000:])
    for result in (first, second):
        assert report_of(result)["state"] == "success", result.stdout
    # The secrets were used, so their absence below means something: the token went out as the
    # query's api_key (the result shows it masked) and the sink wrote the users it fetched.
    fetched = report_of(first)["steps"]["fetch"]["result"]
    assert "api_key=%2A%2A%2A" in fetched["url"] or "api_key=***" in fetched["url"], fetched
    import psycopg

    with psycopg.connect(pg_cluster.dsn("lineage_db")) as conn:
        assert conn.execute("SELECT count(*) FROM fetched_users").fetchone() == (3,)
    text = ol_file.read_text()
    pg_ns = f"postgres://{pg_cluster.host}:{pg_cluster.port}"
    return _events(ol_file), text, pg_ns, duck


@pytest.mark.slow
def test_tasks_name_their_datasets(lineage_run) -> None:
    events, _, pg_ns, duck = lineage_run
    done = _by_job(events, "COMPLETE")

    def sides(job: str) -> tuple[list, list]:
        assert job in done, sorted(done)
        return _datasets(done[job], "inputs"), _datasets(done[job], "outputs")

    def pg(table: str) -> tuple[str, str]:
        return (pg_ns, f"lineage_db.public.{table}")

    def dd(table: str) -> tuple[str, str]:
        return (f"duckdb://{duck}", f"warehouse.main.{table}")

    # postgres: writes (compiler's outlets) and reads (inlets) where the connection points.
    assert sides("tests.lineage_v1.start") == ([], [pg("src_orders"), pg("fetched_users")])
    assert sides("tests.lineage_v1.rollup") == ([pg("src_orders")], [pg("order_totals")])
    # http: the URL the request went to (host and path only) and the sink's target table.
    inputs, outputs = sides("tests.lineage_v1.fetch")
    assert outputs == [pg("fetched_users")]
    assert len(inputs) == 1 and inputs[0][1] == "/api/v1/users", inputs
    assert inputs[0][0].startswith("http://127.0.0.1:"), inputs
    assert sides("tests.lineage_v1.token") == ([], [])
    # transfer: the source query's table in, the target table out; duckdb reads and writes.
    assert sides("tests.lineage_canonical.start") == ([pg("src_orders")], [dd("orders_copy")])
    assert sides("tests.lineage_canonical.report") == ([dd("orders_copy")], [dd("big_orders")])
    # On start the compiler's tables are already known.
    started = _by_job(events, "START")
    assert _datasets(started["tests.lineage_v1.rollup"], "inputs") == [pg("src_orders")]
    # A step that touches no dataset reports none.
    assert sides("tests.lineage_v1.end") == ([], [])


@pytest.mark.slow
def test_no_secret_reaches_an_event(lineage_run) -> None:
    events, text, _, _ = lineage_run
    assert len(events) >= 14  # run and task events were written: the check below saw them
    for secret in SECRETS:
        assert secret not in text
