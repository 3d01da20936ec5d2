"""noetlc's Airflow plugin: runs compiled NoETL steps inside Airflow.

Importing this package does not import Airflow: ``airflow_plugin.runtime`` and
``airflow_plugin.tools`` are plain Python. ``NoetlStepOperator`` is resolved on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .operators.step import NoetlStepOperator

__all__ = ["NoetlStepOperator"]


def __getattr__(name: str) -> Any:
    if name == "NoetlStepOperator":
        from .operators.step import NoetlStepOperator

        return NoetlStepOperator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
