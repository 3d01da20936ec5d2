"""Gates of a deployment, through Airflow's REST API: `noetlc gates` and `noetlc signal`.

Airflow keeps a waiting gate as a ``hitl_detail`` row of a task instance, in ``awaiting_input``
on 3.3 and ``deferred`` (to ``HITLTrigger``) on 3.1 and 3.2: which one is asked of
``compat.gate_wait_states`` with the version the API server reports (``GET /api/v2/version``),
as the CLI may run another Airflow than the deployment, or none. 3.0 has no gates. The API lists
them (``GET /api/v2/dags/~/dagRuns/~/hitlDetails``) and takes
an answer (``PATCH .../taskInstances/{task}/{map_index}/hitlDetails``), which resumes the task.
A gate is named by its NoETL execution (``templating.ids.execution_id_for(dag_id, run_id)``, what
`noetlc run` and the event log print) or by ``--dag``/``--run``, and by its step (task id).

Connection: ``--url``/``--user``/``--password`` or ``NOETL_AIRFLOW_URL`` (default
``http://localhost:8080``), ``NOETL_AIRFLOW_USER``, ``NOETL_AIRFLOW_PASSWORD``; a JWT from
``POST /auth/token``. Every failure is a :class:`GateCommandError` with a one-line message (no
such gate, already answered, not an assignee, server unreachable, login refused).

Only HTTP here, through the deployment's REST client (``deploy.rest.AirflowClient``): no Airflow
import.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from ..compat import gate_wait_states
from ..runtime.gates import GateAnswerError, parse_answer
from ..templating.ids import execution_id_for
from .rest import AirflowApiError, AirflowClient

__all__ = [
    "DEFAULT_URL",
    "GateCommandError",
    "answer_gate",
    "connect",
    "connection_settings",
    "find_gate",
    "waiting_gates",
]

DEFAULT_URL = "http://localhost:8080"
SETTLE_S = 10.0  # see _let_the_scheduler_see_the_park
_LIST = "dags/~/dagRuns/~/hitlDetails"


class GateCommandError(Exception):
    """What went wrong, in one line for the person at the terminal."""


def connect(url: str | None, user: str | None, password: str | None) -> AirflowClient:
    """A client for the API server (options first, then the environment); logs in now, so a
    wrong password or an unreachable server is told before anything else."""
    url, user, password = connection_settings(url, user, password)
    client = AirflowClient(url, user, password)
    try:
        client.token()
    except AirflowApiError as exc:
        client.close()
        raise GateCommandError(f"login to {url} as {user!r} refused: {_reason(exc)}") from None
    except httpx.HTTPError as exc:
        client.close()
        raise GateCommandError(
            f"cannot reach Airflow at {url}: {type(exc).__name__}: {exc}"
        ) from None
    return client


def _reason(exc: AirflowApiError) -> str:
    """Airflow's own words: the message after ``METHOD /path: ``."""
    text = " ".join(str(exc).split())
    return text.split(": ", 1)[1] if ": " in text else text


def _request(api: AirflowClient, method: str, path: str, **kwargs: Any) -> Any:
    try:
        return api.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        raise GateCommandError(
            f"cannot reach Airflow at {api.base_url}: {type(exc).__name__}: {exc}"
        ) from None


def connection_settings(
    url: str | None, user: str | None, password: str | None
) -> tuple[str, str, str]:
    """Options first, then ``NOETL_AIRFLOW_URL``/``_USER``/``_PASSWORD``."""
    url = url or os.environ.get("NOETL_AIRFLOW_URL") or DEFAULT_URL
    user = user or os.environ.get("NOETL_AIRFLOW_USER")
    password = password or os.environ.get("NOETL_AIRFLOW_PASSWORD")
    if not user or not password:
        raise GateCommandError(
            "no Airflow user: pass --user and --password or set NOETL_AIRFLOW_USER and "
            "NOETL_AIRFLOW_PASSWORD"
        )
    return url, user, password


def _gate_row(detail: Mapping[str, Any]) -> dict[str, Any]:
    ti = detail.get("task_instance") or {}
    dag_id, run_id = ti.get("dag_id"), ti.get("dag_run_id")
    return {
        "execution_id": str(execution_id_for(dag_id, run_id)),
        "dag_id": dag_id,
        "run_id": run_id,
        "gate": ti.get("task_id"),
        "map_index": ti.get("map_index", -1),
        "state": ti.get("state"),
        "since": detail.get("created_at"),
        "subject": detail.get("subject"),
        "body": detail.get("body"),
        "assignees": [u.get("id") for u in detail.get("assigned_users") or []],
        "options": list(detail.get("options") or []),
        "defaults": detail.get("defaults"),
        "params": dict(detail.get("params") or {}),
        "answered": bool(detail.get("response_received")),
        "responded_by": (detail.get("responded_by_user") or {}).get("id"),
        "responded_at": detail.get("responded_at"),
    }


def _list(api: AirflowClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        details = api.pages(_LIST, "hitl_details", params)
    except httpx.HTTPError as exc:
        raise GateCommandError(
            f"cannot reach Airflow at {api.base_url}: {type(exc).__name__}: {exc}"
        ) from None
    return [_gate_row(d) for d in details]


def _wait_states(api: AirflowClient) -> list[str]:
    """The states a waiting gate is in on this deployment's Airflow; a deployment without gates
    (Airflow 3.0) is told as such rather than as a missing endpoint."""
    about = _request(api, "GET", "version") or {}
    version = str(about.get("version") or "")
    states = gate_wait_states(version)
    if not states:
        raise GateCommandError(
            f"Airflow {version} at {api.base_url} has no approve/input gates (they need "
            "Airflow 3.1 or later)"
        )
    return list(states)


def waiting_gates(api: AirflowClient) -> list[dict[str, Any]]:
    """Every gate waiting for an answer, oldest first."""
    rows = _list(api, {"response_received": False, "state": _wait_states(api)})
    return sorted(rows, key=lambda r: str(r["since"] or ""))


def find_gate(
    api: AirflowClient,
    gate: str,
    execution: str | None = None,
    dag_id: str | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """The gate ``gate`` of one execution (or of ``dag_id``/``run_id``), answered or not."""
    _wait_states(api)
    if dag_id and run_id:
        path = "/".join(
            quote(str(p), safe="")
            for p in ("dags", dag_id, "dagRuns", run_id, "taskInstances", gate, "-1")
        )
        try:
            detail = _request(api, "GET", f"{path}/hitlDetails")
            return _gate_row(_with_ti(detail, dag_id, run_id))
        except AirflowApiError as exc:
            if exc.status_code == 404:
                raise GateCommandError(f"no gate {gate!r} in run {dag_id} / {run_id}") from None
            raise
    if not execution:
        raise GateCommandError("name the execution, or --dag and --run")
    rows = [r for r in _list(api, {"task_id": gate}) if r["execution_id"] == str(execution)]
    if not rows:
        waiting = [r["gate"] for r in waiting_gates(api) if r["execution_id"] == str(execution)]
        known = f"; waiting there: {', '.join(waiting)}" if waiting else ""
        raise GateCommandError(f"no gate {gate!r} in execution {execution}{known}")
    return rows[-1]


def _let_the_scheduler_see_the_park(row: Mapping[str, Any]) -> None:
    """Wait until the gate has waited ``SETTLE_S`` seconds before answering it.

    Airflow 3.3.2 race (seen on the stack: 1 answer in ~8 given within a second failed the
    task): the answer resumes the task (SCHEDULED, then QUEUED) before the scheduler has handled
    the executor's "success" event of the workload that parked it; the scheduler then finds a
    finished workload for a QUEUED task instance and marks it failed (its resume-after-defer
    guard in ``_process_executor_events`` covers SCHEDULED only). That event comes when the
    parking worker process has exited, which took up to 6 s on a loaded 2-core machine. A person
    never answers that fast; a script might, so the command waits out the window."""
    since = row.get("since")
    if not since:
        return
    try:
        created = datetime.fromisoformat(str(since))
    except ValueError:
        return
    age = (datetime.now(UTC) - created).total_seconds()
    if age < SETTLE_S:
        time.sleep(SETTLE_S - age)


def _with_ti(detail: Mapping[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    ti = dict(detail.get("task_instance") or {})
    ti.setdefault("dag_id", dag_id)
    ti.setdefault("dag_run_id", run_id)
    return {**detail, "task_instance": ti}


def answer_gate(
    api: AirflowClient,
    row: Mapping[str, Any],
    *,
    approve: bool = False,
    reject: bool = False,
    values: Sequence[str] = (),
) -> dict[str, Any]:
    """Answer the gate ``row`` (from :func:`find_gate`); returns Airflow's record of it."""
    gate = row["gate"]
    where = f"gate {gate!r} of execution {row['execution_id']}"
    if row["answered"]:
        raise GateCommandError(
            f"{where} was already answered by {row['responded_by'] or 'its timeout default'} "
            f"at {row['responded_at']}"
        )
    params = row["params"]
    if params and (approve or reject):
        raise GateCommandError(f"{where} is an input gate: answer it with --value NAME=VALUE")
    if not params and values:
        raise GateCommandError(f"{where} is an approve gate: answer it with --approve or --reject")
    if params:
        texts = list(values)
        if not texts:
            raise GateCommandError(
                f"{where} is an input gate: give --value NAME=VALUE for {', '.join(params)}"
            )
    elif approve or reject:
        texts = ["approve" if approve else "reject"]
    else:
        raise GateCommandError(f"{where} is an approve gate: say --approve or --reject")
    try:
        chosen, params_input = parse_answer(texts, row["options"], params)
    except GateAnswerError as exc:
        raise GateCommandError(f"{where}: {exc}") from None
    _let_the_scheduler_see_the_park(row)
    path = "/".join(
        quote(str(p), safe="")
        for p in (
            "dags",
            row["dag_id"],
            "dagRuns",
            row["run_id"],
            "taskInstances",
            gate,
            str(row["map_index"]),
        )
    )
    try:
        return _request(
            api,
            "PATCH",
            f"{path}/hitlDetails",
            json_body={"chosen_options": chosen, "params_input": params_input},
        )
    except AirflowApiError as exc:
        if exc.status_code == 409:
            raise GateCommandError(f"{where} was already answered") from None
        if exc.status_code == 403:
            who = ", ".join(row["assignees"]) or "its assignees"
            raise GateCommandError(
                f"{where} may be answered only by {who}: {_reason(exc)}"
            ) from None
        if exc.status_code == 404:
            raise GateCommandError(f"{where} is gone: {_reason(exc)}") from None
        raise GateCommandError(f"{where}: Airflow refused: {_reason(exc)}") from None
