"""Stage 6 — emit: IR -> one deterministic Airflow DAG file, see ``python.emit_python``."""

from __future__ import annotations

from .python import emit_python

__all__ = ["emit_python"]
