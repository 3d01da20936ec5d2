"""Where the execution view appears in Airflow's UI (plugin ``external_views``).

Airflow fills ``{DAG_ID}``, ``{RUN_ID}``, ``{TASK_ID}`` and ``{MAP_INDEX}`` in ``href`` and shows
the page in a tab of the DAG run and task instance pages.
"""

from __future__ import annotations

__all__ = ["EXTERNAL_VIEWS", "FASTAPI_APP_NAME", "MOUNT"]

# Where Airflow's API server mounts the app (plugin `fastapi_apps` url_prefix).
MOUNT = "/noetl"

FASTAPI_APP_NAME = "NoETL execution view"

EXTERNAL_VIEWS = [
    {
        "name": "NoETL",
        "href": f"{MOUNT}/runs/{{DAG_ID}}/{{RUN_ID}}",
        "destination": "dag_run",
        "url_route": "noetl-run",
    },
    {
        "name": "NoETL",
        "href": f"{MOUNT}/runs/{{DAG_ID}}/{{RUN_ID}}/tasks/{{TASK_ID}}?map_index={{MAP_INDEX}}",
        "destination": "task_instance",
        "url_route": "noetl-task",
    },
]
