"""The compile step of `noetlc run`: a playbook and the playbooks it calls, compiled into a
managed home's dags folder, as the run request the plugin's local runner takes.

Public and below the CLI: ``run_cli.run_run`` calls it for a cold run, and the warm runner's
forks (``airflow_plugin/local/warm.py``) call it after the fork, where the compiler is imported
already. It is the one compiler module besides the standard-library leaves that the plugin may
import (inside a function, from ``airflow_plugin.local`` only: ``tests/test_layout.py``), and it
reaches neither the CLI nor ``plugin_seam``, so that import closes no circle.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the CLI imports this module for every run; the fork compiles
    from .diagnostics import Diagnostic

__all__ = ["NOT_COMPILED", "called_playbooks", "compile_for_run", "place_dags"]

# `noetlc run`'s exit status when the playbook does not compile (the CLI's EXIT_FINDINGS).
NOT_COMPILED = 1


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


def compile_for_run(
    playbook: str,
    dags: str,
    names: set[str] | None,
    *,
    dialect: str | None = None,
    as_json: bool = False,
    fuse: bool = False,
) -> dict | None:
    """Compile ``playbook`` and the playbooks it calls into ``dags`` (which then holds exactly
    these DAGs): the run request ``{"dag_id", "dags"}``, or None after printing the diagnostics
    (``as_json``: a failed report on stdout, the diagnostics on stderr) when one does not
    compile; the diagnostics of a playbook that compiles (warnings, notes) are printed too,
    before the run starts. ``names``: the connection names the run has (R203), None for
    unknown."""
    from .compile import compile_paths
    from .report import FORMATTERS

    paths, unresolved = called_playbooks(playbook, dialect)
    report = compile_paths(paths, dags, dialect=dialect, connections=names, fuse=fuse)
    if unresolved:
        sys.stderr.write(FORMATTERS["concise"](unresolved, report.sources))
    target = os.path.abspath(playbook)
    parent = next((f for f in report.files if os.path.abspath(f.source) == target), None)
    if report.failed or parent is None:
        diagnostics = sorted(report.diagnostics, key=lambda d: d.sort_key)
        text = FORMATTERS["concise"](diagnostics, report.sources)
        if as_json:
            sys.stderr.write(text)
            failed = {"dag_id": None, "run_id": None, "execution_id": None, "state": "failed"}
            failed.update(steps={}, ctx={}, vars={})
            failed["diagnostics"] = json.loads(FORMATTERS["json"](diagnostics, report.sources))
            print(json.dumps(failed))
        else:
            sys.stdout.write(text)
            print(f"{playbook}: not run: the playbook does not compile")
        return None
    if report.diagnostics:
        # What `check` and `compile` say, warnings and notes too, before anything runs: a run
        # must never look fine while check warned (stderr under --json: stdout is one object).
        diagnostics = sorted(report.diagnostics, key=lambda d: d.sort_key)
        text = FORMATTERS["concise"](diagnostics, report.sources)
        (sys.stderr if as_json else sys.stdout).write(text)
        (sys.stderr if as_json else sys.stdout).flush()
    _prune(dags, {os.path.abspath(f.output) for f in report.files})
    return {
        "dag_id": parent.dag_id,
        "dags": {f.dag_id: os.path.abspath(f.output) for f in report.files},
    }


def _prune(dags: str, keep: set[str]) -> None:
    for folder, _, files in os.walk(dags):
        for name in files:
            path = os.path.abspath(os.path.join(folder, name))
            if name.endswith(".py") and path not in keep:
                os.remove(path)  # a DAG of an earlier run: the bundle sync would parse it


def place_dags(request: dict, compiled: str, dags: str) -> None:
    """Move the DAG files ``compile_for_run`` wrote into ``compiled`` to the same places under
    ``dags`` (a run slot's dags folder, which then holds exactly these DAGs) and point
    ``request["dags"]`` at them: a cold `noetlc run` compiles before it holds a slot."""
    placed = {}
    for dag_id, path in request["dags"].items():
        target = os.path.join(os.path.abspath(dags), os.path.relpath(path, compiled))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(path, target)
        placed[dag_id] = target
    _prune(dags, set(placed.values()))
    request["dags"] = placed
