"""A small client for the Airflow 3 REST API (``/api/v2``) of a running deployment.

Used by the deployment tests and meant for the CLI's commands that talk to a deployment
(signals, gates). It covers what driving a compiled playbook needs: a JWT from
``POST /auth/token`` (SimpleAuthManager or any manager that issues tokens for a user/password),
waiting for a DAG to be parsed, unpausing, triggering a run with ``conf``, waiting for the run,
reading its task instances and XCom return values, and clearing task instances of one run.

Lists are read page by page (:meth:`AirflowClient.pages`): the server caps a page at its
``maximum_page_limit`` (100 by default) whatever ``limit`` asks, so one request for 1,000 rows
gets 100 of them; the client follows ``total_entries`` with ``offset`` until it holds them all,
and raises when the server stops giving rows before the total it announced.

Every call raises :class:`AirflowApiError` naming the method, path, status and Airflow's
``detail`` when the answer is not a success, so a failing test or command says what the server
refused and why. Generic requests go through :meth:`AirflowClient.request` (for endpoints this
module does not wrap yet, e.g. HITL details). Tokens are never logged or put in messages.

    client = AirflowClient.from_stack("/path/to/.stack")      # reads stack.json + passwords
    run = client.trigger("hello_world", conf={"message": "hi"})
    done = client.wait_for_run("hello_world", run["dag_run_id"])
    result = client.xcom_return("hello_world", run["dag_run_id"], "end")
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

import httpx

__all__ = ["FINISHED_RUN_STATES", "PAGE_SIZE", "AirflowApiError", "AirflowClient"]

FINISHED_RUN_STATES = frozenset({"success", "failed"})
# Rows asked per page: Airflow's default maximum_page_limit, so no page is cut short by it.
PAGE_SIZE = 100


class AirflowApiError(RuntimeError):
    """The API answered with an error status, or a wait ran out of time."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def _path(*parts: str) -> str:
    return "/".join(quote(str(part), safe="") for part in parts)


class AirflowClient:
    """One deployment's API at ``base_url`` (``http://host:port``), as ``username``."""

    def __init__(
        self,
        base_url: str,
        username: str,
        password: str,
        *,
        timeout: float = 30.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.page_size = page_size
        self.username = username
        self._password = password
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout)
        self._token: str | None = None

    @classmethod
    def from_stack(cls, state: str | Path) -> AirflowClient:
        """A client for the stack started by ``scripts/airflow-stack.sh up`` in ``state``."""
        manifest = json.loads((Path(state) / "stack.json").read_text())
        passwords = json.loads(Path(manifest["password_file"]).read_text())
        return cls(manifest["api_url"], manifest["user"], passwords[manifest["user"]])

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------------------

    def token(self) -> str:
        """A JWT for the user (fetched once, again after a 401)."""
        if self._token is None:
            response = self._http.post(
                "/auth/token", json={"username": self.username, "password": self._password}
            )
            if response.status_code not in (200, 201):
                raise AirflowApiError(
                    f"POST /auth/token as {self.username!r}: {response.status_code} "
                    f"{_detail(response)}",
                    response.status_code,
                )
            self._token = response.json()["access_token"]
        return self._token

    def request(self, method: str, path: str, *, json_body: Any = None, params: Any = None) -> Any:
        """``method`` on ``/api/v2/<path>``; the decoded JSON answer (None when empty)."""
        url = "/api/v2/" + path.lstrip("/")
        for attempt in (1, 2):
            response = self._http.request(
                method,
                url,
                json=json_body,
                params=params,
                headers={"Authorization": f"Bearer {self.token()}"},
            )
            if response.status_code == 401 and attempt == 1:
                self._token = None  # expired: log in again once
                continue
            break
        if response.status_code >= 400:
            raise AirflowApiError(
                f"{method} {url}: {response.status_code} {_detail(response)}",
                response.status_code,
            )
        return response.json() if response.content else None

    def pages(
        self, path: str, key: str, params: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Every row of the list at ``path`` (the answer's ``key`` list), page by page until
        ``total_entries`` rows are read. The server may cap a page below ``limit``: the next
        offset is what was received, not what was asked."""
        rows: list[dict[str, Any]] = []
        while True:
            page = self.request(
                "GET",
                path,
                params={**dict(params or {}), "limit": self.page_size, "offset": len(rows)},
            )
            got = list(page.get(key) or [])
            total = int(page.get("total_entries") or 0)
            rows += got
            if len(rows) >= total:
                return rows
            if not got:
                raise AirflowApiError(
                    f"GET /api/v2/{path.lstrip('/')}: the server announced {total} {key} "
                    f"but stopped giving rows after {len(rows)} (offset ignored?)"
                )

    # -- DAGs ---------------------------------------------------------------------------------

    def get_dag(self, dag_id: str) -> dict[str, Any]:
        return self.request("GET", _path("dags", dag_id))

    def wait_for_dag(self, dag_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """The DAG once the dag-processor has parsed it (raises after ``timeout`` s, with the
        import errors Airflow recorded, if any)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.get_dag(dag_id)
            except AirflowApiError as error:
                if error.status_code != 404:
                    raise
            if time.monotonic() > deadline:
                errors = self.request("GET", "importErrors").get("import_errors", [])
                raise AirflowApiError(
                    f"DAG {dag_id!r} not parsed after {timeout:.0f} s; import errors: {errors}"
                )
            time.sleep(1.0)

    def set_paused(self, dag_id: str, paused: bool) -> dict[str, Any]:
        return self.request("PATCH", _path("dags", dag_id), json_body={"is_paused": paused})

    # -- runs ---------------------------------------------------------------------------------

    def trigger(
        self,
        dag_id: str,
        conf: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        unpause: bool = True,
        wait_for_dag: float = 120.0,
    ) -> dict[str, Any]:
        """Start a run of ``dag_id`` now (``logical_date`` null: any number of runs may run at
        once); unpauses the DAG first unless told not to. Returns the DAG run (``dag_run_id``)."""
        if wait_for_dag:
            self.wait_for_dag(dag_id, wait_for_dag)
        if unpause:
            self.set_paused(dag_id, False)
        body = {
            "dag_run_id": run_id or f"noetl__{uuid.uuid4().hex[:12]}",
            "logical_date": None,
            "conf": dict(conf or {}),
        }
        return self.request("POST", _path("dags", dag_id, "dagRuns"), json_body=body)

    def get_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.request("GET", _path("dags", dag_id, "dagRuns", run_id))

    def wait_for_run(
        self,
        dag_id: str,
        run_id: str,
        *,
        timeout: float = 180.0,
        states: Iterable[str] = FINISHED_RUN_STATES,
        interval: float = 1.0,
    ) -> dict[str, Any]:
        """Poll until the run's state is one of ``states``; raises with the task states after
        ``timeout`` s."""
        wanted = set(states)
        deadline = time.monotonic() + timeout
        while True:
            run = self.get_run(dag_id, run_id)
            if run["state"] in wanted:
                return run
            if time.monotonic() > deadline:
                tasks = {ti["task_id"]: ti["state"] for ti in self.task_instances(dag_id, run_id)}
                raise AirflowApiError(
                    f"run {dag_id}/{run_id} still {run['state']!r} after {timeout:.0f} s "
                    f"(tasks: {tasks})"
                )
            time.sleep(interval)

    # -- task instances and XCom --------------------------------------------------------------

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run, mapped instances each (all pages)."""
        return self.pages(
            _path("dags", dag_id, "dagRuns", run_id, "taskInstances"), "task_instances"
        )

    def clear_task_instances(
        self,
        dag_id: str,
        run_id: str,
        task_ids: Iterable[str],
        *,
        include_downstream: bool = True,
        dry_run: bool = False,
    ) -> list[dict[str, Any]]:
        """Clear ``task_ids`` (every map index of a mapped one) of the run ``run_id`` and, unless
        told not to, their downstream tasks, whatever their state; the run is set running again.
        The run is named by ``dag_run_id``, never by dates, so a run without a logical date (as
        :meth:`trigger` starts them) is cleared like any other. Returns the task instances
        cleared (with ``dry_run``: that would be)."""
        body = {
            "dry_run": dry_run,
            "dag_run_id": run_id,
            "task_ids": sorted(set(task_ids)),
            "include_downstream": include_downstream,
            "include_upstream": False,
            "only_failed": False,
            "reset_dag_runs": True,
        }
        answer = self.request("POST", _path("dags", dag_id, "clearTaskInstances"), json_body=body)
        return list((answer or {}).get("task_instances") or [])

    def task_instance(
        self, dag_id: str, run_id: str, task_id: str, map_index: int = -1
    ) -> dict[str, Any]:
        path = _path("dags", dag_id, "dagRuns", run_id, "taskInstances", task_id)
        if map_index >= 0:
            path += f"/{map_index}"
        return self.request("GET", path)

    def xcom(
        self, dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1
    ) -> Any:
        """The value of one XCom entry, deserialized (as the task pushed it)."""
        path = _path(
            "dags", dag_id, "dagRuns", run_id, "taskInstances", task_id, "xcomEntries", key
        )
        answer = self.request(
            "GET", path, params={"map_index": map_index, "deserialize": True, "stringify": False}
        )
        return answer["value"]

    def xcom_return(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
        return self.xcom(dag_id, run_id, task_id, "return_value", map_index)


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    return str(detail)[:2000]
