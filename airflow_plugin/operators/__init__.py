"""Airflow operators of the plugin (these modules import Airflow)."""

from __future__ import annotations

from .step import NoetlStepOperator

__all__ = ["NoetlStepOperator"]
