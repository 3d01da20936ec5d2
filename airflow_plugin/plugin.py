"""The Airflow plugin of noetlc, registered by the ``airflow.plugins`` entry point.

Installing the package is enough: every Airflow process (scheduler, API server, dag-processor,
triggerer, each task runner) loads it and gets the event-log listener (``events.listener``).
"""

from __future__ import annotations

from typing import ClassVar

from airflow.plugins_manager import AirflowPlugin

from .events.listener import EventLogListener


class NoetlPlugin(AirflowPlugin):
    name = "noetl"
    # An instance: a bare function or class registers nothing (airflow3.md section 7b).
    listeners: ClassVar[list[EventLogListener]] = [EventLogListener()]
