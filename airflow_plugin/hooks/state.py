"""Where the plugin keeps its local state: ``NOETL_EVENTS_DIR``, else ``$AIRFLOW_HOME/noetl``
(``~/airflow/noetl`` without an Airflow home). The event log's SQLite file and outbox live there
(``events.config``), and so do the quantum tool's job records (``tools/quantum/jobs``): one
folder per deployment, named by one rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["airflow_home", "state_directory"]


def airflow_home(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("AIRFLOW_HOME") or Path.home() / "airflow")


def state_directory(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("NOETL_EVENTS_DIR") or airflow_home(env) / "noetl").expanduser()
