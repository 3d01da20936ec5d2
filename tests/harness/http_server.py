"""The local HTTP API for tests: the session fixture over the server ``noetlc demo up`` runs.

The server itself (routes, the table of corpus playbooks they serve) lives in
``airflow_plugin/local/demo/http_server.py``, so that tests, benches and the demo serve exactly one
implementation. This module adds the pytest fixture and keeps the names tests import.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_plugin.local.demo.http_core import (
    API_KEY,
    API_KEY_HEADER,
    BASIC_PASSWORD,
    BASIC_USER,
    BEARER_TOKEN,
    TOTAL_ITEMS,
)
from airflow_plugin.local.demo.http_public_routes import forecast_temperature
from airflow_plugin.local.demo.http_server import main, start_server

__all__ = [
    "API_KEY",
    "API_KEY_HEADER",
    "BASIC_PASSWORD",
    "BASIC_USER",
    "BEARER_TOKEN",
    "TOTAL_ITEMS",
    "forecast_temperature",
    "http_server",
    "start_server",
]


@pytest.fixture(scope="session")
def http_server() -> Iterator[str]:
    """Base URL (``http://127.0.0.1:<port>``) of a local API shared by the test session."""
    base_url, stop = start_server()
    yield base_url
    stop()


if __name__ == "__main__":  # kept for old notes: `python -m tests.harness.http_server --port 5555`
    main()
