"""The Airflow plugin of noetlc, registered by the ``airflow.plugins`` entry point.

Installing the package is enough: every Airflow process (scheduler, API server, dag-processor,
triggerer, each task runner) loads it and gets the event-log listener (``events.listener``).
The API server also mounts the NoETL execution view (``web.app``) under ``/noetl`` and the UI
shows it as a tab of DAG run and task instance pages (``web.views``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin

from .events.listener import EventLogListener
from .web.views import EXTERNAL_VIEWS, FASTAPI_APP_NAME, MOUNT


class _ExecutionViewApps:
    """``fastapi_apps``, built on first read: only the API server reads it, and a task runner
    that loads this plugin must not pay for importing FastAPI and Airflow's security module."""

    _apps: list[dict[str, Any]] | None = None

    def __get__(self, instance: Any, owner: Any) -> list[dict[str, Any]]:
        if _ExecutionViewApps._apps is None:
            from .web.app import create_app

            _ExecutionViewApps._apps = [
                {"app": create_app(), "url_prefix": MOUNT, "name": FASTAPI_APP_NAME}
            ]
        return _ExecutionViewApps._apps


class NoetlPlugin(AirflowPlugin):
    name = "noetl"
    # An instance: a bare function or class registers nothing (airflow3.md section 7b).
    listeners: ClassVar[list[EventLogListener]] = [EventLogListener()]
    fastapi_apps = _ExecutionViewApps()
    external_views: ClassVar[list[dict[str, str]]] = EXTERNAL_VIEWS
