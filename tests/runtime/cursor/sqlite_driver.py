"""A cursor driver for a SQLite work queue, known to noetlc only through its entry point.

The claim statement is the playbook's (``UPDATE .. RETURNING``, SQLite >= 3.35); one
``BEGIN IMMEDIATE`` transaction per claim makes it atomic between processes.
"""

import sqlite3

from airflow_plugin.hooks.connections import get_connection


class SqliteCursorDriver:
    def __init__(self, spec):
        # `auth` names an Airflow Connection whose host is the database file.
        database = get_connection(spec.auth).host
        self._conn = sqlite3.connect(database, isolation_level=None, timeout=30)
        self._conn.row_factory = sqlite3.Row
        self._claim = spec.claim

    def claim(self):
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            row = self._conn.execute(self._claim).fetchone()
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        return None if row is None else dict(row)

    def close(self):
        self._conn.close()
