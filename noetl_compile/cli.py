"""`noetlc`: check, explain, compile, graph and run NoETL playbooks.

This module runs the command ``cli_parser.build_parser`` parsed, and holds the commands that
read and compile (check, explain, compile, graph) and the event-log and gate commands;
`noetlc run` is ``run_cli.py``, the editor's commands ``editor_cli.py``, the demo ``demo_cli.py``.

Exit status: 0 clean, 1 errors found (warnings too with --strict), 2 usage error (an unknown
option or code, a path that does not exist, an unreadable connections file); for `run`:
0 the run succeeded, 1 it failed or did not compile, 2 usage error.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from . import demo_cli, editor_cli
from .cli_parser import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UsageError, build_parser
from .run_cli import run_run

MISSING_PATH = "E001"


def missing_paths(paths: Sequence[str]) -> list[str]:
    """The paths given on the command line that do not exist."""
    return [path for path in paths if not os.path.exists(path)]


def run_gate_command(args: argparse.Namespace) -> int:
    """`noetlc gates` / `noetlc signal` (through plugin_seam, HTTP only)."""
    import importlib.util

    if importlib.util.find_spec("httpx") is None:
        raise UsageError(f"`noetlc {args.command}` needs httpx: pip install 'noetlc[airflow]'")
    from .plugin_seam import gate_command

    return gate_command(args)


def run_resume_command(args: argparse.Namespace) -> int:
    """`noetlc resume` (through plugin_seam): Airflow's REST API, and the event log to find the
    execution's run and its failed steps."""
    import importlib.util

    if any(importlib.util.find_spec(name) is None for name in ("httpx", "sqlalchemy")):
        raise UsageError("`noetlc resume` needs the airflow extra: pip install 'noetlc[airflow]'")
    from .plugin_seam import resume_command

    return resume_command(args)


def run_event_log(args: argparse.Namespace) -> int:
    """`noetlc events` / `noetlc status`: read the event log (through plugin_seam)."""
    import importlib.util

    if importlib.util.find_spec("sqlalchemy") is None:
        raise UsageError(
            f"`noetlc {args.command}` needs the airflow extra: pip install 'noetlc[airflow]'"
        )
    from .plugin_seam import event_log_command

    return event_log_command(args)


def load_connections(path: str | None) -> set[str] | None:
    """The connection names of ``--connections FILE`` (formats: ``connections.py``)."""
    if path is None:
        return None
    from .connections import ConnectionsError, load_connections_file

    try:
        return load_connections_file(path).names
    except ConnectionsError as exc:
        raise UsageError(str(exc)) from None


def validated_codes(codes: list[str], option: str) -> list[str]:
    """``--select``/``--ignore`` values, each a known code or a prefix of one: a typo would
    otherwise select nothing (every rule off, exit 0) or ignore nothing."""
    from .read.base import did_you_mean
    from .rules import RULES

    for code in codes:
        if not any(known.startswith(code) for known in RULES):
            families = sorted({known[0] for known in RULES} | {known[:2] for known in RULES})
            hint = did_you_mean(code, [*RULES, *families])
            letters = ", ".join(dict.fromkeys(known[0] for known in RULES))
            raise UsageError(
                f"{option}: unknown code or prefix {code!r}"
                + (hint or f"; codes start with one of {letters}")
                + " (run `noetlc explain` for the list)"
            )
    return codes


@contextmanager
def _models_without_plugins() -> Iterator[None]:
    """Import the front end with pydantic plugins off. Its models are internal: no plugin has
    anything to observe there, and looking plugins up scans the metadata of every installed
    distribution (10 ms of a corpus check next to Airflow). Only while they are built: other
    pydantic models of the process still get their plugins; a user's own setting wins."""
    if _NO_PYDANTIC_PLUGINS in os.environ:
        yield
        return
    os.environ[_NO_PYDANTIC_PLUGINS] = "__all__"
    try:
        yield
    finally:
        os.environ.pop(_NO_PYDANTIC_PLUGINS, None)


_NO_PYDANTIC_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"


def run_check(args: argparse.Namespace) -> int:
    with _models_without_plugins():
        from .check import report_paths
    from .diagnostics import select_codes
    from .report import FORMATTERS, summary

    select = validated_codes(args.select, "--select")
    ignore = validated_codes(args.ignore, "--ignore")
    results, problems = report_paths(
        args.paths,
        dialect=args.dialect,
        connections=load_connections(args.connections),
        jobs=max(1, args.jobs),
        exclude=args.exclude,
        airflow=args.airflow_version,
    )
    diagnostics = select_codes(
        problems + [d for r in results for d in r.diagnostics], select, ignore
    )
    sources = {r.path: r.text for r in results}
    sys.stdout.write(FORMATTERS[args.format](diagnostics, sources))
    if args.format in ("concise", "full") and not args.quiet:
        sys.stdout.write(summary(diagnostics, len(results)))
    if any(d.code == MISSING_PATH for d in problems) and missing_paths(args.paths):
        # A path on the command line that does not exist is a mistake in the command, not a
        # finding (an unreadable folder or a broken symlink found under one is a finding).
        return EXIT_USAGE
    from .diagnostics import Severity

    failing = Severity.WARNING if args.strict else Severity.ERROR
    return EXIT_FINDINGS if any(d.severity >= failing for d in diagnostics) else EXIT_OK


def run_explain(args: argparse.Namespace) -> int:
    from .rules import RULES, explain

    if args.code is None:
        for rule in RULES.values():
            print(f"{rule.code}  {rule.severity.label:<7}  {rule.title}")
        return EXIT_OK
    text = explain(args.code)
    if text is None:
        print(
            f"noetlc: unknown code {args.code!r} (run `noetlc explain` for the list)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    sys.stdout.write(text)
    return EXIT_OK


def run_compile(args: argparse.Namespace) -> int:
    with _models_without_plugins():
        from .compile import run as compile_run

    validated_codes(args.select, "--select")
    validated_codes(args.ignore, "--ignore")
    return compile_run(args, load_connections(args.connections))


def run_graph(args: argparse.Namespace) -> int:
    from .graph import run as graph_run

    return graph_run(args)


COMMANDS = {
    "check": run_check,
    "explain": run_explain,
    "compile": run_compile,
    "graph": run_graph,
    "run": run_run,
    "events": run_event_log,
    "status": run_event_log,
    "gates": run_gate_command,
    "signal": run_gate_command,
    "resume": run_resume_command,
    **editor_cli.COMMANDS,
    **demo_cli.COMMANDS,
}


def _printable_anywhere() -> None:
    """Under LC_ALL=C stdout is ASCII: a file name or value with `é` must print (escaped),
    not end the run with a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


# Commands whose objects need no collection at exit: they close what they write themselves.
_FREEZE_AT_EXIT = ("check", "compile")


def main(argv: Sequence[str] | None = None) -> int:
    # A CLI run builds many short-lived objects and no cycles worth collecting; the cyclic
    # collector alone costs more than parsing (measured in bench/check_corpus.py). A caller in
    # the same process (tests, benches) gets its collector back: left off, the cycles of what it
    # runs next pile up (asyncio tasks that each scan of all_tasks() walks again).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _main(argv)
    finally:
        if collecting:
            gc.enable()


def _main(argv: Sequence[str] | None) -> int:
    _printable_anywhere()
    args = build_parser().parse_args(argv)
    if args.command in _FREEZE_AT_EXIT:
        # The interpreter collects every object once more when it exits (gc.disable does not
        # stop that pass): 0.1 s of CPU after checking the corpus in one process. Frozen objects
        # are left out of it; atexit runs first. Registered once per process.
        atexit.unregister(gc.freeze)
        atexit.register(gc.freeze)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"noetlc: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
