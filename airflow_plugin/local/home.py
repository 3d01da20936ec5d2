"""The managed Airflow home of `noetlc run`: created once, reused by every later run.

Creating an Airflow metadata DB costs seconds, so the home is a cache that outlives a run:
``$NOETLC_HOME``, else ``$XDG_CACHE_HOME/noetlc/airflow``, else ``~/.cache/noetlc/airflow``.
Everything Airflow would otherwise read from the user's environment (home, config file, DB,
dags and plugins folders, examples, unit-test mode) is pinned to that folder, so a run never
touches a real deployment's DB and a shell that points at Postgres changes nothing here.

Several runs at once per home, each in a slot of its own: a slot is a metadata DB and a dags
folder (slot 0 is the home's own ``airflow.db`` and ``dags/``, slot N lives in ``slots/N/``),
held by one run at a time through an exclusive ``flock`` on its ``.lock``. A run takes the first
free slot (``claim``) and waits only when all ``NOETLC_RUN_SLOTS`` (default 8) are busy. Why a
DB per slot rather than one shared DB: SQLite takes one writer at a time, and in WAL mode a
transaction that read and then writes after another process committed fails at once with
"database is locked" (SQLITE_BUSY_SNAPSHOT, which no busy timeout waits out); Airflow's sessions
read before they write everywhere. And a run's dags folder holds exactly its own DAGs (the bundle
sync parses the folder and marks every other DAG stale). So no two processes ever write one DB:
a slot's DB has one writer, as the whole home had before. A new slot's DB is a copy of the
home's template (the pristine DB ``initdb`` made, kept as ``airflow-template.db``), not a new
``initdb`` (seconds). The logs, plugins, event log and demo connections stay shared: they are
written per run (log files named by pid) or by a store made for several writers.

The child process inherits the slot's lock descriptor, so the lock is held until both CLI and
child are gone (a killed CLI cannot let a second run into a slot whose child still runs).

Pure Python: the CLI side imports this without Airflow.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ENV_HOME",
    "ENV_SLOT",
    "ENV_SLOTS",
    "Home",
    "claim",
    "code_stamp",
    "default_home",
    "locked",
    "pin_code_stamp",
    "slot_count",
    "slot_of",
]

ENV_HOME = "NOETLC_HOME"
ENV_SLOT = "NOETLC_HOME_SLOT"  # the slot a child process runs in (set by ``airflow_env``)
ENV_SLOTS = "NOETLC_RUN_SLOTS"  # how many runs of one home may run at once
DEFAULT_SLOTS = 8
MARKER = "noetlc-home.json"  # written by the child once the DB exists (runner.ensure_db)
KEEP_LOGS = 50  # run logs kept in <home>/logs/runs; older ones are removed


_PACKAGE = Path(__file__).resolve().parents[1]  # airflow_plugin/
_CODE = (_PACKAGE, _PACKAGE.parent / "noetl_compile")


_PINNED: list[str] = []  # a warm runner's code stamp, inherited by its forks (pin_code_stamp)


def code_stamp() -> str:
    """The newest modification of the code a run executes: this package and the compiler (a
    warm runner's forks compile with the compiler it imported; operators serialize their fields
    into the DB the home keeps). Once ``pin_code_stamp`` ran in this process, that stamp."""
    if _PINNED:
        return _PINNED[0]
    newest = 0
    for package in _CODE:
        for folder, subfolders, files in os.walk(package):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
    return f"{_PACKAGE}|{newest}"


def pin_code_stamp() -> str:
    """Fix this process's code stamp, and its forks', to the code's stamp now. For a warm
    runner: it serves only a client whose own stamp, computed just before, equals this one
    (``warm.fingerprint``), so a fork that reads ``code_stamp`` for its DAG-sync signature
    (``runner._sync_signature``) need not walk both packages again (265 files, about 5 ms of a
    hello_world fork's CPU); a client with other code stops the runner."""
    _PINNED[:] = []
    _PINNED.append(code_stamp())
    return _PINNED[0]


def default_home(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    if environ.get(ENV_HOME):
        return Path(environ[ENV_HOME]).expanduser()
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "noetlc" / "airflow"


@dataclass(frozen=True)
class Home:
    root: Path
    slot: int = 0

    def at(self, slot: int) -> Home:
        """This home's slot ``slot``."""
        return Home(self.root, slot)

    @property
    def base(self) -> Path:
        """The folder of this slot's DB, dags folder and lock (slot 0: the home itself)."""
        return self.root if self.slot == 0 else self.root / "slots" / str(self.slot)

    @property
    def dags(self) -> Path:
        return self.base / "dags"

    @property
    def plugins(self) -> Path:
        return self.root / "plugins"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def db(self) -> Path:
        return self.base / "airflow.db"

    @property
    def marker(self) -> Path:
        return self.base / MARKER

    @property
    def template(self) -> Path:
        """The pristine DB a new slot copies (written by ``runner.ensure_db`` after ``initdb``);
        its marker beside it, ``airflow-template.json``."""
        return self.root / "airflow-template.db"

    @property
    def synced(self) -> Path:
        """The signature of the dags folder the DB was last synced from (runner.execute)."""
        return self.base / "dags-synced.txt"

    def prepare(self) -> None:
        for folder in (self.root, self.base, self.dags, self.plugins, self.logs / "runs"):
            folder.mkdir(parents=True, exist_ok=True)

    def airflow_env(self) -> dict[str, str]:
        """Settings that pin Airflow to this home (they override the caller's environment)."""
        return {
            "AIRFLOW_HOME": str(self.root),
            "AIRFLOW_CONFIG": str(self.root / "airflow.cfg"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.db}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            ENV_SLOT: str(self.slot),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.plugins),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.logs / "airflow"),
            # The default bundle: this slot's dags folder, whatever the caller configured (by
            # path: a warm runner's fork keeps the DAGS_FOLDER its runner read at import).
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(
                [
                    {
                        "name": "dags-folder",
                        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                        "kwargs": {"path": str(self.dags)},
                    }
                ]
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


def slot_of(environ: Mapping[str, str], root: Path) -> Home:
    """The slot of ``root`` a child process was started for (``airflow_env`` set it)."""
    try:
        return Home(root, max(0, int(environ.get(ENV_SLOT) or 0)))
    except ValueError:
        return Home(root)


def _try_lock(home: Home) -> int | None:
    home.base.mkdir(parents=True, exist_ok=True)
    fd = os.open(home.base / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def locked(home: Home, on_wait: Callable[[], None] | None = None) -> Iterator[int]:
    """Hold this slot's exclusive lock; yields the descriptor (pass it to the child process)."""
    fd = _try_lock(home)
    if fd is None:
        if on_wait is not None:
            on_wait()
        fd = os.open(home.base / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield fd
    finally:
        os.close(fd)  # closing our copy; the lock ends when the child's copy is closed too


def slot_count(environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    try:
        return max(1, int(environ.get(ENV_SLOTS) or DEFAULT_SLOTS))
    except ValueError:
        return DEFAULT_SLOTS


@contextlib.contextmanager
def claim(
    home: Home, on_wait: Callable[[int], None] | None = None, slots: int | None = None
) -> Iterator[tuple[Home, int]]:
    """Hold the first free slot of ``home`` (the lowest number: one run at a time always uses
    slot 0, as before slots); yields that slot's ``Home`` and its lock descriptor. Waits, after
    calling ``on_wait(slots)`` once, only while every slot is busy."""
    slots = slot_count() if slots is None else slots
    told = False
    while True:
        for number in range(slots):
            fd = _try_lock(home.at(number))
            if fd is None:
                continue
            try:
                yield home.at(number), fd
            finally:
                os.close(fd)  # the child's copy holds the slot until the child is gone too
            return
        if not told and on_wait is not None:
            on_wait(slots)
            told = True
        time.sleep(0.2)
