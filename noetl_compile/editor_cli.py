"""The editor and migration commands: `noetlc schema`, `noetlc upgrade`, `noetlc lsp`.

Their options live here so `cli.py` only registers them; each command imports its module when
it runs (the LSP server's pygls is an extra, and `check` must start fast).
"""

from __future__ import annotations

import argparse
import sys

DIALECTS = ("v1", "case-v2", "canonical")


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

    commands.add_parser(
        "lsp",
        help="language server over stdio: check's findings as you type, definitions, completion "
        "(needs the lsp extra)",
    )


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


COMMANDS = {"schema": run_schema, "lsp": run_lsp}
