"""``[core] hostname_callable`` for the stack's processes.

Two Celery workers on one machine share its FQDN, so the task instances' ``hostname`` could not
tell which worker ran a task. The stack gives each worker a name in ``NOETL_WORKER_HOSTNAME``
and points Airflow's hostname callable here.
"""

from __future__ import annotations

import os
import socket

__all__ = ["worker_hostname"]


def worker_hostname() -> str:
    """``NOETL_WORKER_HOSTNAME`` when set, else the machine's FQDN (Airflow's default)."""
    return os.environ.get("NOETL_WORKER_HOSTNAME") or socket.getfqdn()
