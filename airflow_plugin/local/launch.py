"""The CLI side of `noetlc run`: start the Airflow process, hand it the run, wait.

The child (``python -m airflow_plugin.local``) is started once the playbook compiled and the run
holds a slot of the home, with that slot's lock inherited; it imports Airflow, warms up the
Execution API and reads the run request from stdin. Its exit status is the command's. (It used to
start before the compile, to overlap its import with it; on a loaded machine the import took the
CPU the compile needed, and a compile error came seconds after `check` would have said it.)

Pure Python: imported by ``noetl_compile.run_cli`` (through plugin_seam) without Airflow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .demo import services as demo_services
from .home import Home

__all__ = ["Child", "child_environment"]

EXIT_FAILED, EXIT_INTERRUPTED = 1, 130
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding airflow_plugin/


def child_environment(
    home: Home,
    *,
    connections: Mapping[str, str] | None = None,
    strict: bool = False,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The caller's environment, pinned to ``home``, with the run's connections (``--connections``,
    then the caller's ``AIRFLOW_CONN_*``, then the demo's) and flags."""
    env = dict(os.environ if base is None else base)
    env.update(home.airflow_env())
    # `noetlc demo up` registered `pg_local` in this home; the caller's own definition wins.
    for name, uri in demo_services.connection_env(home).items():
        env.setdefault(name, uri)
    env.update(connections or {})
    if strict:
        env["NOETL_STRICT"] = "1"
    # The child must run the same airflow_plugin as this CLI, installed or not.
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *[p for p in paths if p != _PACKAGE_ROOT]])
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Child:
    """The Airflow process of one run."""

    def __init__(self, env: Mapping[str, str], log: Path, lock_fd: int) -> None:
        self.log = log
        self.process = subprocess.Popen(
            # -P: the caller's working directory is not put on the child's path. A module
            # there (a playbook folder's json.py) would shadow the runner's imports, and a source
            # checkout's build metadata (noetlc.egg-info) made a second noetlc distribution: the
            # OpenLineage provider then emitted no task events.
            [sys.executable, "-P", "-m", "airflow_plugin.local", "--log", str(log)],
            stdin=subprocess.PIPE,
            env=dict(env),
            pass_fds=(lock_fd,),
        )

    def run(self, request: Mapping[str, Any]) -> int:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(request).encode("utf-8"))
        except BrokenPipeError:
            pass  # the child is gone already; its exit status says how
        self._close_stdin()
        code = self._wait()
        if code < 0 or code not in (0, 1, 2, EXIT_INTERRUPTED):
            how = f"signal {-code}" if code < 0 else f"status {code}"
            print(
                f"noetlc: error: the Airflow process stopped unexpectedly ({how})\n"
                f"Airflow log: {self.log}",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED if code == -signal.SIGINT else EXIT_FAILED
        return code

    def _close_stdin(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except BrokenPipeError:
            pass

    def _wait(self) -> int:
        interrupted = False
        while True:
            try:
                return self.process.wait()
            except KeyboardInterrupt:
                # Ctrl-C reached the child too (same process group): let it report and leave;
                # a second Ctrl-C does not wait any more.
                if interrupted:
                    self.process.kill()
                interrupted = True
