"""One cursor worker slot in its own process, as an executor runs it: ``slot.py JOB.json SLOT``.

It drains the claim with ``runtime.cursor.drain`` (the code the worker operator runs), records
its events to the store the environment names (``NOETL_EVENTS_URL``) under its own task
coordinates, and writes ``{records, lease_lost, guarantee, started, finished}`` (wall-clock
seconds around the drain, after the imports) to ``<JOB>.slot<SLOT>.json``. Used by tests/runtime/test_cursor_scale.py and
bench/cursor.py.
"""

import json
import sys
import time
from pathlib import Path

from airflow_plugin.drivers import ClaimSpec, open_driver
from airflow_plugin.events import current_recorder, flush, recording
from airflow_plugin.runtime.cursor import drain


def main() -> None:
    job_path, slot = Path(sys.argv[1]), int(sys.argv[2])
    job = json.loads(job_path.read_text())
    spec = ClaimSpec.from_dict(job["cursor"])
    # What an executor's task process has done before the task starts: imports (Airflow's
    # connection lookup, psycopg, the event store), so the drain window times the drain only.
    driver = open_driver(spec)
    store = getattr(current_recorder(), "store", None)
    if store is not None:
        store.migrate()
    with recording(
        dag_id=job["dag_id"],
        run_id=job["run_id"],
        task_id="work.worker",
        map_index=slot,
        try_number=1,
    ) as recorder:
        started = time.time()
        records = drain(job["payload"], job["inputs"], spec, slot, driver=driver)
        finished = time.time()
    driver.close()
    assert flush(recorder, 60), "events did not reach the store"
    report = {
        "records": list(records),
        "lease_lost": records.lease_lost,
        "guarantee": records.guarantee,
        "skipped": records.skipped,
        "started": started,
        "finished": finished,
    }
    job_path.with_suffix(f".slot{slot}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
