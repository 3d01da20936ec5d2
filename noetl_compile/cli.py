"""`noetlc`: check, explain, compile, graph and run NoETL playbooks.

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
from .diagnostics import Diagnostic, Severity

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
MISSING_PATH = "E001"


def missing_paths(paths: Sequence[str]) -> list[str]:
    """The paths given on the command line that do not exist."""
    return [path for path in paths if not os.path.exists(path)]


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
    events.add_argument("--url", help="the event log (default: NOETL_EVENTS_URL, then SQLite)")
    status = commands.add_parser(
        "status", help="the state of an execution, rebuilt from its events alone"
    )
    status.add_argument("execution", help="the execution id (`noetlc run` prints it)")
    status.add_argument("--json", action="store_true", help="the state as one JSON object")
    status.add_argument("--url", help="the event log (default: NOETL_EVENTS_URL, then SQLite)")
    _add_gate_commands(commands)
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


def run_gate_command(args: argparse.Namespace) -> int:
    """`noetlc gates` / `noetlc signal` (through plugin_seam, HTTP only)."""
    import importlib.util

    if importlib.util.find_spec("httpx") is None:
        raise UsageError(f"`noetlc {args.command}` needs httpx: pip install 'noetlc[airflow]'")
    from .plugin_seam import gate_command

    return gate_command(args)


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


def called_playbooks(path: str, dialect: str | None) -> tuple[list[str], list[Diagnostic]]:
    """``path`` and, transitively, the playbooks it calls (``kind: playbook`` with a literal
    ``path``), found by exact catalog path among the YAML files under ``path``'s folder; plus
    R204/R209 for calls that name no playbook there, or more than one (the check stage's own
    resolution of nested calls)."""
    from .check import check_results, discover, read_file
    from .check.references import catalog_claim, child_file, unresolved_nested_calls

    first = read_file(path, dialect)
    calls = check_results([first], resolve_nested=False).nested_calls
    if not calls:
        return [path], []
    files, _ = discover([os.path.dirname(os.path.abspath(path))])
    results = {os.path.abspath(path): first}
    for candidate in files:
        results.setdefault(os.path.abspath(candidate), read_file(candidate, dialect))
    claims = [
        claim
        for result in results.values()
        if result.playbook is not None
        and (claim := catalog_claim(result.playbook, result.path)) is not None
    ]
    chosen: list[str] = [path]
    pending, unresolved = list(calls), []
    while pending:
        call = pending.pop(0)
        if call.by_file:  # NoETL 5: a file joined to the caller's folder (R204 when missing)
            target = child_file(call.file, call.target)
            if not os.path.isfile(target):
                unresolved.append(call)
                continue
            result = results.setdefault(os.path.abspath(target), read_file(target, dialect))
            if result.path not in chosen and os.path.abspath(target) != os.path.abspath(path):
                chosen.append(result.path)
                pending += check_results([result], resolve_nested=False).nested_calls
            continue
        matches = [c for c in claims if c.key == call.target.strip("/")]
        if len(matches) != 1:
            unresolved.append(call)
            continue
        result = results[os.path.abspath(matches[0].file)]
        if result.path not in chosen and os.path.abspath(result.path) != os.path.abspath(path):
            chosen.append(result.path)
            pending += check_results([result], resolve_nested=False).nested_calls
    return chosen, unresolved_nested_calls(unresolved, claims)


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
    # A sign of life before the slow part (reading and compiling, Airflow's import and start:
    # seconds), on stderr so that stdout stays the step lines (or --json's one object).
    print(f"noetlc: running {args.playbook} (starting Airflow)", file=sys.stderr, flush=True)
    _check_overrides(args.playbook, args.dialect, sets, set_new, conf)
    if importlib.util.find_spec("airflow") is None:
        raise UsageError("`noetlc run` needs Apache Airflow: pip install 'noetlc[airflow]'")
    from .connections import ConnectionsError, env_connection_ids, load_connections_file

    names, conn_env = None, {}
    if args.connections:
        try:
            connections = load_connections_file(args.connections)
        except ConnectionsError as exc:
            raise UsageError(str(exc)) from None
        names, conn_env = connections.names | env_connection_ids(os.environ), connections.env
    from .plugin_seam import local_runner

    local = local_runner()
    home = local.Home(Path(args.home).expanduser() if args.home else local.default_home())
    try:
        home.prepare()
    except OSError as exc:
        raise UsageError(f"cannot use {home.root} as the Airflow home: {exc.strerror}") from None

    def waiting() -> None:
        print(f"noetlc: waiting for another run in {home.root}", file=sys.stderr)

    with local.locked(home, on_wait=waiting) as lock_fd:
        env = local.child_environment(home, connections=conn_env, strict=args.strict)
        log = home.new_log(os.path.splitext(os.path.basename(args.playbook))[0])
        run = {
            "conf": conf,
            "set": sets + set_new,
            "signals": signals,
            "json": args.json,
            "started_at": started_at,
        }
        warm = local.Warm.of(args.warm, home, env)  # airflow_plugin/local/warm.py; None: opted out
        if warm is not None and warm.ready:
            work = {"playbook": args.playbook, "dialect": args.dialect, "json": args.json}
            work["fuse"] = args.fuse
            names_list = sorted(names) if names is not None else None
            code = warm.run(
                log, lock_fd, {"compile": {"args": work, "names": names_list, "run": run}}
            )
            if code is not None:
                return code
        child = local.Child(env, log, lock_fd)
        try:
            request = _compile_for_run(args, str(home.dags), names)
        except BaseException:
            child.abandon()
            raise
        if request is None:
            child.abandon()
            return EXIT_FINDINGS
        request.update(run)
        code = child.run(request)
        if warm is not None:
            warm.start()  # for the next run
        return code


def _compile_for_run(args: argparse.Namespace, dags: str, names: set[str] | None) -> dict | None:
    """Compile into the home's dags folder (which then holds exactly these DAGs); None after
    printing the diagnostics when a playbook does not compile."""
    import json

    from .compile import compile_paths
    from .report import FORMATTERS

    paths, unresolved = called_playbooks(args.playbook, args.dialect)
    report = compile_paths(
        paths, dags, dialect=args.dialect, connections=names, fuse=getattr(args, "fuse", False)
    )
    if unresolved:
        sys.stderr.write(FORMATTERS["concise"](unresolved, report.sources))
    target = os.path.abspath(args.playbook)
    parent = next((f for f in report.files if os.path.abspath(f.source) == target), None)
    if report.failed or parent is None:
        diagnostics = sorted(report.diagnostics, key=lambda d: d.sort_key)
        text = FORMATTERS["concise"](diagnostics, report.sources)
        if args.json:
            sys.stderr.write(text)
            failed = {"dag_id": None, "run_id": None, "execution_id": None, "state": "failed"}
            failed.update(steps={}, ctx={}, vars={})
            failed["diagnostics"] = json.loads(FORMATTERS["json"](diagnostics, report.sources))
            print(json.dumps(failed))
        else:
            sys.stdout.write(text)
            print(f"{args.playbook}: not run: the playbook does not compile")
        return None
    keep = {os.path.abspath(f.output) for f in report.files}
    for folder, _, files in os.walk(dags):
        for name in files:
            path = os.path.abspath(os.path.join(folder, name))
            if name.endswith(".py") and path not in keep:
                os.remove(path)  # a DAG of an earlier run: the bundle sync would parse it
    return {
        "dag_id": parent.dag_id,
        "dags": {f.dag_id: os.path.abspath(f.output) for f in report.files},
    }


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
