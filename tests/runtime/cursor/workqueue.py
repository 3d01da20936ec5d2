"""The seed's work queue for the cursor scale test and bench/cursor.py: the compiled step
payload of facility_queue.yaml, the queue tables, and the job file the slot processes read."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TYPES_PER_PATIENT, PATIENTS_PER_FACILITY = 5, 100


def compiled_payload(out: Path) -> dict[str, Any]:
    """The `work` step's payload as `noetlc compile` writes it into the DAG file."""
    from noetl_compile.cli import main

    if main(["compile", str(HERE / "facility_queue.yaml"), "-o", str(out)]) != 0:
        raise RuntimeError("facility_queue.yaml does not compile")
    (path,) = out.glob("*.py")
    spec = importlib.util.spec_from_file_location("facility_queue_dag", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PAYLOADS["work"]


def fill_queue(dsn: str, items: int) -> None:
    """``items`` claims in the seed's shape: per facility 100 patients x 5 data types."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS facility_queue, facility_results")
        conn.execute(
            "CREATE TABLE facility_queue (id serial PRIMARY KEY, facility int, patient int,"
            " data_type text, status text DEFAULT 'pending', attempt_count int DEFAULT 0,"
            " claimed_at timestamptz)"
        )
        # What a work queue needs so that a claim does not scan the items already done.
        conn.execute("CREATE INDEX ON facility_queue (status, id)")
        conn.execute(
            "CREATE TABLE facility_results (facility int, patient int, data_type text, pid int,"
            " PRIMARY KEY (facility, patient, data_type))"
        )
        conn.execute(
            "INSERT INTO facility_queue (facility, patient, data_type)"
            " SELECT 1 + (g - 1) / %(per_facility)s, 1 + ((g - 1) / %(types)s) %% %(patients)s,"
            " (ARRAY['labs','vitals','notes','meds','imaging'])[1 + (g - 1) %% %(types)s]"
            " FROM generate_series(1, %(items)s) g",
            {
                "per_facility": PATIENTS_PER_FACILITY * TYPES_PER_PATIENT,
                "types": TYPES_PER_PATIENT,
                "patients": PATIENTS_PER_FACILITY,
                "items": items,
            },
        )


def step_inputs(
    execution_id: int,
    slots: int,
    *,
    stale_seconds: float = 300,
    lease_seconds: float = 30,
    victim: int = 0,
    marker: str = "/nonexistent",
    pause_victim: int = 0,
    pause_marker: str = "/nonexistent",
    resume_file: str = "/nonexistent",
) -> dict[str, Any]:
    """The work step's inputs: the playbook's workload with the run's settings (``victim``: the
    item whose first claimer parks after writing its pid to ``marker``; ``pause_victim``: the
    item whose first claimer writes its pid to ``pause_marker`` and waits for ``resume_file``)."""
    return {
        "workload": {
            "pg_auth": "pg_local",
            "slots": slots,
            "stale_seconds": stale_seconds,
            "lease_seconds": lease_seconds,
            "victim": victim,
            "marker": marker,
            "pause_victim": pause_victim,
            "pause_marker": pause_marker,
            "resume_file": resume_file,
        },
        "results": {},
        "ctx": {},
        "vars": {},
        "args": {},
        "execution_id": execution_id,
    }


def write_job(path: Path, run_id: str, payload: dict, inputs: dict) -> Path:
    """The job every slot process of a run reads: payload, inputs, the cursor rendered once."""
    from airflow_plugin.runtime.cursor import claim_spec

    job = {
        "dag_id": "tests.facility_queue",
        "run_id": run_id,
        "payload": payload,
        "inputs": inputs,
        "cursor": claim_spec(payload, inputs).as_dict(),
    }
    path.write_text(json.dumps(job))
    return path


def read_job(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def start_slots(job: Path, slots: int, env: dict[str, str]) -> list[subprocess.Popen]:
    """One process per slot (slot.py), as an executor runs mapped slots."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return [
        subprocess.Popen(
            [sys.executable, str(HERE / "slot.py"), str(job), str(n)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n in range(slots)
    ]


def slot_report(job: Path, slot: int) -> dict[str, Any] | None:
    """What slot.py wrote for ``slot`` ({records, lease_lost, guarantee, started, finished});
    None if it died."""
    path = job.with_suffix(f".slot{slot}.json")
    return json.loads(path.read_text()) if path.exists() else None
