"""The tool kinds the Airflow runtime (``airflow_plugin``) can execute.

``noetlc check`` warns (C515) about a tool whose kind the runtime has no executor for, so the gap
shows up before deploy rather than as a failed task. The compiler must not import
``airflow_plugin`` (``noetlc check`` runs in a plain CI job, without Airflow), so the list is
written down here; ``tests/test_check_runtime_support.py`` holds it equal to the runtime's own
registry so that the two cannot drift apart.
"""

from __future__ import annotations

__all__ = ["NEEDS", "OPERATOR_KINDS", "REGISTRY_KINDS", "RUNTIME_KINDS", "runtime_executes"]

# Kinds with an executor in ``airflow_plugin.tools.registry`` (``available_tools()``).
REGISTRY_KINDS: frozenset[str] = frozenset(
    {
        "python",
        "noop",
        "http",
        "postgres",
        "duckdb",
        "secrets",
        "secret_manager",
        "credential",
        "transfer",
        "quantum",
        "playbook",  # inline, inside a pipeline, region or loop body
        "playbooks",
        "shell",
    }
)

# Kinds the runtime also (or only) handles outside the registry: a step-level nested playbook is
# a child DAG run (NoetlPlaybookOperator), a workbook call is resolved to the workbook task's
# tool, and gates are HITL operators and deferrable sensors.
OPERATOR_KINDS: frozenset[str] = frozenset({"playbook", "playbooks", "workbook", "gate"})

RUNTIME_KINDS: frozenset[str] = REGISTRY_KINDS | OPERATOR_KINDS


_NOETL_ONLY = (
    "only NoETL's own engine runs it (Airflow has no counterpart): run this playbook on NoETL"
)
# What a kind the runtime cannot execute would need (C515's hint for NoETL 5 playbooks): an
# Airflow provider a user would install and an executor written on its hook, or NoETL itself.
NEEDS: dict[str, str] = {
    "snowflake": "needs an executor on apache-airflow-providers-snowflake's SnowflakeHook "
    "(not written yet)",
    "snowflake_transfer": "needs an executor on the Snowflake and Postgres hooks (not written yet)",
    "gcs": "needs an executor on apache-airflow-providers-google's GCSHook (not written yet)",
    "container": "needs an executor on apache-airflow-providers-docker or -cncf-kubernetes "
    "(not written yet)",
    "ducklake": "needs an executor on the duckdb tool with DuckDB's ducklake extension "
    "(not written yet)",
    "sink": "NoETL 5's local sink writes the last result to a file: use a step `sink` block, or "
    "a shell/python step that writes the file",
    **{
        kind: _NOETL_ONLY
        for kind in (
            "agent",
            "mcp",
            "rhai",
            "auth",
            "provider",
            "script",
            "artifact",
            "gateway",
            "nats",
            "wasm",
            "result_fetch",
            "subscription",
            "task_sequence",
            "iterator",
        )
    },
}


def runtime_executes(kind: str) -> bool:
    """Whether a tool of this kind can run in the Airflow runtime."""
    return kind in RUNTIME_KINDS
