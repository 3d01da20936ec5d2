"""What a fork of the warm runner (``warm.py``) does: become the cold child of one run.

The runner forks once per run and goes back to serving; several forks may run at once, each in
its own slot of the home (``home.claim``: a metadata DB and a dags folder of its own). The fork
takes the CLI's stdout, stderr and slot lock (sent with ``SCM_RIGHTS``) as its own, the run's
environment and working directory, points the ORM it inherited at its slot's DB, drops what of
the runner cannot follow a fork, compiles (with the compiler the runner imported) unless the
request came compiled, runs ``runner.execute`` and leaves with ``os._exit``, as
``__main__`` does.

Its own module because it runs in another process than the serving loop, with other rules:
no fd of the runner's (the listening socket, other runs' connections) may stay open here.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .home import Home

__all__ = ["become_run"]


def become_run(
    message: Mapping[str, Any],
    fds: list[int],
    home: Home,
    compile_request: Callable[[Home, Mapping[str, Any]], dict[str, Any]],
) -> None:
    """In the fork: become the cold child of this run (``__main__``) in its slot, then leave.
    ``home`` is the runner's (slot 0); the message names the slot the CLI holds."""
    out_fd, err_fd, lock_fd = fds
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    del lock_fd  # held open until this process ends: the slot stays locked for the run
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(message["env"])
    os.chdir(message["cwd"])
    slot = home.at(int(message.get("slot") or 0))
    try:
        from airflow import settings

        if settings.engine is not None:
            settings.engine.dispose(close=False)  # connections of the runner are not ours
    except Exception:  # noqa: BLE001, S110 - a fresh pool is an optimisation, not a requirement
        pass
    _use_slot(slot, home)
    _forget_inherited_transport()
    request = message.get("request")
    if request is None:
        request = compile_request(slot, message["compile"])
    _run(Path(message["log"]), slot, request)


def _use_slot(slot: Home, runner: Home) -> None:
    """Point the ORM this fork inherited at ``slot``'s DB. The engine itself is kept, with the
    statements the runner's rehearsal compiled (its cache is per engine): only the file it
    opens changes, through SQLAlchemy's ``do_connect`` hook. Airflow's settings that name the
    dags folder are read again from the run's environment."""
    from airflow import settings

    configure_vars = getattr(settings, "configure_vars", None)
    if configure_vars is not None:
        configure_vars()  # DAGS_FOLDER and the DB URL from the run's environment
    if slot.db == runner.db:
        return
    from sqlalchemy import event

    database = str(slot.db)

    def redirect(dialect: Any, record: Any, cargs: list[Any], cparams: dict[str, Any]) -> None:
        if cargs:
            cargs[0] = database  # pysqlite and aiosqlite: connect(filename, **options)
        else:
            cparams["database"] = database

    engines = [
        settings.engine,
        getattr(getattr(settings, "async_engine", None), "sync_engine", None),
    ]
    for engine in engines:
        if engine is not None and engine.dialect.name == "sqlite":
            event.listen(engine, "do_connect", redirect)


_INHERITED: list[Any] = []


def _forget_inherited_transport() -> None:
    """The Execution API transport of the runner (its rehearsal), if it kept one, talks to an
    event-loop thread that did not follow the fork: a request through it would wait forever.
    The fork builds its own; the inherited one is kept referenced so its finalizer (which waits
    on that loop) never runs here."""
    try:
        from airflow.sdk.execution_time.supervisor import in_process_api_server

        api = in_process_api_server()
        slot = type(api).__dict__.get("transport")
        if slot is None or not hasattr(slot, "__get__"):
            return
        try:
            _INHERITED.append(slot.__get__(api, type(api)))
        except AttributeError:
            return  # never built in the runner: nothing to forget
        del api.transport
    except Exception:  # noqa: BLE001, S110 - the fork then runs with what it has
        pass


def _run(log_path: Path, home: Home, request: Mapping[str, Any]) -> None:
    """What ``__main__.main`` does after its warm-up, with the same exit statuses."""
    import logging

    from .__main__ import _claim_terminal, run_and_exit
    from .runner import execute

    logging.root.handlers.clear()  # the runner's log handler writes to the runner's log
    out, err = _claim_terminal(log_path)
    run_and_exit(lambda: execute(request, home, log_path, out, err), log_path, out, err)
