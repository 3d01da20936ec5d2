"""Differential test: the native lowering against the whole playbook interpreted as one region.

For each playbook below (runnable corpus playbooks of every dialect, with loops, routers,
inclusive fan-out and joins, pipelines, cycles, nested children, sinks and retries), run

* the **native** lowering: the compiled DAG under ``dag.test()`` (tasks, task groups, mapped loop
  bodies, region tasks, branch skipping, XCom hand-over), and
* a **forced single-region** lowering: the same compiled steps, flattened by
  ``runtime.catalog.find_playbook``, run by ``runtime.interpreter.interpret`` from the entry
  steps with the same workload and the same execution id (so ids derived from it, such as child
  execution ids and per-execution DuckDB files, agree),

and assert that every step that ran in both produced the same result. The database is emptied
and the HTTP server's flaky counters are reset before each of the two runs. Playbooks that draw
random numbers (python_retry_exception, v2_comprehensive_test) are left out: ``dag.test()``
itself draws from ``random`` between the seed and the task, so the two lowerings would not see
the same numbers.

What is normalised, and why (everything else must be equal):

* wall-clock values: ISO-8601 timestamps, HTTP ``Date`` headers, and the values of the keys
  ``elapsed`` / ``duration`` / ``duration_ms`` (response and call timings): they embed when the
  call happened, which differs between two runs by construction. Nothing else is rewritten:
  a difference in a count, a routing decision, a rendered value or a result shape fails the test.

A join reached by two arcs runs twice in the interpreter (NoETL's engine dispatches it per arc)
and once natively; its result is compared with the interpreter's last run of it.
"""

from __future__ import annotations

import random
import re
import shutil
from typing import Any

import pytest

from tests.corpus_run.runner import SUBFOLDER, compile_set, run_corpus_playbook, substitute
from tests.corpus_run.test_corpus_run import (
    EXPECTATIONS,
    _reset_http_state,
    _results,
    _sql_rows,
)

# Runnable playbooks (variants of expectations.yaml) compared natively vs as one region.
DIFFERENTIAL = [
    # v1
    "v1/control_flow_workbook/control_flow_workbook.yaml[hot]",
    "v1/control_flow_workbook/control_flow_workbook.yaml[cold]",
    "v1/test_data_transition_fix.yaml",
    "v1/test_start_with_action.yaml",
    "v1/retry_test/duckdb_retry_query.yaml",
    "v1/examples/postgres/postgres_test.yaml",
    "v1/data_transfer/http_to_postgres_transfer.yaml",
    # case-v2
    "case-v2/hello_world/hello_world.yaml",
    "case-v2/control_flow_workbook/control_flow_workbook.yaml[hot]",
    "case-v2/root_scripts/test_simple_loop.yaml",
    "case-v2/vars_test/test_vars_block.yaml",
    "case-v2/json_serialization_save/json_serialization_save.yaml",
    "case-v2/data_transfer/postgres_jsonb_test/postgres_jsonb_test.yaml",
    "case-v2/playbook_composition/user_profile_scorer.yaml",
    "case-v2/retry_test/retry_simple_config.yaml[no_failures]",
    "case-v2/api_integration/auth0/provision_auth_schema.yaml",
    # canonical
    "canonical/hello_world/hello_world.yaml",
    "canonical/control_flow_workbook/control_flow_workbook.yaml[hot]",
    "canonical/root_scripts/test_simple_loop.yaml",
    "canonical/root_scripts/test_implicit_end_routing.yaml",
    "canonical/test_start_with_action.yaml",
    "canonical/pagination/cursor/test_pagination_cursor.yaml",
    "canonical/pagination/pipeline/test_pipeline_simple.yaml",
    "canonical/playbook_composition/playbook_composition.yaml",
    "canonical/iterator_save_test/iterator_save_test.yaml",
    "canonical/save_storage_test/save_edge_cases.yaml",
    "canonical/retry_test/retry_simple_config.yaml",
    # seeds
    "seeds/whitepaper_weather_loop.yaml",
    "seeds/spec_case_sink.yaml",
]

VARIANTS = {v.test_id: v for e in EXPECTATIONS.values() for v in e.variants}
MAIN_SUBFOLDER = SUBFOLDER + "_main"

# --------------------------------------------------------------------------------------------
# Normalisation (see the module docstring)
# --------------------------------------------------------------------------------------------

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:?\d{2}|Z)?")
_HTTP_DATE = re.compile(r"[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT")
_TIMING_KEYS = frozenset({"elapsed", "duration", "duration_ms"})


def normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<timing>" if k in _TIMING_KEYS else normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        return _HTTP_DATE.sub("<http-date>", _ISO.sub("<timestamp>", value))
    return value


def _first_difference(a: Any, b: Any, where: str = "") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return f"{where}.{key}: only in {'interpreted' if key not in a else 'native'}"
            found = _first_difference(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items natively, {len(b)} interpreted"
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{where}.{index}")
            if found:
                return found
        return None
    return None if a == b else f"{where}: native {a!r} != interpreted {b!r}"


# --------------------------------------------------------------------------------------------
# The forced single-region run
# --------------------------------------------------------------------------------------------


def _interpret_whole_playbook(rel, variant, dags_folder, workdir, conf, execution_id):
    """Compile again, install main + children, flatten with find_playbook, interpret."""
    from airflow_plugin.events import MemoryRecorder, set_default_recorder
    from airflow_plugin.runtime.catalog import find_playbook
    from airflow_plugin.runtime.interpreter import interpret

    compiled = compile_set(rel, workdir, variant.children)
    children = dags_folder / SUBFOLDER
    main = dags_folder / MAIN_SUBFOLDER
    for folder in (children, main):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    for dag_id, text in compiled.sources.items():
        target = main if dag_id == compiled.main else children
        (target / f"{dag_id}.py").write_text(text, encoding="utf-8")
    previous = set_default_recorder(MemoryRecorder())
    try:
        playbook = find_playbook(compiled.main, dags_folder)
        base = {
            "workload": {**playbook.workload, **conf},
            "results": {},
            "ctx": {},
            "vars": {},
            "execution_id": execution_id,
        }
        return interpret(playbook.steps, [(s, {}) for s in playbook.entry], base)
    finally:
        set_default_recorder(previous)
        shutil.rmtree(children, ignore_errors=True)
        shutil.rmtree(main, ignore_errors=True)


def _prepare(variant, placeholders, dsn) -> None:
    from tests.corpus_run.test_corpus_run import RESET_SQL

    _sql_rows(dsn, RESET_SQL)
    _reset_http_state(placeholders["http_server"])
    assert not variant.setup.get("playbooks"), "setup playbooks are not supported here"
    for statement in variant.setup.get("sql") or []:
        _sql_rows(dsn, statement)
    if variant.seed is not None:
        random.seed(variant.seed)


def test_differential_set_covers_every_dialect():
    assert len(DIFFERENTIAL) >= 20
    assert len(set(DIFFERENTIAL)) == len(DIFFERENTIAL)
    dialects = {test_id.split("/", 1)[0] for test_id in DIFFERENTIAL}
    assert {"v1", "case-v2", "canonical"} <= dialects
    missing = [t for t in DIFFERENTIAL if t not in VARIANTS]
    assert not missing, f"not runnable variants of expectations.yaml: {missing}"


@pytest.mark.corpus
@pytest.mark.parametrize("test_id", DIFFERENTIAL)
def test_native_and_single_region_agree(
    test_id, airflow_db, run_dag, http_server, pg_connections, pg_test_dsn, tmp_path
):
    variant = VARIANTS[test_id]
    placeholders = {"http_server": http_server, "tmp": str(tmp_path)}
    conf = substitute(variant.conf, placeholders)

    _prepare(variant, placeholders, pg_test_dsn)
    native = run_corpus_playbook(
        variant.rel,
        dags_folder=airflow_db,
        run_dag=run_dag,
        workdir=tmp_path / "native",
        conf=conf,
        children=variant.children,
    )
    assert native.state == variant.state == "success", native.describe()
    native_results = _results(native)

    _prepare(variant, placeholders, pg_test_dsn)
    interpreted = _interpret_whole_playbook(
        variant.rel, variant, airflow_db, tmp_path / "region", conf, native.execution_id
    ).results

    both = sorted(set(native_results) & set(interpreted))
    assert both, f"no step ran in both: native {sorted(native_results)}, {sorted(interpreted)}"
    only_native = sorted(set(native_results) - set(interpreted))
    only_interpreted = sorted(set(interpreted) - set(native_results))
    assert not only_native and not only_interpreted, (
        f"steps that ran in one lowering only: native {only_native}, interpreted {only_interpreted}"
    )
    differences = []
    for step in both:
        found = _first_difference(
            normalise(native_results[step]), normalise(interpreted[step]), step
        )
        if found:
            differences.append(found)
    print(f"{test_id}: {len(both)} step results identical in both lowerings")
    assert not differences, "\n".join(differences)
