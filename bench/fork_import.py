"""One DAG file import per forked child, as Airflow's DAG processor parses files: the timing loop
of bench/dag_import.py and bench/dag_import_baseline.py.

Standard library only (and `airflow.sdk` inside each child), so the baseline bench can load this
file by its path inside an older tree's interpreter without putting today's tree on the path.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import struct
import time
from collections.abc import Iterable
from pathlib import Path

_RECORD = "ddI"  # wall seconds, CPU seconds of the child, 1 when the file built a DAG


def import_each(
    files: Iterable[str | Path], preload: Iterable[str], freeze: bool = True
) -> list[tuple[float, float, bool]]:
    """Import each file in a child forked from this process after the ``preload`` imports ->
    (wall seconds, CPU seconds, built a DAG) per file. CPU time is the steadier number on a
    shared machine: another process's load stretches wall time but hardly the child's CPU."""
    for module in preload:
        __import__(module)
    if freeze:
        # Airflow's DAG processor manager freezes its heap before it forks parsers
        # (dag_processing/manager.py, "to prevent COW"). Without it a child whose allocations
        # reach a full collection walks the whole inherited heap: +150-250 ms for that file,
        # decided by where a threshold falls rather than by what the file does.
        gc.freeze()
    size = struct.calcsize(_RECORD)
    out = []
    for path in files:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(read)
            os.write(write, struct.pack(_RECORD, *_import_one(Path(path))))
            os._exit(0)
        os.close(write)
        data = b""
        while len(data) < size:
            chunk = os.read(read, 64)
            if not chunk:
                break
            data += chunk
        os.close(read)
        os.waitpid(pid, 0)
        wall, cpu, ok = struct.unpack(_RECORD, data) if len(data) == size else (0.0, 0.0, 0)
        out.append((wall, cpu, bool(ok)))
    return out


def _import_one(path: Path) -> tuple[float, float, int]:
    ok = 1
    start, cpu = time.perf_counter(), time.process_time()
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        from airflow.sdk import DAG

        ok = int(any(isinstance(v, DAG) for v in vars(module).values()))
    except Exception:  # noqa: BLE001 - reported by the caller, never timed as a success
        ok = 0
    return time.perf_counter() - start, time.process_time() - cpu, ok
