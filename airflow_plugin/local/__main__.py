"""``python -m airflow_plugin.local --log FILE``: the Airflow side of `noetlc run`.

Started by ``launch.Child`` with the environment of a slot of the managed home and that slot's
lock inherited. It works in two phases:

1. before it knows what to run: move Airflow's output off the terminal (file descriptors 1 and 2
   point at the run's log file from here on; the report goes to saved copies of the real
   ones), import Airflow and build the in-process Execution API (``warmup``);
2. it reads the run request, a JSON object, from stdin (EOF without one: the CLI gave up,
   exit quietly): ``{"dag_id", "dags": {dag_id: file}, "conf", "set": [[key, raw]], "json"}``
   and hands it to ``runner.execute``.

Exit status: 0 the run succeeded, 1 it failed (or an internal error), 2 a usage error found
only here (``--set``/``--conf`` that the playbook's workload rejects). The process leaves with
``os._exit`` once its output is flushed: Airflow's interpreter shutdown (ORM, the Execution
API's event loop thread) costs about 2 s and has nothing left to do.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, NoReturn

from .home import slot_of
from .runner import UsageProblem, execute

EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130
log = logging.getLogger("noetlc.run")


def _claim_terminal(log_path: Path) -> tuple[IO[str], IO[str]]:
    """Keep private copies of stdout/stderr for the report; send fds 1 and 2 to the log file.

    Airflow, the task runner and user code in python steps print freely; at the descriptor
    level nothing of theirs reaches the terminal (``--json`` stdout stays one JSON object)."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="replace", buffering=1)
    err = os.fdopen(os.dup(2), "w", encoding="utf-8", errors="replace", buffering=1)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(handle, 1)
    os.dup2(handle, 2)
    os.close(handle)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    return out, err


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="python -m airflow_plugin.local")
    parser.add_argument("--log", required=True, help="file that receives Airflow's output")
    # Importing Airflow and building the Execution API allocate millions of long-lived objects;
    # the cyclic collector scanning them again and again costs about a third of the start-up.
    gc.disable()
    args = parser.parse_args(argv)
    log_path = Path(args.log)
    out, err = _claim_terminal(log_path)
    home = slot_of(os.environ, Path(os.environ["AIRFLOW_HOME"]))

    def run() -> int:
        import airflow  # noqa: F401 - phase 1: the import and the API warm-up overlap the compile

        from .warmup import prepare_execution_api

        log.info("execution API: %s", prepare_execution_api())
        raw = sys.stdin.buffer.read()
        if not raw.strip():
            return 0  # the parent gave up (compile errors); it reports why
        return execute(json.loads(raw), home, log_path, out, err)

    run_and_exit(run, log_path, out, err)


def run_and_exit(run: Callable[[], int], log_path: Path, out: IO[str], err: IO[str]) -> NoReturn:
    """Leave with ``run``'s exit status, turning what it raises into one line on ``err`` (the
    traceback goes to the log); shared by this process and the warm runner's forks."""
    code = EXIT_FAILED
    try:
        code = run()
    except UsageProblem as exc:
        err.write(f"noetlc: error: {exc}\n")
        code = EXIT_USAGE
    except KeyboardInterrupt:
        err.write(f"noetlc: interrupted\nAirflow log: {log_path}\n")
        code = EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - said once, in one line; the traceback is in the log
        traceback.print_exc()
        err.write(f"noetlc: error: {type(exc).__name__}: {exc}\nAirflow log: {log_path}\n")
        code = EXIT_FAILED
    finally:
        for stream in (out, err, sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    main()
