"""The job store: one JSON file per quantum job, so a later task (another process) finds it.

A local simulator job lives in the memory of the process that ran it; ``op: status`` and
``op: results`` run in later tasks, often other processes. Every job's record (job id, provider,
status, result or error, provenance) is written to ``<folder>/<job_id>.json``; the folder is
``NOETL_QUANTUM_JOBS_DIR``, else ``quantum-jobs`` under the NoETL state folder
(``NOETL_EVENTS_DIR``, default ``$AIRFLOW_HOME/noetl``). Writes go to a temporary file in the
same folder, fsynced, then renamed over the record, so a reader never sees half a file. The
folder is local to the machine: workers that share jobs need a shared volume there.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...hooks.state import state_directory
from .errors import QuantumError

__all__ = ["jobs_folder", "load_job", "save_job"]

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")


def jobs_folder() -> Path:
    explicit = os.environ.get("NOETL_QUANTUM_JOBS_DIR")
    if explicit:
        return Path(explicit).expanduser()
    return state_directory() / "quantum-jobs"


def _path(job_id: str) -> Path:
    # A job id becomes a file name: refuse anything that could leave the folder.
    if not _SAFE_ID.match(job_id) or ".." in job_id:
        raise QuantumError(
            "QuantumJobNotFound",
            f"{job_id!r} is not a job id (letters, digits, '-', '_', '.', ':')",
            code="JOB_NOT_FOUND",
        )
    return jobs_folder() / f"{job_id.replace(':', '_')}.json"


def save_job(record: Mapping[str, Any]) -> Path:
    path = _path(str(record["job_id"]))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".job-", suffix=".tmp")
    except OSError as exc:
        raise _store_error(path, exc) from None
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(record, out, sort_keys=True, default=str)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _store_error(path, exc) from None
        raise
    return path


def _store_error(path: Path, exc: OSError) -> QuantumError:
    # The job ran, but a later task could not find it: the call fails rather than hand out an
    # id nobody can look up (NOETL_QUANTUM_JOBS_DIR moves the store to a writable place).
    return QuantumError(
        "QuantumJobStoreError",
        f"cannot write the job record {path}: {exc.strerror or exc}",
        code="JOB_STORE",
    )


def load_job(job_id: str) -> dict[str, Any] | None:
    """The record of ``job_id``, or None when this store has never seen it."""
    path = _path(job_id)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise QuantumError(
            "QuantumJobStoreError",
            f"the record of job {job_id} ({path}) is not valid JSON: {exc}",
            code="JOB_STORE",
        ) from None
