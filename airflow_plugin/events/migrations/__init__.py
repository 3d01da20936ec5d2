"""Alembic migrations of the event log (applied by ``store.EventStore.migrate`` on first use)."""
