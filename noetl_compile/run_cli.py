"""`noetlc run`: compile a playbook (and the playbooks it calls) into the managed Airflow home
and run it there, in a fork of the home's warm runner or a fresh child process (the plugin's
local runner, reached through plugin_seam); that process's status is the command's."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

from .cli_parser import UsageError
from .run_compile import NOT_COMPILED, compile_for_run, place_dags


def _key_value(item: str, option: str = "--set", shape: str = "KEY=VALUE") -> list[str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip() or key != key.strip():
        raise UsageError(f"{option} expects {shape}, got {item!r}")
    return [key, value]


def _conf(text: str | None) -> dict:
    import json

    if text is None:
        return {}
    try:
        conf = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--conf is not valid JSON: {exc}") from None
    if not isinstance(conf, dict):
        raise UsageError(f"--conf must be a JSON object, got {type(conf).__name__}")
    return conf


def _check_overrides(
    path: str, dialect: str | None, sets: list[list[str]], set_new: list[list[str]], conf: dict
) -> None:
    """A `--set`/`--conf` key the playbook's workload does not declare is a usage error with the
    closest declared key: the runtime would take it as a new key and run with the default of
    the one meant. `--set-new KEY=VALUE` adds a key on purpose; a
    `--set-new` of a declared key is refused too, so the two cannot be confused."""
    if not (sets or set_new or conf):
        return  # nothing to check: the playbook is not read twice (compile reads it)
    from .check import read_file
    from .read.base import did_you_mean

    playbook = read_file(path, dialect).playbook
    if playbook is None:
        return  # compile reports why, with positions
    workload = playbook.workload if isinstance(playbook.workload, dict) else {}
    declared = frozenset(str(key) for key in workload)
    names = sorted(declared)
    shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
    for option, keys in (("--set", [k for k, _ in sets]), ("--conf", [str(k) for k in conf])):
        for key in keys:
            if key in declared:
                continue
            hint = did_you_mean(key, declared)
            value = next((v for k, v in sets if k == key), "VALUE")
            raise UsageError(
                f"{option} {key}: {path} declares no workload key {key!r}{hint} "
                f"(declared: {shown or 'none'}); to add a new key on purpose: --set-new {key}={value}"
            )
    for key, _ in set_new:
        if key in declared:
            raise UsageError(f"--set-new {key}: {path} already declares {key!r}; use --set")


def run_run(args: argparse.Namespace) -> int:
    """`noetlc run`: compile the playbook (and its children) into the managed Airflow home and
    run it there in a child process (the plugin's local runner, through plugin_seam); that process's status is ours."""
    import importlib.util
    import time
    from pathlib import Path

    started_at = time.time()  # the summary's total is the command's wall time
    sets = [_key_value(item) for item in args.sets]
    set_new = [_key_value(item, "--set-new") for item in args.set_new]
    signals = [_key_value(item, "--signal", "GATE=VALUE") for item in args.signals]
    conf = _conf(args.conf)
    if args.stop:
        from .plugin_seam import local_runner

        return local_runner().stop_warm(args.home)
    if args.playbook is None:
        raise UsageError("run needs a playbook file (or --stop)")
    if os.path.isdir(args.playbook):
        raise UsageError(f"run takes one playbook file, not a folder: {args.playbook}")
    if not os.path.isfile(args.playbook):
        raise UsageError(f"no such playbook file: {args.playbook}")
    if importlib.util.find_spec("airflow") is None:
        raise UsageError("`noetlc run` needs Apache Airflow: pip install 'noetlc[airflow]'")
    from .plugin_seam import local_runner

    local = local_runner()
    home = local.Home(Path(args.home).expanduser() if args.home else local.default_home())
    try:
        home.prepare()
    except OSError as exc:
        raise UsageError(f"cannot use {home.root} as the Airflow home: {exc.strerror}") from None
    # airflow_plugin/local/warm.py; None: opted out. It starts with slot 0's environment.
    warm = local.Warm.of(args.warm, home, local.child_environment(home))
    # A sign of life before the slow part (compiling, and Airflow's import and start unless the
    # warm runner serves the run: seconds), on stderr so that stdout stays the step lines (or
    # --json's one object). It says which of the two happens.
    how = "served by the warm runner" if warm is not None and warm.ready else "starting Airflow"
    print(f"noetlc: running {args.playbook} ({how})", file=sys.stderr, flush=True)
    _check_overrides(args.playbook, args.dialect, sets, set_new, conf)
    from .connections import ConnectionsError, env_connection_ids, load_connections_file

    names, conn_env = None, {}
    if args.connections:
        try:
            connections = load_connections_file(args.connections)
        except ConnectionsError as exc:
            raise UsageError(str(exc)) from None
        names, conn_env = connections.names | env_connection_ids(os.environ), connections.env

    def waiting(slots: int) -> None:
        print(
            f"noetlc: all {slots} run slots of {home.root} are busy; waiting for one "
            f"(NOETLC_RUN_SLOTS sets how many runs of one home run at once)",
            file=sys.stderr,
        )

    run = {
        "conf": conf,
        "set": sets + set_new,
        "signals": signals,
        "json": args.json,
        "started_at": started_at,
    }
    # A slot of the home: its own metadata DB and dags folder (airflow_plugin/local/home.py),
    # so runs of one home run at once and never write each other's DB.
    if warm is not None and warm.ready:
        # The fork compiles (the compiler is imported there: as fast as `check`, or faster).
        work = {"playbook": args.playbook, "dialect": args.dialect, "json": args.json}
        work["fuse"] = args.fuse
        names_list = sorted(names) if names is not None else None
        with local.claim(home, on_wait=waiting) as (slot, lock_fd):
            env = local.child_environment(slot, connections=conn_env, strict=args.strict)
            log = slot.new_log(os.path.splitext(os.path.basename(args.playbook))[0])
            code = warm.run(
                slot,
                env,
                log,
                lock_fd,
                {"compile": {"args": work, "names": names_list, "run": run}},
            )
        if code is not None:
            return code
        print(
            "noetlc: the warm runner is gone or runs other code; starting Airflow",
            file=sys.stderr,
            flush=True,
        )
    # Cold: compile first, as `check` does, before any Airflow process starts or any slot is
    # taken, so a playbook that does not compile says so at check's speed (an Airflow import
    # started beside the compile took the CPU it needed on a loaded machine: 7-13 s against
    # check's 2-5 s). The DAG files go to the run's slot once it holds one.
    staging = tempfile.mkdtemp(prefix=".compile-", dir=home.root)
    try:
        request = compile_for_run(
            args.playbook, staging, names, dialect=args.dialect, as_json=args.json, fuse=args.fuse
        )
        if request is None:
            return NOT_COMPILED
        request.update(run)
        with local.claim(home, on_wait=waiting) as (slot, lock_fd):
            env = local.child_environment(slot, connections=conn_env, strict=args.strict)
            log = slot.new_log(os.path.splitext(os.path.basename(args.playbook))[0])
            place_dags(request, staging, str(slot.dags))
            code = local.Child(env, log, lock_fd).run(request)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if warm is not None:
        warm.start()  # for the next run
    return code
