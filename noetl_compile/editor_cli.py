"""The editor and migration commands: `noetlc schema`, `noetlc upgrade`, `noetlc lsp`.

Their options live here so `cli_parser.py` only registers them (and `cli.py` dispatches); each command imports its module when
it runs (the LSP server's pygls is an extra, and `check` must start fast).
"""

from __future__ import annotations

import argparse
import os
import sys

DIALECTS = ("v1", "case-v2", "canonical", "noetl5")


def add_commands(commands: argparse._SubParsersAction) -> None:
    schema = commands.add_parser(
        "schema", help="print the JSON Schema of a DSL generation (for editors)"
    )
    schema.add_argument(
        "--dialect",
        choices=DIALECTS,
        default="canonical",
        help="the generation (default: canonical)",
    )

    upgrade = commands.add_parser(
        "upgrade", help="rewrite v1 / case-v2 playbooks into the canonical generation"
    )
    upgrade.add_argument("paths", nargs="+", metavar="PATH", help="playbook files or folders")
    upgrade.add_argument(
        "--to", choices=("canonical",), default="canonical", help="the target generation"
    )
    how = upgrade.add_mutually_exclusive_group()
    how.add_argument(
        "--diff",
        dest="mode",
        action="store_const",
        const="diff",
        help="print a unified diff of what would change (the default)",
    )
    how.add_argument(
        "--write",
        dest="mode",
        action="store_const",
        const="write",
        help="rewrite the files whose upgrade is complete, in place",
    )
    how.add_argument(
        "--check",
        dest="mode",
        action="store_const",
        const="check",
        help="exit 1 when a file would change (for CI); write nothing",
    )
    how.add_argument(
        "--report",
        dest="mode",
        action="store_const",
        const="report",
        help="per file: exact / unsafe (what changes) / not rewritable (why), and totals",
    )
    upgrade.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="also apply the unsafe fixes: the closest canonical form of a construct without "
        "an exact one, each with a note saying what behaves differently (U805)",
    )
    upgrade.add_argument("--json", action="store_true", help="with --report: the report as JSON")
    commands.add_parser(
        "lsp",
        help="language server over stdio: check's findings as you type, definitions, completion "
        "(needs the lsp extra)",
    )


def run_upgrade(args: argparse.Namespace) -> int:
    from .upgrade.command import run

    missing = [path for path in args.paths if not os.path.exists(path)]
    for path in missing:
        print(f"{path}:1:1: E001 [error] no such file or directory", file=sys.stderr)
    if missing:
        return 2
    if args.mode == "report":
        from .upgrade.command import report

        return report(args.paths, target=args.to, as_json=args.json)
    if args.json:
        print("noetlc upgrade: --json goes with --report", file=sys.stderr)
        return 2
    return run(args.paths, mode=args.mode or "diff", target=args.to, unsafe=args.unsafe_fixes)


def run_lsp(args: argparse.Namespace) -> int:
    try:
        from .lsp.server import serve
    except ImportError as exc:  # pygls is the `lsp` extra
        print(
            f"noetlc: error: `noetlc lsp` needs pygls ({exc}): pip install 'noetlc[lsp]'",
            file=sys.stderr,
        )
        return 2
    return serve()


def run_schema(args: argparse.Namespace) -> int:
    from .schema import schema_text

    sys.stdout.write(schema_text(args.dialect))
    return 0


COMMANDS = {"schema": run_schema, "upgrade": run_upgrade, "lsp": run_lsp}
