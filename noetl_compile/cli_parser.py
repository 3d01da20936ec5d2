"""The command line of `noetlc`: its grammar (every command's options), its exit statuses and
the usage error. ``cli.py`` parses with ``build_parser`` and runs the chosen command; each
command's implementation lives beside it (``cli.py``, ``run_cli.py``, ``editor_cli.py``,
``demo_cli.py``)."""

from __future__ import annotations

import argparse
import os
import sys

from . import demo_cli, editor_cli

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 already; keep our wording
        self.print_usage(sys.stderr)
        print(f"noetlc: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _codes(value: str) -> list[str]:
    return [code.strip().upper() for code in value.split(",") if code.strip()]


DIALECTS = ("v1", "case-v2", "canonical", "noetl5")
FORMATS = ("concise", "full", "json", "github", "sarif")
GRAPH_FORMATS = ("mermaid", "dot", "svg", "png")


def _version() -> str:
    from . import __version__

    return f"noetlc {__version__}"


def _airflow_version(text: str) -> tuple[int, int]:
    from .airflow_versions import VersionError, parse_version

    try:
        return parse_version(text)
    except VersionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_front_end_options(command: argparse.ArgumentParser) -> None:
    """The options `check` and `compile` share: what to read and which findings count."""
    command.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="playbook files or folders (folders: every .yaml/.yml that is a playbook)",
    )
    command.add_argument(
        "--format", choices=FORMATS, default="concise", help="how to print diagnostics"
    )
    command.add_argument(
        "--select",
        type=_codes,
        default=[],
        metavar="CODES",
        help="only these codes or prefixes, comma-separated (e.g. T3,F401)",
    )
    command.add_argument(
        "--ignore",
        type=_codes,
        default=[],
        metavar="CODES",
        help="drop these codes or prefixes, comma-separated",
    )
    command.add_argument(
        "--strict", action="store_true", help="warnings fail the run (and the playbook) too"
    )
    command.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="leave out files or folders matching GLOB under a folder (repeatable; "
        ".gitignore files are respected too)",
    )
    command.add_argument(
        "--dialect", choices=DIALECTS, help="force the DSL generation (default: detected per file)"
    )
    command.add_argument(
        "--connections",
        metavar="FILE",
        help="connection names the deployment has (R203): a list or mapping in YAML/JSON, or "
        "the output of `airflow connections export` (json, yaml or env); see README",
    )
    command.add_argument(
        "--airflow-version",
        type=_airflow_version,
        metavar="X.Y",
        help="the Airflow the DAG files are for (3.0-3.3; X.Y.Z too): what it cannot run is "
        "reported (C518); default: the installed Airflow, else the newest supported",
    )


FUSE_HELP = "run each chain of plain steps as one task (fewer task starts; events stay per step)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="noetlc", description="Check and compile NoETL playbooks for Apache Airflow 3."
    )
    parser.add_argument(
        "--version", action="version", version=_version(), help="print the version and exit"
    )
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        parser_class=_Parser,
        metavar="COMMAND",
        help="one of the commands below (`noetlc COMMAND --help` for its options)",
    )

    check = commands.add_parser("check", help="parse and check playbooks, report diagnostics")
    _add_front_end_options(check)
    check.add_argument("--quiet", action="store_true", help="no summary line")
    check.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=min(4, os.cpu_count() or 1),
        help="worker processes for large runs (default: one per CPU, at most 4)",
    )

    explain = commands.add_parser("explain", help="what a diagnostic code means and how to fix it")
    explain.add_argument(
        "code", nargs="?", metavar="CODE", help="e.g. T301; without a code, list all codes"
    )

    compile_ = commands.add_parser("compile", help="compile playbooks into Airflow DAG files")
    _add_front_end_options(compile_)
    compile_.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="folder for the DAG files"
    )
    compile_.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the output folder is stale"
    )
    compile_.add_argument("--fuse", action="store_true", help=FUSE_HELP)
    compile_.add_argument(
        "--schedule-on-assets",
        action="store_true",
        help="schedule each playbook on the tables it reads that another playbook of this "
        "compile writes (Airflow Assets; docs/ui.md)",
    )

    graph = commands.add_parser("graph", help="draw the compiled graph of one playbook")
    graph.add_argument("path", metavar="PLAYBOOK", help="the playbook file to draw")
    graph.add_argument(
        "--format",
        choices=GRAPH_FORMATS,
        help="mermaid (default), dot, or svg/png through graphviz; default: from -o's extension",
    )
    graph.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="file to write (.mmd/.md, .dot/.gv, .svg, .png); default: stdout, text formats only",
    )
    graph.add_argument(
        "--dialect", choices=DIALECTS, help="force the DSL generation (default: detected)"
    )

    run = commands.add_parser(
        "run", help="run one playbook on a local Airflow (no set-up; needs the airflow extra)"
    )
    run.add_argument(
        "playbook", nargs="?", help="the playbook file (the playbooks it calls come along)"
    )
    run.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a workload key (repeatable); VALUE is JSON unless the key is a string",
    )
    run.add_argument(
        "--set-new",
        dest="set_new",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="add a workload key the playbook does not declare (repeatable); --set refuses one",
    )
    run.add_argument(
        "--conf",
        metavar="JSON",
        help="run configuration, a JSON object of declared workload keys",
    )
    run.add_argument(
        "--signal",
        dest="signals",
        action="append",
        default=[],
        metavar="GATE=VALUE",
        help="answer a gate (repeatable): GATE=approve|reject, GATE=param=value, "
        "or GATE='{\"param\": value}'",
    )
    run.add_argument(
        "--connections",
        metavar="FILE",
        help="as for check; an entry may also define the connection (URI, JSON or fields)",
    )
    run.add_argument("--json", action="store_true", help="print the report as one JSON object")
    run.add_argument("--fuse", action="store_true", help=FUSE_HELP)
    warmth = run.add_mutually_exclusive_group()
    warmth.add_argument(
        "--warm",
        dest="warm",
        action="store_const",
        const=True,
        default=None,
        help="serve the run from the home's background Airflow process, started on first use "
        "and stopped after 15 idle minutes (the default; NOETLC_WARM=1)",
    )
    warmth.add_argument(
        "--cold",
        dest="warm",
        action="store_const",
        const=False,
        help="run in a fresh Airflow process and start no background one (NOETLC_WARM=0; "
        "the default where CI is set)",
    )
    run.add_argument("--stop", action="store_true", help="stop the home's warm runner and exit")
    run.add_argument(
        "--strict", action="store_true", help="template warnings fail the step (NOETL_STRICT=1)"
    )
    run.add_argument(
        "--dialect", choices=DIALECTS, help="force the DSL generation (default: detected)"
    )
    run.add_argument(
        "--home",
        metavar="DIR",
        help="the managed Airflow home (default: $NOETLC_HOME or ~/.cache/noetlc/airflow)",
    )
    events = commands.add_parser(
        "events", help="the event log of runs: executions, one timeline, or flush the outbox"
    )
    events.add_argument(
        "execution",
        nargs="?",
        help="an execution id (timeline), or `flush` (deliver the outbox); none: list executions",
    )
    events.add_argument("--dag", help="with --run: the timeline of this DAG run")
    events.add_argument("--run", help="with --dag: the Airflow run id")
    events.add_argument("--json", action="store_true", help="one JSON object per event")
    events.add_argument(
        "--all",
        action="store_true",
        help="every event of every loop iteration (default: a loop's first iteration, any "
        "that failed, and one line for the rest)",
    )
    events.add_argument("--url", help="the event log (default: NOETL_EVENTS_URL, then SQLite)")
    status = commands.add_parser(
        "status", help="the state of an execution, rebuilt from its events alone"
    )
    status.add_argument("execution", help="the execution id (`noetlc run` prints it)")
    status.add_argument("--json", action="store_true", help="the state as one JSON object")
    status.add_argument("--url", help="the event log (default: NOETL_EVENTS_URL, then SQLite)")
    _add_gate_commands(commands)
    _add_resume_command(commands)
    editor_cli.add_commands(commands)  # schema, upgrade, lsp
    demo_cli.add_commands(commands)  # demo up|down|status
    return parser


def _add_airflow_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--url", help="the Airflow API server (default: NOETL_AIRFLOW_URL)")
    command.add_argument("--user", help="Airflow user (default: NOETL_AIRFLOW_USER)")
    command.add_argument("--password", help="its password (default: NOETL_AIRFLOW_PASSWORD)")


def _add_gate_commands(commands: argparse._SubParsersAction) -> None:
    gates = commands.add_parser("gates", help="the gates waiting for an answer in Airflow")
    gates.add_argument("--json", action="store_true", help="one JSON object per gate")
    _add_airflow_options(gates)
    signal = commands.add_parser("signal", help="answer a waiting gate through Airflow's API")
    signal.add_argument(
        "target", nargs="+", metavar="EXECUTION GATE", help="the execution id and the gate step"
    )
    answer = signal.add_mutually_exclusive_group(required=True)
    answer.add_argument("--approve", action="store_true", help="approve an approve gate")
    answer.add_argument("--reject", action="store_true", help="reject an approve gate")
    answer.add_argument(
        "--value",
        dest="values",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a value of an input gate (repeatable), or one JSON object",
    )
    signal.add_argument("--dag", help="with --run: the gate's DAG run instead of EXECUTION")
    signal.add_argument("--run", help="with --dag: the Airflow run id")
    _add_airflow_options(signal)


def _add_resume_command(commands: argparse._SubParsersAction) -> None:
    resume = commands.add_parser(
        "resume",
        help="run a deployed run again from its failed step (the steps before keep their results)",
    )
    resume.add_argument(
        "execution", nargs="?", help="the execution id (found in the event log), or --dag/--run"
    )
    resume.add_argument(
        "--from",
        dest="from_step",
        metavar="STEP",
        help="clear from this step instead of the failed one (it and everything downstream)",
    )
    resume.add_argument("--dag", help="with --run: the DAG run to resume instead of EXECUTION")
    resume.add_argument("--run", help="with --dag: the Airflow run id")
    resume.add_argument(
        "--dry-run", action="store_true", help="say what would be cleared, clear nothing"
    )
    resume.add_argument(
        "--events-url",
        help="the deployment's event log (default: NOETL_EVENTS_URL, then the local default)",
    )
    _add_airflow_options(resume)
