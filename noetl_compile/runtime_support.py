"""The tool kinds the Airflow runtime (``airflow_plugin``) can execute.

``noetlc check`` warns (C515) about a tool whose kind the runtime has no executor for, so the gap
shows up before deploy rather than as a failed task. The compiler must not import
``airflow_plugin`` (``noetlc check`` runs in a plain CI job, without Airflow), so the list is
written down here; ``tests/test_check_runtime_support.py`` holds it equal to the runtime's own
registry so that the two cannot drift apart.
"""

from __future__ import annotations

__all__ = ["OPERATOR_KINDS", "REGISTRY_KINDS", "RUNTIME_KINDS", "runtime_executes"]

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


def runtime_executes(kind: str) -> bool:
    """Whether a tool of this kind can run in the Airflow runtime."""
    return kind in RUNTIME_KINDS
