"""The one place the compiler reaches into ``airflow_plugin``: the CLI commands that run or
inspect what was compiled (``noetlc run``, ``events``, ``status``, ``gates``, ``signal``,
``resume``).

Every import of the plugin happens inside these functions, when such a command runs, so
``noetlc check``/``compile`` never load it (nor SQLAlchemy, httpx or Airflow behind it), and
the compiler installs and starts without the ``airflow`` extra. ``tests/test_layout.py`` holds
every other module of ``noetl_compile`` to never importing ``airflow_plugin`` at all, and this
one to importing it only inside functions.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

__all__ = ["demo_services", "event_log_command", "gate_command", "local_runner", "resume_command"]


def gate_command(args: argparse.Namespace) -> int:
    """`noetlc gates` / `noetlc signal`: the deployed stack's gates, over HTTP."""
    from airflow_plugin.deploy import gates_cli

    return (gates_cli.run_gates if args.command == "gates" else gates_cli.run_signal)(args)


def resume_command(args: argparse.Namespace) -> int:
    """`noetlc resume`: clear a deployed run's failed step and its downstream, over HTTP."""
    from airflow_plugin.deploy import resume

    return resume.run_resume(args)


def event_log_command(args: argparse.Namespace) -> int:
    """`noetlc events` / `noetlc status`: read the event log; with nothing configured, the log
    of the managed home `noetlc run` uses, when it has one."""
    from airflow_plugin.events import cli as events_cli
    from airflow_plugin.local.home import default_home

    run = events_cli.run_events if args.command == "events" else events_cli.run_status
    return run(args, local_dir=default_home() / "noetl")


def demo_services() -> tuple[ModuleType, type, Callable[[], Path]]:
    """`noetlc demo up|down|status`: the services module of the local demo (a throwaway Postgres
    registered as `pg_local`, the HTTP API on 127.0.0.1:5555) and the managed home's ``Home`` and
    ``default_home``."""
    from airflow_plugin.local.demo import services
    from airflow_plugin.local.home import Home, default_home

    return services, Home, default_home


def local_runner() -> SimpleNamespace:
    """What `noetlc run` drives: the managed Airflow home (``Home``, ``default_home``,
    ``locked``, ``claim``: a free run slot of it) and the child process that runs the DAG there (``Child``,
    ``child_environment``), and the warm runner of `noetlc run --warm` (``Warm``, and
    ``stop_warm`` for `noetlc run --stop`)."""
    from airflow_plugin.local.home import Home, claim, default_home, locked
    from airflow_plugin.local.launch import Child, child_environment
    from airflow_plugin.local.warm import Warm, stop_command

    return SimpleNamespace(
        Home=Home,
        default_home=default_home,
        locked=locked,
        claim=claim,
        Child=Child,
        child_environment=child_environment,
        Warm=Warm,
        stop_warm=stop_command,
    )
