"""One cursor worker slot in its own process, as an executor runs it: ``slot.py JOB.json SLOT``.

It drains the claim with ``runtime.cursor.drain`` (the code the worker operator runs), records
its events to the store the environment names (``NOETL_EVENTS_URL``) under its own task
coordinates, and writes ``{records, started, finished}`` (wall-clock seconds around the drain,
after the imports) to ``<JOB>.slot<SLOT>.json``. Used by tests/runtime/test_cursor_scale.py and
bench/cursor.py.
"""

import json
import sys
import time
from pathlib import Path

from airflow_plugin.drivers import ClaimSpec
from airflow_plugin.events import flush, recording
from airflow_plugin.runtime.cursor import drain


def main() -> None:
    job_path, slot = Path(sys.argv[1]), int(sys.argv[2])
    job = json.loads(job_path.read_text())
    with recording(
        dag_id=job["dag_id"],
        run_id=job["run_id"],
        task_id="work.worker",
        map_index=slot,
        try_number=1,
    ) as recorder:
        started = time.time()
        records = drain(job["payload"], job["inputs"], ClaimSpec.from_dict(job["cursor"]), slot)
        finished = time.time()
    assert flush(recorder, 60), "events did not reach the store"
    report = {"records": records, "started": started, "finished": finished}
    job_path.with_suffix(f".slot{slot}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
