"""The managed Airflow home of `noetlc run`: created once, reused by every later run.

Creating an Airflow metadata DB costs seconds, so the home is a cache that outlives a run:
``$NOETLC_HOME``, else ``$XDG_CACHE_HOME/noetlc/airflow``, else ``~/.cache/noetlc/airflow``.
Everything Airflow would otherwise read from the user's environment (home, config file, DB,
dags and plugins folders, examples, unit-test mode) is pinned to that folder, so a run never
touches a real deployment's DB and a shell that points at Postgres changes nothing here.

One run at a time per home: SQLite takes one writer, and the dags folder holds exactly the
DAGs of the running command. ``locked`` takes an exclusive ``flock`` on ``<home>/.lock``; the
child process inherits the descriptor, so the lock is held until both CLI and child are gone
(a killed CLI cannot let a second run in under a child that still runs).

Pure Python: the CLI side imports this without Airflow.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENV_HOME", "Home", "code_stamp", "default_home", "locked"]

ENV_HOME = "NOETLC_HOME"
MARKER = "noetlc-home.json"  # written by the child once the DB exists (runner.ensure_db)
KEEP_LOGS = 50  # run logs kept in <home>/logs/runs; older ones are removed


_PACKAGE = Path(__file__).resolve().parents[1]  # airflow_plugin/
_CODE = (_PACKAGE, _PACKAGE.parent / "noetl_compile")


def code_stamp() -> str:
    """The newest modification of the code a run executes: this package and the compiler (a
    warm runner's forks compile with the compiler it imported; operators serialize their fields
    into the DB the home keeps)."""
    newest = 0
    for package in _CODE:
        for folder, subfolders, files in os.walk(package):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
    return f"{_PACKAGE}|{newest}"


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    if environ.get(ENV_HOME):
        return Path(environ[ENV_HOME]).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "noetlc" / "airflow"


@dataclass(frozen=True)
class Home:
    root: Path

    @property
    def dags(self) -> Path:
        return self.root / "dags"

    @property
    def plugins(self) -> Path:
        return self.root / "plugins"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def db(self) -> Path:
        return self.root / "airflow.db"

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    @property
    def synced(self) -> Path:
        """The signature of the dags folder the DB was last synced from (runner.execute)."""
        return self.root / "dags-synced.txt"

    def prepare(self) -> None:
        for folder in (self.root, self.dags, self.plugins, self.logs / "runs"):
            folder.mkdir(parents=True, exist_ok=True)

    def airflow_env(self) -> dict[str, str]:
        """Settings that pin Airflow to this home (they override the caller's environment)."""
        return {
            "AIRFLOW_HOME": str(self.root),
            "AIRFLOW_CONFIG": str(self.root / "airflow.cfg"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.db}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.plugins),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.logs / "airflow"),
            # The default bundle: the dags folder above, whatever the caller configured.
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": (
                '[{"name": "dags-folder", "classpath": '
                '"airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {}}]'
            ),
        }

    def new_log(self, label: str) -> Path:
        """A fresh log file path for one run (Airflow's output goes there, not to the terminal)."""
        runs = self.logs / "runs"
        old = sorted(runs.glob("*.log"))
        for path in old[: max(0, len(old) - (KEEP_LOGS - 1))]:
            with contextlib.suppress(OSError):
                path.unlink()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in label)[:80] or "run"
        return runs / f"{stamp}-{os.getpid()}-{safe}.log"


@contextlib.contextmanager
def locked(home: Home, on_wait: Callable[[], None] | None = None) -> Iterator[int]:
    """Hold the home's exclusive lock; yields the descriptor (pass it to the child process)."""
    fd = os.open(home.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing our copy; the lock ends when the child's copy is closed too
