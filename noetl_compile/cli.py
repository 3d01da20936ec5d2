"""`noetlc`: check, explain, compile and graph NoETL playbooks.

Exit status: 0 clean, 1 errors found (warnings too with --strict), 2 usage error.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence

from .diagnostics import Diagnostic, Severity

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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="noetlc", description="Check and compile NoETL playbooks for Apache Airflow 3."
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    check = commands.add_parser("check", help="parse and check playbooks, report diagnostics")
    check.add_argument("paths", nargs="+", help="playbook files or folders")
    check.add_argument(
        "--format", choices=("concise", "full", "json", "github", "sarif"), default="concise"
    )
    check.add_argument(
        "--select", type=_codes, default=[], help="only these codes or prefixes (e.g. T3,F401)"
    )
    check.add_argument("--ignore", type=_codes, default=[], help="drop these codes or prefixes")
    check.add_argument("--strict", action="store_true", help="warnings fail the run too")
    check.add_argument(
        "--dialect", choices=("v1", "case-v2", "canonical"), help="force the DSL generation"
    )
    check.add_argument(
        "--connections", metavar="FILE", help="JSON/YAML file of known connection names"
    )
    check.add_argument("--quiet", action="store_true", help="no summary line")
    check.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=min(4, os.cpu_count() or 1),
        help="worker processes for large runs (default: one per CPU, at most 4)",
    )

    explain = commands.add_parser("explain", help="what a diagnostic code means and how to fix it")
    explain.add_argument("code", nargs="?", help="e.g. T301; without a code, list all codes")

    compile_ = commands.add_parser("compile", help="compile playbooks into Airflow DAG files")
    compile_.add_argument("paths", nargs="+")
    compile_.add_argument("-o", "--output", required=True, help="folder for the DAG files")
    compile_.add_argument("--check", action="store_true", help="fail if the output folder is stale")
    compile_.add_argument("--dialect", choices=("v1", "case-v2", "canonical"))
    compile_.add_argument("--connections", metavar="FILE")
    compile_.add_argument(
        "--format", choices=("concise", "full", "json", "github", "sarif"), default="concise"
    )

    graph = commands.add_parser("graph", help="draw the compiled graph of one playbook")
    graph.add_argument("path")
    graph.add_argument("--format", choices=("mermaid", "dot", "svg", "png"), default="mermaid")
    graph.add_argument("-o", "--output", help="file to write (default: stdout for text formats)")
    graph.add_argument("--dialect", choices=("v1", "case-v2", "canonical"))
    return parser


def load_connections(path: str | None) -> set[str] | None:
    """Connection names from a JSON/YAML file: a list of names, or a mapping keyed by name."""
    if path is None:
        return None
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read connections file {path}: {exc}") from exc
    if isinstance(data, dict):
        return {str(k) for k in data}
    if isinstance(data, list):
        return {
            str(item.get("conn_id", item.get("name")) if isinstance(item, dict) else item)
            for item in data
        }
    raise UsageError(
        f"connections file {path} must hold a list of names or a mapping keyed by name"
    )


def selected(
    diagnostics: Sequence[Diagnostic], select: list[str], ignore: list[str]
) -> list[Diagnostic]:
    def matches(code: str, patterns: list[str]) -> bool:
        return any(code.startswith(p) for p in patterns)

    return [
        d
        for d in diagnostics
        if (not select or matches(d.code, select)) and not matches(d.code, ignore)
    ]


def run_check(args: argparse.Namespace) -> int:
    from .check import report_paths
    from .report import FORMATTERS, summary

    results, problems = report_paths(
        args.paths,
        dialect=args.dialect,
        connections=load_connections(args.connections),
        jobs=max(1, args.jobs),
    )
    diagnostics = selected(
        problems + [d for r in results for d in r.diagnostics], args.select, args.ignore
    )
    sources = {r.path: r.text for r in results}
    sys.stdout.write(FORMATTERS[args.format](diagnostics, sources))
    if args.format in ("concise", "full") and not args.quiet:
        sys.stdout.write(summary(diagnostics, len(results)))
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
    from .compile import run as compile_run

    return compile_run(args)


def run_graph(args: argparse.Namespace) -> int:
    from .graph import run as graph_run

    return graph_run(args)


COMMANDS = {"check": run_check, "explain": run_explain, "compile": run_compile, "graph": run_graph}


def main(argv: Sequence[str] | None = None) -> int:
    # A CLI run builds many short-lived objects and no cycles worth collecting; the cyclic
    # collector alone costs more than parsing (measured in bench/check_corpus.py).
    gc.disable()
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"noetlc: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
