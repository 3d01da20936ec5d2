"""The event log's one table, for every database (SQLAlchemy Core).

The envelope of the formal spec (9.1) and the whitepaper (9.1), plus the Airflow coordinates of
the task attempt that produced the event. ``seq`` is the global order, assigned by the database
at insert; ``event_id`` is the idempotency key (see ``identity``), unique, so a duplicate insert
is a no-op. The table lives in the ``noetl`` schema on Postgres; SQLite has no schemas, so the
store maps ``noetl`` away there (``schema_translate_map``) and the file itself is the namespace.

Migrations (``migrations/versions``) create exactly this; a test compares the two.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

__all__ = ["COLUMNS", "SCHEMA", "TABLE", "VIEWS", "event_log", "metadata", "view_sql"]

SCHEMA = "noetl"
TABLE = "event_log"

metadata = sa.MetaData(schema=SCHEMA)

# JSONB on Postgres (indexable, compact), JSON text elsewhere.
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
# SQLite only auto-increments an INTEGER PRIMARY KEY.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

event_log = sa.Table(
    TABLE,
    metadata,
    sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
    sa.Column("event_id", sa.String(36), nullable=False, unique=True),
    sa.Column("execution_id", sa.BigInteger, nullable=False),
    sa.Column("parent_execution_id", sa.BigInteger),
    sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("alias", sa.String(32)),
    sa.Column("entity", sa.String(16), nullable=False),
    sa.Column("entity_id", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("step", sa.Text),
    sa.Column("parent_event_id", sa.String(36)),
    sa.Column("step_run_id", sa.Text),
    sa.Column("tool_run_id", sa.Text),
    sa.Column("loop_id", sa.Text),
    sa.Column("iteration", sa.Integer),
    sa.Column("attempt", sa.Integer),
    sa.Column("dag_id", sa.Text),
    sa.Column("run_id", sa.Text),
    sa.Column("task_id", sa.Text),
    sa.Column("map_index", sa.Integer),
    sa.Column("try_number", sa.Integer),
    sa.Column("playbook_path", sa.Text),
    sa.Column("playbook_hash", sa.String(64)),
    sa.Column("data", _JSON, nullable=False),
    sa.Column("duration_sec", sa.Float),
    sa.Index("ix_event_log_execution", "execution_id", "seq"),
    sa.Index("ix_event_log_dag_run", "dag_id", "run_id"),
)

COLUMNS: tuple[str, ...] = tuple(c.name for c in event_log.columns if c.name != "seq")

# Whitepaper section 12: what the log answers without any other state. Plain SQL over the
# columns, valid on Postgres and SQLite alike; ``{t}`` is the table's qualified name.
VIEWS: dict[str, str] = {
    # One row per finished step run: how long it took and how it ended.
    "step_durations": """
        SELECT execution_id, dag_id, run_id, step, step_run_id, status, duration_sec, timestamp
        FROM {t} WHERE name = 'StepFinished'
    """,
    # Per step: tool calls, failed calls and the failure rate.
    "error_rates": """
        SELECT step, COUNT(*) AS calls,
               SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END) AS errors,
               1.0 * SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END) / COUNT(*) AS error_rate
        FROM {t} WHERE name IN ('ToolCompleted', 'ToolErrored') GROUP BY step
    """,
    # Per execution and step: how many retries the policies started.
    "retry_counts": """
        SELECT execution_id, step, COUNT(*) AS retries
        FROM {t} WHERE name = 'RetryStarted' GROUP BY execution_id, step
    """,
    # Per loop run: iterations finished, their summed and mean duration.
    "loop_throughput": """
        SELECT execution_id, loop_id, COUNT(*) AS iterations,
               SUM(duration_sec) AS busy_sec, AVG(duration_sec) AS mean_iteration_sec
        FROM {t} WHERE name = 'LoopIterationCompleted' GROUP BY execution_id, loop_id
    """,
}


def view_sql(dialect: str, name: str) -> str:
    """CREATE VIEW statement for ``name`` on ``dialect`` (schema-qualified on Postgres)."""
    prefix = f"{SCHEMA}." if dialect == "postgresql" else ""
    body = " ".join(VIEWS[name].split()).format(t=f"{prefix}{TABLE}")
    return f"CREATE VIEW {prefix}{name} AS {body}"
