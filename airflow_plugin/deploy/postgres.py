"""The stack's PostgreSQL 15 cluster: initdb into the state folder (owned by an unprivileged
user when run as root), tuned for a throwaway test server (no fsync, TCP on 127.0.0.1 only),
started and stopped with pg_ctl, databases and passwords created for Airflow, the event log
and the playbooks' data.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .layout import Layout, StackError, tail

__all__ = ["PG_BIN", "Postgres", "pg_parent_dir"]

PG_BIN = Path(os.environ.get("NOETL_STACK_PG_BIN", "/usr/lib/postgresql/15/bin"))


_PG_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    # TCP only: a unix socket path inside a deep state folder can exceed the 107-byte limit.
    "unix_socket_directories": "''",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    # Every Airflow process keeps a SQLAlchemy pool; Celery's result backend adds more.
    "max_connections": "300",
    "shared_buffers": "64MB",
    "log_min_messages": "warning",
    "logging_collector": "off",
}


@dataclass
class Postgres:
    data_dir: Path
    log_file: Path
    port: int
    as_root: bool = field(default_factory=lambda: os.geteuid() == 0)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [str(PG_BIN / args[0]), *args[1:]]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)

    def url(self, database: str, driver: str = "postgresql") -> str:
        return f"{driver}://postgres@127.0.0.1:{self.port}/{database}"

    def init_and_start(self) -> None:
        if not (PG_BIN / "initdb").exists():
            raise StackError(
                f"PostgreSQL 15 binaries not found in {PG_BIN} (apt-get install postgresql-15)"
            )
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.touch()
        if self.as_root:
            owner = pwd.getpwnam("postgres")
            os.chown(self.data_dir.parent, owner.pw_uid, owner.pw_gid)
            os.chown(self.log_file, owner.pw_uid, owner.pw_gid)  # the server appends to it
        done = self.run(
            "initdb", "-D", str(self.data_dir), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--locale=C", "--no-sync",
        )  # fmt: skip
        if done.returncode != 0:
            raise StackError(f"postgres initdb failed: {done.stderr.strip() or done.stdout}")
        settings = {**_PG_SETTINGS, "port": str(self.port)}
        conf = self.data_dir / "postgresql.auto.conf"
        conf.write_text("".join(f"{key} = {value}\n" for key, value in settings.items()))
        if self.as_root:
            os.chown(conf, pwd.getpwnam("postgres").pw_uid, pwd.getpwnam("postgres").pw_gid)
        done = self.run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-w", "start")
        if done.returncode != 0:
            raise StackError(
                f"postgres failed to start: {done.stderr.strip()}\n{tail(self.log_file)}"
            )

    def create_databases(self, names: tuple[str, ...]) -> None:
        for name in names:
            done = self.run(
                "psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                "-v", "ON_ERROR_STOP=1", "-c", f'CREATE DATABASE "{name}"',
            )  # fmt: skip
            if done.returncode != 0:
                raise StackError(f"creating database {name} failed: {done.stderr.strip()}")

    def stop(self) -> None:
        if (self.data_dir / "postmaster.pid").exists():
            self.run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop", timeout=60)


def pg_parent_dir(layout: Layout) -> Path:
    """``<state>/pg`` when the postgres user can reach it, else a private folder in /tmp
    (pytest's tmp folders are 0700 root: the postgres user could not enter them)."""
    inside = layout.state / "pg"
    if os.geteuid() != 0:
        return inside
    probe = subprocess.run(
        ["runuser", "-u", "postgres", "--", "test", "-x", str(layout.state)],
        capture_output=True,
        check=False,
    )
    if probe.returncode == 0:
        return inside
    return Path(tempfile.mkdtemp(prefix="noetl-stack-pg-"))
