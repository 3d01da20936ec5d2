"""A process that records events through the real StoreRecorder and is SIGKILLed before they
are stored (run by ``test_killed_process``).

Usage: ``python killed_emitter.py URL OUTBOX COUNT JOURNALED SECRET``. It emits COUNT events
(each with SECRET under a secret-looking key), prints their ids as one JSON line, and kills
itself with SIGKILL: no flush, no atexit, no listener hook runs.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from airflow_plugin.events import Event, current_event_id, emit, recording, set_default_recorder
from airflow_plugin.events.outbox import Outbox
from airflow_plugin.events.store import EventStore
from airflow_plugin.events.writer import StoreRecorder

EXECUTION = "4242"


def main() -> None:
    url, outbox, count, journaled, secret = sys.argv[1:6]
    recorder = StoreRecorder(EventStore(url), Outbox(outbox), journaled=journaled == "1")
    set_default_recorder(recorder)
    ids = []
    with recording(dag_id="killed", run_id="manual__1", task_id="work", map_index=-1, try_number=1):
        for i in range(int(count)):
            emit(
                Event(
                    name="LoopIterationCompleted",
                    entity="loop",
                    entity_id=f"work#{i}",
                    status="success",
                    execution_id=EXECUTION,
                    step="work",
                    loop_id="work",
                    iteration=i,
                    data={"result": i, "api_password": secret},
                )
            )
            ids.append(current_event_id())
    print(json.dumps(ids), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
