"""Alembic environment: always called by ``store.migrate`` with an open connection."""

import sqlalchemy as sa
from alembic import context

from airflow_plugin.events.schema import SCHEMA

VERSION_TABLE = "event_log_version"

connection = context.config.attributes["connection"]
if connection.dialect.name == "postgresql":
    # The version table lives in the schema, so the schema comes before any revision.
    connection.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
context.configure(
    connection=connection,
    version_table=VERSION_TABLE,
    version_table_schema=SCHEMA if connection.dialect.name == "postgresql" else None,
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
