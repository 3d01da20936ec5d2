"""NoETL 5 cases derived from NoETL 5's Rust sources, run through noetlc (compile, ``dag.test()``).

A case (``cases/<area>/<name>.yaml``) is what NoETL 5's source says a small playbook does: the
source line (``source: {repository, commit, file, line}``) and, under ``says``, what that line
does. ``expect`` holds the outcome that line implies:

* ``status``: ``completed`` / ``failed``; ``steps_ran`` (a set, as in tests/differential);
* ``results.<step>``: the whole step result; ``fields.<step>``: some fields of it (a dotted
  path -> value: ``rows.0.n``), for results holding values that vary by run (http headers, ids);
  ``keys.<step>``: the exact key set of a mapping result.

A case whose outcome noetlc does not give on purpose names the row of docs/semantics.md that
says so (``differs: {row, fields, reason}``), and the test holds it to exactly those fields. A
playbook noetlc refuses at compile says ``refused: CODE``, and the test holds the compile to that
diagnostic: a match where NoETL 5 refuses it too (its parser; ``expect.status: failed``), else
a difference whose ``differs.fields`` is ``[compile]``.

Children of nested calls (``children:``) are compiled into the DAG folder beside the case, where
the runtime's catalog finds them. ``@HTTP@`` is the local API's base URL, ``@WORK@`` a scratch
folder, ``@PG_DSN@`` (``@PG_HOST@``, ``"@PG_PORT@"``, ``@PG_USER@``, ``@PG_DB@``) the throwaway
Postgres's connection, ``auth: pg_local`` the throwaway Postgres (as in tests/differential).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.differential.runner import _payloads, _restore, _substitute, outcome_of

HERE = Path(__file__).parent
CASES = HERE / "cases"
SUBFOLDER = "noetl5_cases"
_DAG_ID = re.compile(r'dag_id="([^"]+)"')
MISSING = "<missing>"


def load_cases() -> dict[str, dict[str, Any]]:
    """``area/name`` -> case document, sorted."""
    return {
        f"{path.parent.name}/{path.stem}": yaml.safe_load(path.read_text(encoding="utf-8"))
        for path in sorted(CASES.glob("*/*.yaml"))
    }


def needs(case: dict[str, Any]) -> set[str]:
    text = json.dumps([case["playbook"], case.get("children"), case.get("payload")])
    found = {"http"} if "@HTTP@" in text else set()
    if "pg_local" in text or "@PG_" in text:
        found.add("postgres")
    return found


def pg_places(dsn: str) -> dict[str, str]:
    """The throwaway Postgres's DSN and its parts, for a case that names its connection itself
    (``connection_string: "@PG_DSN@"``, ``host: "@PG_HOST@"``...). The cluster trusts local
    connections: no password, so no secret reaches a playbook."""
    from urllib.parse import urlsplit

    url = urlsplit(dsn)
    return {
        "@PG_DSN@": dsn,
        "@PG_HOST@": url.hostname or "127.0.0.1",
        '"@PG_PORT@"': str(url.port or 5432),  # the quoted placeholder becomes a number
        "@PG_USER@": url.username or "postgres",
        "@PG_DB@": url.path.lstrip("/"),
    }


def _compile_report(doc: dict[str, Any], name: str, workdir: Path, dialect: str | None):
    """(exit status, compiled files, what `noetlc compile` printed) for one playbook."""
    from noetl_compile.cli import main

    source = workdir / f"{name}.yaml"
    source.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    target = workdir / f"compiled_{name}"
    report = io.StringIO()
    args = ["compile", str(source), "-o", str(target)]
    with contextlib.redirect_stdout(report), contextlib.redirect_stderr(report):
        code = main(args + (["--dialect", dialect] if dialect else []))
    files = sorted(target.glob("**/*.py")) if target.exists() else []
    return code, files, report.getvalue()


def refusal(case: dict[str, Any], workdir: Path) -> str:
    """What noetlc's compile reports for a case it refuses on purpose (``refused: CODE``: a
    playbook NoETL 5 runs, which noetlc stops at compile with that diagnostic); '' when the
    case compiles."""
    places = {"@WORK@": str(workdir / "work")}
    dialect = None if case.get("detected") else case.get("dialect", "noetl5")
    code, files, report = _compile_report(
        _substitute(case["playbook"], places), case["name"], workdir, dialect
    )
    return "" if code == 0 and files else report


def _compile(doc: dict[str, Any], name: str, workdir: Path, out: Path, dialect: str | None):
    code, files, report = _compile_report(doc, name, workdir, dialect)
    assert code == 0 and files, f"{name} does not compile:\n{report}"
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for file in files:
            shutil.copy(file, out / file.name)
    text = files[0].read_text(encoding="utf-8")
    return _DAG_ID.search(text).group(1), text, report


def run_case(
    case: dict[str, Any],
    *,
    run_dag: Callable[..., Any],
    dags_folder: Path,
    workdir: Path,
    http_base: str | None = None,
    pg_dsn: str | None = None,
) -> dict[str, Any]:
    """The outcome noetlc produces for ``case``: status, steps_ran, results, calls, report,
    events."""
    from airflow_plugin.events import MemoryRecorder, set_default_recorder

    places = {"@WORK@": str(workdir / "work")}
    if http_base:
        places["@HTTP@"] = http_base
    (workdir / "work").mkdir(parents=True, exist_ok=True)
    dialect = None if case.get("detected") else case.get("dialect", "noetl5")
    # Connection placeholders go in, never back out: a port is a number a result may hold.
    inward = {**places, **(pg_places(pg_dsn) if pg_dsn else {})}
    children = dags_folder / SUBFOLDER
    try:
        for index, child in enumerate(case.get("children") or []):
            _compile(_substitute(child, places), f"child{index}", workdir, children, dialect)
        dag_id, source, report = _compile(
            _substitute(case["playbook"], inward), case["name"], workdir, None, dialect
        )
        recorder = MemoryRecorder()
        previous = set_default_recorder(recorder)
        try:
            out = run_dag(source, dag_id, _substitute(case.get("payload") or {}, places))
        finally:
            set_default_recorder(previous)
            (dags_folder / f"{dag_id}.py").unlink(missing_ok=True)
    finally:
        shutil.rmtree(children, ignore_errors=True)
    outcome = outcome_of(out, _payloads(source), recorder.events)
    outcome["report"] = report
    restored = _restore(outcome, places)
    restored["events"] = recorder.events  # the run's events as recorded (no placeholders)
    return restored


def _at(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def differences(expect: dict[str, Any], actual: dict[str, Any]) -> dict[str, str]:
    """field -> what NoETL 5's source says / what noetlc gave, for every field that differs."""
    found: dict[str, str] = {}
    if expect["status"] != actual["status"]:
        found["status"] = f"noetl5 {expect['status']} / noetlc {actual['status']}"
    if "steps_ran" in expect and sorted(expect["steps_ran"]) != sorted(actual["steps_ran"]):
        found["steps_ran"] = f"noetl5 {sorted(expect['steps_ran'])} / noetlc {actual['steps_ran']}"
    results = actual["results"]
    for step, value in (expect.get("results") or {}).items():
        if results.get(step, MISSING) != value:
            found[f"results.{step}"] = f"noetl5 {value!r} / noetlc {results.get(step, MISSING)!r}"
    for step, fields in (expect.get("fields") or {}).items():
        for path, value in fields.items():
            mine = _at(results.get(step, MISSING), str(path))
            if mine != value:
                found[f"fields.{step}.{path}"] = f"noetl5 {value!r} / noetlc {mine!r}"
    for step, keys in (expect.get("keys") or {}).items():
        mine = results.get(step)
        got = sorted(mine) if isinstance(mine, dict) else repr(mine)
        if got != sorted(keys):
            found[f"keys.{step}"] = f"noetl5 {sorted(keys)} / noetlc {got}"
    return found
