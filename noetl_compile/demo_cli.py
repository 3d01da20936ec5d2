"""`noetlc demo up|down|status`: the local services the bundled examples use.

Registered here so `cli_parser.py` only adds the command; the services live in (reached through plugin_seam)
``airflow_plugin.local.demo.services`` (pure Python: a Postgres cluster from Debian's
postgresql-15 binaries and the local HTTP API on 127.0.0.1:5555).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3


def add_commands(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo",
        help="start, stop or show the local Postgres (`pg_local`) and HTTP API the examples use",
    )
    demo.add_argument(
        "action",
        choices=("up", "down", "status"),
        help="up: start what is not running; down: stop both, remove their files; status: what "
        "runs where (exit 3 when something is not running)",
    )
    demo.add_argument(
        "--pg-port",
        type=int,
        default=0,
        metavar="N",
        help="with up: Postgres's port on 127.0.0.1 (default: a free port, kept until down)",
    )
    demo.add_argument(
        "--home",
        metavar="DIR",
        help="the managed Airflow home `noetlc run` uses (default: $NOETLC_HOME or "
        "~/.cache/noetlc/airflow)",
    )


def run_demo(args: argparse.Namespace) -> int:
    from .plugin_seam import demo_services

    services, Home, default_home = demo_services()
    home = Home(Path(args.home).expanduser() if args.home else default_home())
    try:
        if args.action == "down":
            stopped = services.down(home)
            for line in stopped:
                print(f"stopped  {line}")
            print("demo down" + ("" if stopped else " (nothing was running)"))
            return EXIT_OK
        if args.action == "up":
            print("noetlc: starting the demo services", file=sys.stderr, flush=True)
            found = services.up(home, pg_port=args.pg_port)
        else:
            found = services.status(home)
    except services.DemoError as exc:
        print(f"noetlc: error: demo {args.action}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for service in found:
        state = "running" if service.running else "stopped"
        print(f"{service.name:<9} {state:<8} {service.where}")
        if service.detail:
            print(f"{'':<19}{service.detail}")
    if all(service.running for service in found):
        if args.action == "up":
            print("`noetlc run` with this home now finds the connection pg_local; "
                  "`noetlc demo down` stops both")  # fmt: skip
        return EXIT_OK
    return EXIT_NOT_RUNNING if args.action == "status" else EXIT_FAILED


COMMANDS = {"demo": run_demo}
