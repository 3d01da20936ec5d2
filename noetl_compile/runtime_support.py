"""The tool kinds the Airflow runtime (``airflow_plugin``) can execute.

``noetlc check`` warns (C515) about a tool whose kind the runtime has no executor for, so the gap
shows up before deploy rather than as a failed task. The compiler must not import
``airflow_plugin`` (``noetlc check`` runs in a plain CI job, without Airflow), so the list is
written down here; ``tests/test_check_runtime_support.py`` holds it equal to the runtime's own
registry so that the two cannot drift apart.
"""

from __future__ import annotations

__all__ = [
    "NEEDS",
    "OPERATOR_KINDS",
    "REGISTRY_KINDS",
    "RUNTIME_KINDS",
    "SINK_EVENT_KINDS",
    "runtime_executes",
]

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
# Sink kinds the runtime writes to the event log itself: a sink of one of these runs no tool, so
# it needs no executor. The one list: ``airflow_plugin.tools.sink`` reads it from here.
SINK_EVENT_KINDS: frozenset[str] = frozenset({"", "event", "event_log", "eventlog"})


_NOETL_ONLY = (
    "only NoETL's own engine runs it (Airflow has no counterpart): run this playbook on NoETL"
)
# The decision for each kind the runtime does not execute, said by C515 (its hint, for NoETL 5
# playbooks) and on the kind's page of the tool reference (tool_docs.py renders it under "On
# Airflow"). Kinds that talk to an outside service have no executor here: no test could run one
# against the real service on loopback, and an executor that was never run is not shipped; the
# decision names the Airflow provider an executor would be written on, for a user to install.
NEEDS: dict[str, str] = {
    "snowflake": "no executor in noetlc (Snowflake is an outside service): one would run on "
    "apache-airflow-providers-snowflake's SnowflakeHook with an Airflow connection for the "
    "credential; install that provider and run the statement from a task of your own, or run "
    "this playbook on NoETL",
    "snowflake_transfer": "no executor in noetlc: one would run on "
    "apache-airflow-providers-snowflake's SnowflakeHook and the postgres tool's hook; run this "
    "playbook on NoETL",
    "gcs": "no executor in noetlc (Google Cloud Storage is an outside service): one would run "
    "on apache-airflow-providers-google's GCSHook with a google_cloud_platform connection; "
    "install that provider, or run this playbook on NoETL",
    "container": "no executor in noetlc: NoETL 5 dispatches a Kubernetes Job; on Airflow that "
    "is apache-airflow-providers-cncf-kubernetes's KubernetesJobOperator (or "
    "apache-airflow-providers-docker's DockerOperator for a local container); install one and "
    "run the image from a task of your own, or run this playbook on NoETL",
    "ducklake": "no executor in noetlc: it would need the duckdb tool with DuckDB's ducklake "
    "extension and the catalog's database; run this playbook on NoETL",
    "mcp": "no executor in noetlc: NoETL 5 posts MCP's JSON-RPC 2.0 request over HTTP; an "
    "`http` tool with `method: POST` and the JSON-RPC body does the same call on Airflow",
    "sink": "NoETL 5's local sink writes the last result to a file: use a step `sink` block, or "
    "a shell/python step that writes the file",
    **{
        kind: _NOETL_ONLY
        for kind in (
            "agent",
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
