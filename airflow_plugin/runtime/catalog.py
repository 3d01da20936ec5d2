"""Compiled playbooks by DAG id: what an inline child run needs from the child's DAG file.

A ``playbook`` tool inside a pipeline, region or loop body (and every nested call under
``dag.test()``, which has no scheduler to run a child DAG) runs the child in this process with the
same runtime. The child's steps are the ones the compiler emitted into its DAG file, so the
catalog finds that file in the DAG folder (the generated ``dag_id="..."`` line), imports it once
(cached by path and mtime) and flattens its ``PAYLOADS``: regions into their member steps, a
fused loop into its lead, its loop step and its trail, loop steps stay loop payloads (the interpreter runs them), each decoded into its typed step once per
loaded file. Entry steps are the DAG's root tasks.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The compiler's own mapping (a standard-library leaf module): a templated child path must map to
# exactly the DAG id the compiler gave that playbook.
from noetl_compile.dag_ids import dag_id_for_path
from noetl_compile.step_decode import decode_fused_loop, decode_region, decode_step, without_fold

from ..errors import NoetlNotFound

__all__ = ["CompiledPlaybook", "PlaybookNotFound", "dag_id_for_path", "find_playbook"]


class PlaybookNotFound(NoetlNotFound):
    pass


@dataclass(frozen=True)
class CompiledPlaybook:
    dag_id: str
    file: str
    steps: Mapping[str, Mapping[str, Any]]  # step name -> payload (loops keep their loop payload)
    entry: list[str]
    workload: Mapping[str, Any]  # the DAG params' defaults
    doc: str = ""  # the DAG's doc_md: the playbook's source path and sha256 (event stamps)


_cache: dict[tuple[str, float], CompiledPlaybook] = {}
_lock = threading.Lock()


def _dags_folder() -> Path:
    folder = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER")
    if not folder:
        try:
            from airflow.configuration import conf

            folder = conf.get("core", "dags_folder")
        except Exception:  # noqa: BLE001 - no Airflow config: fall back to the working directory
            folder = "dags"
    return Path(folder)


def _file_for(dag_id: str, folder: Path) -> Path:
    # The `dag_id="..."` argument of `with DAG(`, at the start of its line: a parent's
    # `trigger_dag_id="<child>"` must never make the parent look like its child.
    needle = re.compile(rf'^[ \t]*+dag_id="{re.escape(dag_id)}"', re.MULTILINE)
    for path in sorted(folder.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if needle.search(text):
            return path
    raise PlaybookNotFound(
        f"no compiled DAG {dag_id!r} in {folder} (compile the child playbook into the DAG folder)"
    )


def _load(path: Path, dag_id: str) -> CompiledPlaybook:
    name = "noetl_child_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PlaybookNotFound(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    payloads: Mapping[str, Any] = module.PAYLOADS
    dag = module.dag
    # Decoded once per loaded file (the cache below), so the child's runs are handed typed steps.
    steps: dict[str, Mapping[str, Any]] = {}
    for payload in payloads.values():
        if "region" in payload:
            steps.update(decode_region(payload).steps)
            continue
        # A fused loop's task group also runs the steps before and after it (lower/fuse.py).
        lead, trail = decode_fused_loop(payload)
        steps.update((step.name, step) for step in lead)
        steps[payload["step"]] = decode_step(without_fold(payload))
        if trail is not None:
            steps.update(trail.steps)
    entry: list[str] = []
    for root in sorted(dag.roots, key=lambda t: list(payloads).index(t.task_id.split(".")[0])):
        payload = payloads[root.task_id.split(".")[0]]
        first = payload.get("lead") or [payload]  # a fused loop starts with its lead
        for step in payload.get("entry") or [first[0]["step"]]:
            if step not in entry:
                entry.append(step)
    workload = {key: dag.params[key] for key in dag.params}
    doc = getattr(dag, "doc_md", None) or ""
    return CompiledPlaybook(dag_id, str(path), steps, entry, workload, doc)


def find_playbook(dag_id: str, folder: str | Path | None = None) -> CompiledPlaybook:
    """The compiled playbook of ``dag_id`` in the DAG folder (cached while the file is unchanged)."""
    base = Path(folder) if folder is not None else _dags_folder()
    path = _file_for(dag_id, base)
    key = (str(path), path.stat().st_mtime)
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    loaded = _load(path, dag_id)
    with _lock:
        _cache[key] = loaded
    return loaded
