"""The FastAPI app of the execution view, mounted by Airflow's API server under ``/noetl``.

Routes (``dag_id`` and ``run_id`` are path parameters, so Airflow's ``requires_access_dag``
checks exactly that DAG):

* ``GET /noetl/runs/{dag_id}/{run_id}``: the page for a DAG run (timeline, state, loops,
  gates, results); needs read access to the DAG's runs;
* ``GET /noetl/runs/{dag_id}/{run_id}/tasks/{task_id}?map_index=``: the same page narrowed to
  one task instance; needs read access to the DAG's task instances;
* ``GET /noetl/api/runs/{dag_id}/{run_id}/events`` and ``.../state``: the same data as JSON
  (the state is ``noetlc status --json``);
* ``GET /noetl/static/...``: the stylesheet and script (no data).

Authentication is Airflow's: the UI's session cookie or ``Authorization: Bearer <jwt>``. An
anonymous request for a page is sent to Airflow's login page (which returns to the page), as
Airflow's own UI does; an anonymous request to the JSON API gets 401. Users without access to
the DAG get 403 either way.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..templating.ids import ids_as_text
from .data import RunView, load_run
from .render import render_run
from .views import MOUNT  # noqa: F401 - the prefix the plugin mounts this app under

__all__ = ["create_app"]

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
# The page loads only its own stylesheet and script; no frame but Airflow's own may embed it.
_CSP = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)

_read_run = Depends(requires_access_dag("GET", DagAccessEntity.RUN))
_read_task = Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))


def _view(dag_id: str, run_id: str) -> RunView:
    from ..events.store import StoreUnavailable

    try:
        return load_run(dag_id, run_id)
    except StoreUnavailable as exc:
        raise HTTPException(503, f"the NoETL event log is unreachable: {exc}") from exc


def _html(text: str) -> HTMLResponse:
    return HTMLResponse(
        text,
        headers={
            "Content-Security-Policy": _CSP,
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        },
    )


def _json(value: Any) -> JSONResponse:
    import json

    # default=str: timestamps; the round trip keeps the response plain JSON.
    return JSONResponse(
        json.loads(json.dumps(value, default=str)), headers={"Cache-Control": "no-store"}
    )


def _static(request: Request) -> str:
    return f"{request.scope.get('root_path', '')}/static"


def _login_url(request: Request) -> str:
    """Airflow's login page, coming back to ``request``'s page (the auth manager's own URL)."""
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager().get_url_login(next_url=str(request.url))


async def _unauthenticated(request: Request, exc: StarletteHTTPException) -> Response:
    """A page asked for without a login goes to the login page, not to raw JSON."""
    is_page = request.method == "GET" and not request.url.path.startswith(
        f"{request.scope.get('root_path', '')}/api/"
    )
    if exc.status_code == 401 and is_page:
        try:
            return RedirectResponse(_login_url(request), status_code=303)
        except Exception:
            log.exception("NoETL view: Airflow's auth manager gave no login page; answering 401")
    return await http_exception_handler(request, exc)


def create_app() -> FastAPI:
    app = FastAPI(title="NoETL execution view", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_exception_handler(StarletteHTTPException, _unauthenticated)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/runs/{dag_id}/{run_id}", dependencies=[_read_run], response_class=HTMLResponse)
    def run_page(request: Request, dag_id: str, run_id: str) -> HTMLResponse:
        return _html(render_run(_view(dag_id, run_id), static=_static(request)))

    @app.get(
        "/runs/{dag_id}/{run_id}/tasks/{task_id}",
        dependencies=[_read_task],
        response_class=HTMLResponse,
    )
    def task_page(
        request: Request, dag_id: str, run_id: str, task_id: str, map_index: str = "-1"
    ) -> HTMLResponse:
        # Airflow's UI leaves `{MAP_INDEX}` unfilled on the page of an unmapped task: all tries.
        index = int(map_index) if map_index.lstrip("-").isdigit() else -1
        view = _view(dag_id, run_id)
        return _html(render_run(view, static=_static(request), task=(task_id, index)))

    @app.get("/api/runs/{dag_id}/{run_id}/events", dependencies=[_read_run])
    def run_events(dag_id: str, run_id: str) -> JSONResponse:
        view = _view(dag_id, run_id)
        # ids as text, as the CLI's --json prints them (63 bits: past JavaScript's integers)
        return _json(ids_as_text({"execution_id": view.execution_id, "events": view.events}))

    @app.get("/api/runs/{dag_id}/{run_id}/state", dependencies=[_read_run])
    def run_state(dag_id: str, run_id: str) -> JSONResponse:
        view = _view(dag_id, run_id)
        return _json(ids_as_text({**view.state, "gate_history": view.gates}))

    return app
