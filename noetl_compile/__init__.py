"""noetlc: a compiler from NoETL playbooks to Apache Airflow 3 DAGs (see ARCHITECTURE.md)."""

__version__ = "0.1.0"  # kept equal to pyproject.toml's version by tests/test_cli.py
