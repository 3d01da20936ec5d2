"""Run a recorded differential case through noetlc as a user's DAG runs, and compare outcomes.

A case (``cases/<area>/<name>.yaml``) holds a playbook, an optional request payload and
``expect``: the outcome NoETL's own engine produced for it (see ``README.md`` here for how those
were recorded). :func:`run_case` compiles the playbook with ``noetlc compile`` and runs the DAG
under ``dag.test()`` with the payload as ``dag_run.conf`` (what ``noetlc run --set`` does);
:func:`outcome_of` reads the same fields from that run; :func:`differences` names the fields
that differ.

Fields compared, exactly, after :func:`normalise`:

* ``status``: ``completed`` / ``failed`` (NoETL's execution status; the DAG run's state,
  ``success`` read as ``completed``); ``rejected`` where the compiler refuses the playbook;
* ``steps_ran``: the steps whose tool was called, as a set (NoETL records them in event order,
  which for parallel branches is the order workers finished, not a property of the playbook).
  Where NoETL's engine races (a recovery step issued after the execution was already marked
  failed runs in some runs and not in others), the case was recorded three times and
  ``steps_ran_observed`` lists every variant seen; noetlc must produce one of them;
* ``results.<step>``: the result document of each step NoETL recorded one for (what
  ``{{ step }}`` holds downstream);
* ``calls.<step>``: tool calls per step (attempts, loop iterations);
* ``rows``: where a case names a table (``rows: {table, order_by}``, or ``duckdb: FILE`` for a
  DuckDB table), the rows in it after the run, read back the same way on both sides (values as
  JSON text: a ``Decimal`` or a date as its ``str``).

Tool cases (``cases/tools_*``) reach real services: ``@HTTP@`` in a playbook or payload is the
local API's base URL (``tests/harness/http_server.py``; NoETL's run had its own instance of the
same server), ``@WORK@`` a scratch folder, and ``auth: pg_local`` the throwaway Postgres
(``tests/harness/postgres.py``; NoETL's run: a credential of that name on a database of the same
shape), ``@PG_DSN@`` that database's URI (no password: trust auth). The same placeholders are written back into results before comparing.

What is normalised, and why: values that differ between two runs of the same engine by
construction, and nothing else: wall-clock values (ISO-8601 timestamps, HTTP ``Date`` headers,
the values of ``elapsed`` / ``duration`` / ``duration_ms``) and NoETL's result-store locators (a
``ref`` / ``_ref`` / ``reference`` mapping with a ``locator``: it embeds the execution id and a
random suffix), a uuid4 ``id`` (NoETL's python tool stamps each error result with a fresh
one) and a ``command_id`` (``<execution id>:<step>:<snowflake>``). noetlc's transfer cursor name (``noetl_transfer_<hex>``, new per call, quoted in PostgreSQL's error
text) is normalised too, and so is the run-named DuckDB file of a duckdb step without `database`
(``duckdb_<run>.duckdb``). A locator's or an id's presence is kept (it becomes ``<result-ref>`` / ``<uuid>``), so a
result that carries one in NoETL and none in noetlc still differs.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.corpus_run.runner import step_results_from_xcom
from tests.corpus_run.test_differential import normalise

HERE = Path(__file__).parent
CASES = HERE / "cases"
DIVERGENCES = HERE / "divergences.yaml"
SUBFOLDER = "differential"

_DAG_ID = re.compile(r'dag_id="([^"]+)"')


def load_cases() -> dict[str, dict[str, Any]]:
    """``area/name`` -> case document, sorted."""
    out = {}
    for path in sorted(CASES.glob("*/*.yaml")):
        out[f"{path.parent.name}/{path.stem}"] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return out


def load_divergences() -> dict[str, dict[str, Any]]:
    if not DIVERGENCES.exists():
        return {}
    return yaml.safe_load(DIVERGENCES.read_text(encoding="utf-8")) or {}


def compile_case(
    case: dict[str, Any], workdir: Path, dialect: str | None = None
) -> tuple[str | None, str, str]:
    """(dag_id, DAG source, compiler report); dag_id is None when noetlc refuses the playbook.
    ``dialect`` forces the generation (``--dialect``) instead of detecting it."""
    from noetl_compile.cli import main

    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / f"{case['name']}.yaml"
    source.write_text(yaml.safe_dump(case["playbook"], sort_keys=False), encoding="utf-8")
    out = workdir / "compiled"
    report = io.StringIO()
    with contextlib.redirect_stdout(report), contextlib.redirect_stderr(report):
        code = main(
            ["compile", str(source), "-o", str(out)] + (["--dialect", dialect] if dialect else [])
        )
    files = sorted(out.glob("*.py")) if out.exists() else []
    if code != 0 or not files:
        return None, "", report.getvalue()
    text = files[0].read_text(encoding="utf-8")
    return _DAG_ID.search(text).group(1), text, report.getvalue()


def needs(case: dict[str, Any]) -> set[str]:
    """Which services a case reaches: ``http`` (``@HTTP@``), ``postgres`` (``pg_local``,
    ``@PG_DSN@``, rows)."""
    text = json.dumps([case["playbook"], case.get("payload")])
    found = {"http"} if "@HTTP@" in text else set()
    rows = case.get("rows_from")
    if "pg_local" in text or "@PG_DSN@" in text or (rows and not rows.get("duckdb")):
        found.add("postgres")
    return found


def _substitute(value: Any, places: dict[str, str]) -> Any:
    text = json.dumps(value)
    for mark, actual in places.items():
        text = text.replace(mark, actual)
    return json.loads(text)


def _restore(value: Any, places: dict[str, str]) -> Any:
    text = json.dumps(value, default=str)
    for mark, actual in places.items():
        text = text.replace(actual, mark)
    return json.loads(text)


def read_rows(spec: dict[str, Any], pg_dsn: str | None) -> Any:
    """The rows of ``spec['table']`` (ordered by ``spec['order_by']``) after a run, as JSON values."""
    query = f"SELECT * FROM {spec['table']} ORDER BY {spec.get('order_by', '1')}"
    try:
        if spec.get("duckdb"):
            import duckdb

            con = duckdb.connect(spec["duckdb"], read_only=True)
            try:
                cur = con.execute(query)
                cols = [d[0] for d in cur.description]
                rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
            finally:
                con.close()
        else:
            import psycopg

            assert pg_dsn, "a postgres rows check needs the test Postgres"
            with psycopg.connect(pg_dsn, connect_timeout=10) as conn:
                cur = conn.execute(query)
                cols = [d.name for d in cur.description]
                rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    except Exception as exc:  # noqa: BLE001 - a missing table is an outcome to compare
        return {"<unreadable>": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    return json.loads(json.dumps(rows, default=str))


def _drop_table(spec: dict[str, Any], pg_dsn: str | None) -> None:
    """A table left by an earlier run of the same case must not pass for this run's rows."""
    if spec.get("duckdb"):
        Path(spec["duckdb"]).unlink(missing_ok=True)
        return
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {spec['table']}")


def run_case(
    case: dict[str, Any],
    *,
    run_dag: Callable[..., Any],
    dags_folder: Path,
    workdir: Path,
    dialect: str | None = None,
    http_base: str | None = None,
    pg_dsn: str | None = None,
) -> dict[str, Any]:
    """The outcome noetlc produces for ``case`` (same fields as ``case['expect']``)."""
    places = {"@WORK@": str(workdir / "work")}
    if http_base:
        places["@HTTP@"] = http_base
    if pg_dsn:
        places["@PG_DSN@"] = pg_dsn
    (workdir / "work").mkdir(parents=True, exist_ok=True)
    case = dict(case, playbook=_substitute(case["playbook"], places))
    case["payload"] = _substitute(case.get("payload") or {}, places)
    case["children"] = _substitute(case.get("children") or [], places)
    rows_from = case.get("rows_from")
    if rows_from:
        rows_from = _substitute(rows_from, places)
        _drop_table(rows_from, pg_dsn)
    outcome = _run_compiled(
        case, run_dag=run_dag, dags_folder=dags_folder, workdir=workdir, dialect=dialect
    )
    if rows_from:
        outcome["rows"] = read_rows(rows_from, pg_dsn)
    return _restore(outcome, places)


def _run_compiled(
    case: dict[str, Any],
    *,
    run_dag: Callable[..., Any],
    dags_folder: Path,
    workdir: Path,
    dialect: str | None = None,
) -> dict[str, Any]:
    from airflow_plugin.events import MemoryRecorder, set_default_recorder

    dag_id, source, report = compile_case(case, workdir, dialect)
    if dag_id is None:
        codes = sorted(set(re.findall(r"\b([A-Z]\d{3})\b", report)))
        return {
            "status": "rejected",
            "steps_ran": [],
            "results": {},
            "calls": {},
            "rejected_by": codes,
        }
    payloads = _payloads(source)
    _compile_children(case, dags_folder / SUBFOLDER, workdir, dialect)
    recorder = MemoryRecorder()
    previous = set_default_recorder(recorder)
    try:
        out = run_dag(source, dag_id, dict(case.get("payload") or {}))
    finally:
        set_default_recorder(previous)
        (dags_folder / f"{dag_id}.py").unlink(missing_ok=True)
        shutil.rmtree(dags_folder / SUBFOLDER, ignore_errors=True)
    return outcome_of(out, payloads, recorder.events, every_attempt=case.get("dialect") == "v1")


def _compile_children(
    case: dict[str, Any], folder: Path, workdir: Path, dialect: str | None
) -> None:
    """Compile a case's ``children`` (the playbooks its ``kind: playbook`` steps call, each with
    the ``path`` NoETL's catalog had it under) into the DAG folder beside the parent, where
    noetlc's runtime finds a child by the DAG id of that path (``runtime/catalog.py``); the
    folder goes when the run ends."""
    for index, child in enumerate(case.get("children") or []):
        playbook = json.loads(json.dumps(child["playbook"]))
        playbook.setdefault("metadata", {})["path"] = child["path"]
        name = f"child{index}"
        dag_id, text, report = compile_case(
            {"name": name, "playbook": playbook}, workdir / name, dialect
        )
        if dag_id is None:
            raise AssertionError(f"child playbook {child['path']!r} does not compile:\n{report}")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{dag_id}.py").write_text(text, encoding="utf-8")


def _payloads(source: str) -> dict[str, Any]:
    """The DAG file's ``PAYLOADS`` literal, read without importing the file (no Airflow)."""
    import ast

    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "PAYLOADS" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise AssertionError("no PAYLOADS literal in the compiled DAG file")


def outcome_of(
    out: Any, payloads: dict[str, Any], events: list[Any], *, every_attempt: bool = False
) -> dict[str, Any]:
    # NoETL records one call per command: a pipeline (and a single tool with policy rules,
    # which it runs as a one-task pipeline) retries its tasks inside that call, and a loop
    # issues one command per item. The comparable count here: first attempts of the step's
    # first task (its first ``ToolStarted`` label). NoETL's v1 worker re-queues the job per
    # retry attempt, each with its own action event: there every attempt counts
    # (``every_attempt``, v1/python_retry_raises).
    calls: dict[str, int] = {}
    first_label: dict[str, str] = {}
    for event in events:
        if event.name != "ToolStarted" or not event.step:
            continue
        label = (event.tool_run_id or event.entity_id or "").rpartition(":")[2]
        first_label.setdefault(event.step, label)
        if label == first_label[event.step] and (every_attempt or (event.attempt or 1) == 1):
            calls[event.step] = calls.get(event.step, 0) + 1
    results = step_results_from_xcom(out.xcom, payloads)
    return {
        "status": "completed" if out.state == "success" else out.state,
        "steps_ran": sorted(calls),
        "results": results,
        "calls": calls,
    }


_REF_KEYS = frozenset({"ref", "_ref", "reference"})
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# noetlc's transfer names its server-side cursor afresh per call (airflow_plugin/tools/transfer.py)
# and PostgreSQL's error text quotes it (cut at the front: `...l_transfer_<hex>`): a value two
# runs differ in by construction.
_TRANSFER_CURSOR = re.compile(r"transfer_[0-9a-f]{12}")
# A duckdb step without `database` writes a file named after its run on both engines (NoETL:
# `./data/noetldb/duckdb_<execution id>.duckdb`; noetlc: `.../duckdb_<run number>.duckdb`).
_RUN_DUCKDB = re.compile(r"duckdb_[0-9]+\.duckdb")


def _is_locator(value: dict[str, Any]) -> bool:
    return "locator" in value or str(value.get("ref", "")).startswith("noetl://")


def _strip_refs(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: "<result-ref>"
            if k in _REF_KEYS and isinstance(v, dict) and _is_locator(v)
            else "<uuid>"
            if k == "id" and isinstance(v, str) and _UUID.fullmatch(v)
            else "<command-id>"
            if k == "command_id" and isinstance(v, str)
            else _strip_refs(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_strip_refs(v) for v in value]
    if isinstance(value, str) and "transfer_" in value:
        return _TRANSFER_CURSOR.sub("transfer_<cursor>", value)
    if isinstance(value, str) and "duckdb_" in value:
        return _RUN_DUCKDB.sub("duckdb_<run>.duckdb", value)
    return value


def comparable(value: Any) -> Any:
    return normalise(_strip_refs(value))


def differences(expect: dict[str, Any], actual: dict[str, Any]) -> dict[str, str]:
    """field -> short description, for every compared field that differs (empty: a match)."""
    found: dict[str, str] = {}
    if expect["status"] != actual["status"]:
        found["status"] = f"noetl {expect['status']} / noetlc {actual['status']}"
        if actual["status"] == "rejected":
            found["status"] += f" {actual.get('rejected_by')}"
            return found
    want, got = sorted(expect.get("steps_ran") or []), sorted(actual.get("steps_ran") or [])
    variants = expect.get("steps_ran_observed") or [want]
    if got not in [sorted(v) for v in variants]:
        shown = want if len(variants) == 1 else " or ".join(map(str, variants))
        found["steps_ran"] = f"noetl {shown} / noetlc {got}"
    for step, value in (expect.get("results") or {}).items():
        mine = actual["results"].get(step, "<no result>")
        if comparable(value) != comparable(mine):
            found[f"results.{step}"] = (
                f"noetl {_short(comparable(value))} / noetlc {_short(comparable(mine))}"
            )
    for step, count in (expect.get("calls") or {}).items():
        if actual["calls"].get(step, 0) != count:
            found[f"calls.{step}"] = f"noetl {count} / noetlc {actual['calls'].get(step, 0)}"
    if "rows" in expect and expect["rows"] != actual.get("rows"):
        found["rows"] = f"noetl {_short(expect['rows'])} / noetlc {_short(actual.get('rows'))}"
    return found


def _field_values(expect: dict[str, Any], actual: dict[str, Any], field: str) -> tuple[Any, Any]:
    """(NoETL's value, noetlc's value) of one compared field, as :func:`differences` compares
    them."""
    if field == "status":
        return expect["status"], actual["status"]
    if field == "steps_ran":
        return sorted(expect.get("steps_ran") or []), sorted(actual.get("steps_ran") or [])
    if field == "rows":
        return expect.get("rows"), actual.get("rows")
    kind, _, step = field.partition(".")
    if kind == "results":
        return (
            comparable((expect.get("results") or {}).get(step)),
            comparable(actual["results"].get(step, "<no result>")),
        )
    if kind == "calls":
        return (expect.get("calls") or {}).get(step, 0), actual["calls"].get(step, 0)
    raise KeyError(f"not a compared field: {field}")


PIN_TEXT_LIMIT = 200


def pin(value: Any) -> str:
    """A value as it is pinned in ``divergences.yaml``: its canonical JSON when short, else the
    JSON's sha256 (with its length), so a long loop result is pinned as exactly as a short one."""
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    if len(text) <= PIN_TEXT_LIMIT:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
    return f"sha256:{digest} ({len(text)} chars)"


def pinned_values(
    expect: dict[str, Any], actual: dict[str, Any], fields: Any
) -> dict[str, dict[str, str]]:
    """``{field: {noetl: pin, noetlc: pin}}`` for each differing field: what a declared difference
    is, by value. A case listed as divergent whose noetlc value moves (a regression inside a
    declared difference) no longer matches its pin."""
    out = {}
    for field in sorted(fields):
        noetl, mine = _field_values(expect, actual, field)
        out[field] = {"noetl": pin(noetl), "noetlc": pin(mine)}
    return out


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
