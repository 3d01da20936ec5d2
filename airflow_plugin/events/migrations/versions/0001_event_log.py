"""The event log table, its indexes and the observability views.

Revision ID: 0001

A frozen copy of ``schema.event_log`` as it was at this revision: a migration must keep creating
what it created when it shipped, so it does not import the table definition that later revisions
change. ``tests/events/test_store.py`` keeps the newest revision equal to ``schema.py``.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from airflow_plugin.events.schema import SCHEMA, TABLE, VIEWS, view_sql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    schema = SCHEMA if dialect == "postgresql" else None
    if schema:
        op.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        TABLE,
        sa.Column("seq", seq, primary_key=True, autoincrement=True),
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
        sa.Column("data", json, nullable=False),
        sa.Column("duration_sec", sa.Float),
        schema=schema,
    )
    op.create_index("ix_event_log_execution", TABLE, ["execution_id", "seq"], schema=schema)
    op.create_index("ix_event_log_dag_run", TABLE, ["dag_id", "run_id"], schema=schema)
    for name in VIEWS:
        op.execute(view_sql(dialect, name))


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    schema = SCHEMA if dialect == "postgresql" else None
    prefix = f"{schema}." if schema else ""
    for name in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {prefix}{name}")
    op.drop_table(TABLE, schema=schema)
