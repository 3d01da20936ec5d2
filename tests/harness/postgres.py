"""A throwaway PostgreSQL 15 cluster for tests and benches.

Tests of the SQL tools must hit a real server: the transaction, error-code and reconnect
behaviour they check is the server's, not a mock's. Each process that asks for one gets its own
cluster in a fresh temporary directory (``initdb`` + ``pg_ctl start -w``), listening on
127.0.0.1 on a free port with its unix socket inside that directory, so the two workers of
``pytest -n 2`` never share a port, a socket or a data directory.

Cost: ``initdb --no-sync`` about 0.8 s and ``pg_ctl start -w`` about 0.2 s on a 2-core machine,
so a cluster is up in one to two seconds; stopping (``-m fast``) and starting again take a
fraction of a second. Durability is switched off (``fsync``, ``synchronous_commit``,
``full_page_writes``): the data is thrown away anyway.

PostgreSQL refuses to run as root. When the tests run as root, every server binary runs as the
``postgres`` user through ``runuser`` and the temporary directory is handed to that user; as any
other user the binaries run directly. A cluster is always destroyed at interpreter exit (atexit),
also when a test failed or the session was interrupted.

Fixtures (registered with ``pytest_plugins = ["tests.harness.postgres"]``):

* ``pg_cluster`` (session): the started cluster;
* ``pg_test_dsn`` (session): DSN of the database ``noetl_test`` in it;
* ``pg_connections`` (function): sets ``AIRFLOW_CONN_<NAME>`` for every postgres connection name
  the corpus playbooks use (:data:`CORPUS_POSTGRES_CONNECTIONS`), all pointing at ``noetl_test``,
  and returns the names.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = [
    "CORPUS_POSTGRES_CONNECTIONS",
    "PostgresCluster",
    "PostgresClusterError",
    "airflow_conn_env",
    "pg_cluster",
    "pg_connections",
    "pg_test_dsn",
]

PG_BIN = Path(os.environ.get("NOETL_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))

# Every connection name the corpus playbooks give to a postgres tool, a postgres sink or a
# postgres transfer end, directly or through a workload default (`pg_auth: pg_local`,
# `auth: "{{ workload.pg_auth }}"`, `{type: postgres, credential: pg_k8s}`...). Kept literal so
# a fixture costs nothing; tests/runtime/test_tool_postgres.py re-derives it from the corpus.
CORPUS_POSTGRES_CONNECTIONS: tuple[str, ...] = (
    "pg_local",
    "pg_k8s",
    "pg_auth",
    "pg_trade",
    "pg_test",
    "test_postgres",
    "noetl_connection",
)

TEST_DATABASE = "noetl_test"

# Settings for a disposable server: no durability, few resources, quick shutdown.
_SERVER_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "60",
    "shared_buffers": "32MB",
    "max_wal_size": "256MB",
    "log_min_messages": "warning",
    "logging_collector": "off",
    # A statement that waits two minutes for a lock is a test stuck on a transaction left open
    # (in this process or another): it fails with the lock it waited for instead of waiting on.
    "lock_timeout": "'120s'",
}


class PostgresClusterError(RuntimeError):
    """The cluster could not be created, started or stopped (the message has the log tail)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def airflow_conn_env(name: str) -> str:
    """The environment variable Airflow reads for connection ``name``."""
    return "AIRFLOW_CONN_" + "".join(c if c.isalnum() else "_" for c in name).upper()


class PostgresCluster:
    """One PostgreSQL server in its own temporary directory (see the module docstring)."""

    user = "postgres"  # the superuser initdb creates; trust auth, no password

    def __init__(self, *, bin_dir: Path = PG_BIN) -> None:
        self.bin_dir = Path(bin_dir)
        if not (self.bin_dir / "initdb").exists():
            raise PostgresClusterError(f"PostgreSQL binaries not found in {self.bin_dir}")
        self._as_root = os.geteuid() == 0
        self.base_dir = Path(tempfile.mkdtemp(prefix="noetlc-pg-"))
        self.data_dir = self.base_dir / "data"
        self.socket_dir = self.base_dir  # short path: unix socket paths are limited to 107 bytes
        self.log_file = self.base_dir / "server.log"
        self.host = "127.0.0.1"
        self.port = 0
        self._running = False
        self._destroyed = False
        self._lock = threading.Lock()
        if self._as_root:
            entry = pwd.getpwnam("postgres")
            os.chown(self.base_dir, entry.pw_uid, entry.pw_gid)
        _LIVE.add(self)
        self._initdb()

    # -- lifecycle ----------------------------------------------------------------------------

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout)

    def _initdb(self) -> None:
        done = self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        if done.returncode != 0:
            raise PostgresClusterError(f"initdb failed: {done.stderr.strip() or done.stdout}")

    def _write_settings(self) -> None:
        # Written into postgresql.auto.conf so a plain `pg_ctl start` (also a restart) reuses them.
        lines = [f"{key} = {value}" for key, value in _SERVER_SETTINGS.items()]
        lines += [f"port = {self.port}", f"unix_socket_directories = '{self.socket_dir}'"]
        auto_conf = self.data_dir / "postgresql.auto.conf"
        auto_conf.write_text("\n".join(lines) + "\n")
        if self._as_root:
            entry = pwd.getpwnam("postgres")
            os.chown(auto_conf, entry.pw_uid, entry.pw_gid)

    def start(self) -> PostgresCluster:
        """Start the server (on a new free port the first time, on the same port afterwards)."""
        with self._lock:
            if self._destroyed:
                raise PostgresClusterError("the cluster was destroyed")
            if self._running and self._status_running():
                return self
            # Not running, or stopped behind our back (a test stops the server mid-run to see
            # what the runtime does when its database goes away).
            self._running = False
            first = self.port == 0
            # Another process may take the port between the probe and the bind: try a few.
            for _attempt in range(3 if first else 1):
                if first:
                    self.port = _free_port()
                    self._write_settings()
                done = self._run(
                    "pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-w", "start"
                )
                if done.returncode == 0:
                    self._running = True
                    return self
            raise PostgresClusterError(f"pg_ctl start failed: {done.stderr.strip()}\n{self.log()}")

    def _status_running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data_dir), "status").returncode == 0

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back open transactions, disconnect clients)."""
        with self._lock:
            if not self._running:
                return
            done = self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "stop")
            if done.returncode != 0:
                raise PostgresClusterError(f"pg_ctl stop failed: {done.stderr.strip()}")
            self._running = False

    def destroy(self) -> None:
        """Stop the server (immediately) and remove its directory; safe to call twice."""
        if self._destroyed:
            return
        try:
            if self._running:
                self.stop("immediate")
        finally:
            self._destroyed = True
            shutil.rmtree(self.base_dir, ignore_errors=True)
            _LIVE.discard(self)

    @property
    def running(self) -> bool:
        return self._running

    def log(self, lines: int = 30) -> str:
        """The last lines of the server log (for failure messages)."""
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    # -- databases ----------------------------------------------------------------------------

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq URI for ``dbname`` over TCP on 127.0.0.1 (no password: trust auth)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """Create database ``name`` (dropping an existing one) and return its DSN."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn("postgres"), autocommit=True, connect_timeout=5) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Block until the server accepts connections (after ``start`` it already does)."""
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


# Clusters of this process that still exist; destroyed at exit whatever happened before.
_LIVE: set[PostgresCluster] = set()


@atexit.register
def _destroy_all() -> None:
    for cluster in list(_LIVE):
        try:
            cluster.destroy()
        except Exception:  # noqa: BLE001 - best effort at exit; the directory is removed anyway
            shutil.rmtree(cluster.base_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# pytest fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    """A started cluster for this test process (one per xdist worker)."""
    cluster = PostgresCluster().start()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def pg_test_dsn(pg_cluster: PostgresCluster) -> str:
    """DSN of the database ``noetl_test`` (created once per session)."""
    return pg_cluster.create_database(TEST_DATABASE)


@pytest.fixture
def pg_connections(
    pg_cluster: PostgresCluster, pg_test_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """Point every corpus postgres connection name at ``noetl_test``; returns the names.

    A test that stops the cluster must start it again: the server is shared by the session.
    """
    if not pg_cluster.running:
        pg_cluster.start()
    for name in CORPUS_POSTGRES_CONNECTIONS:
        monkeypatch.setenv(airflow_conn_env(name), pg_test_dsn)
    return list(CORPUS_POSTGRES_CONNECTIONS)
