"""Rule family R: names that must resolve — routing targets, workbook tasks, jump labels,
end_loop, executor steps, connections and nested playbooks."""

from __future__ import annotations

import os
import re
from collections import defaultdict

from ..analyze.expressions import scan_template
from ..ast import SKIPS_UNKNOWN_TARGETS, Playbook, Step, Task
from ..dag_ids import dag_id_for_path
from ..diagnostics import Diagnostic
from ..load import YMap
from ..read.base import did_you_mean, is_template
from ..rules import Severity, severity_of
from .context import CatalogClaim, CheckContext, NestedCall
from .tools import sites as tool_sites

_SIMPLE_REF = ("{{", "}}")


def check(ctx: CheckContext) -> None:
    playbook = ctx.playbook
    for step in playbook.steps:
        for arc in step.router.arcs:
            if arc.target not in ctx.step_names and not is_template(arc.target):
                if playbook.dialect == "v1" and arc.target == "end":
                    continue  # the v1 engine treats `end` as the implicit terminal step
                suggestion = did_you_mean(arc.target, ctx.step_names)
                # The canonical and case-v2 engines skip such an arc (SKIPS_UNKNOWN_TARGETS):
                # a warning there, and the lowering leaves the arc out (a case rule's target
                # stays an error: the runtime would count it as the rule's route). A near miss of a step's
                # name stays an error: it is a typo, and skipping it would silently take
                # another route (docs/semantics.md section 1).
                skipped = (
                    playbook.dialect in SKIPS_UNKNOWN_TARGETS
                    and arc.origin != "case"
                    and not suggestion
                )
                ctx.report(
                    "R201",
                    arc.span.position if arc.span else ctx.pos(step.raw),
                    f"step {step.name!r} routes to unknown step {arc.target!r}"
                    + suggestion
                    + ("; the engine skips this arc (it never matches)" if skipped else ""),
                    severity=Severity.WARNING if skipped else None,
                )
        _check_end_loop(ctx, step)
        _check_jumps(ctx, step)
        for task in step.tasks:
            _check_task(ctx, step, task)
    for task in playbook.workbook.values():
        _check_task(ctx, None, task)
    _check_executor(ctx)
    _claim_catalog_key(ctx)
    if ctx.project.connections is not None:
        _check_connections(ctx)


def _check_connections(ctx: CheckContext) -> None:
    """R203 at every `auth`/`credential` of every tool (steps, pipeline tasks, workbook tasks,
    sinks of a step and of its case rules, cursors) naming a connection the file lacks. A
    template is followed to each name it can take: the workload default of the variable it
    reads, and the literal of a `default(...)` or an `or`/`if` alternative."""
    connections = ctx.project.connections
    holders: list[tuple[YMap, str]] = []
    for site in tool_sites(ctx):
        if isinstance(site.task.config, YMap):
            holders.append((site.task.config, site.label))
        if site.sink is not None:
            holders.append((site.sink, site.label))
    for step in ctx.playbook.steps:
        cursor = step.loop.cursor if step.loop is not None else None
        if isinstance(cursor, YMap):
            holders.append((cursor, f"the cursor of step {step.name!r}"))
    for config, label in holders:
        for key in ("auth", "credential"):
            value = config.get(key)
            for name in connection_names(ctx, value):
                if name in connections:
                    continue
                via = f" (from {value!r})" if name != value else ""
                ctx.report(
                    "R203",
                    ctx.pos(config, key),
                    f"connection {name!r}{via} of {label} is not in the connections file"
                    + did_you_mean(name, sorted(connections)),
                )


def _claim_catalog_key(ctx: CheckContext) -> None:
    claim = catalog_claim(ctx.playbook, ctx.sink.path)
    if claim is not None:
        ctx.project.claims.append(claim)


def catalog_claim(playbook: Playbook, file: str) -> CatalogClaim | None:
    """The catalog key and DAG id ``playbook`` claims, at the YAML value that sets the key."""
    key = playbook.catalog_key
    if key is None:
        return None  # S101 already: nothing to register, nothing to call
    root = playbook.raw if isinstance(playbook.raw, YMap) else None
    metadata = root.get("metadata") if root is not None else None
    position = CheckContext.pos(root)
    for container, field in (
        (metadata, "path"),
        (root, "path"),
        (metadata, "name"),
        (root, "name"),
    ):
        if isinstance(container, YMap) and container.get(field) == key:
            position = CheckContext.pos(container, field)
            break
    return CatalogClaim(file, position, key.strip("/"), dag_id_for_path(key))


def _check_end_loop(ctx: CheckContext, step: Step) -> None:
    if step.end_loop is None:
        return
    target = ctx.playbook.step(step.end_loop)
    if target is None or target.loop is None:
        what = "an unknown step" if target is None else "a step without `loop`"
        ctx.report(
            "R205",
            step.end_loop_span.position,
            f"`end_loop` of step {step.name!r} names {step.end_loop!r}, {what}"
            + (
                did_you_mean(step.end_loop, _loop_step_names(ctx.playbook))
                if target is None
                else ""
            ),
        )


# Namespaces of did-you-mean hints, built once per playbook: a playbook with thousands of unknown
# names asks once per name.
def _loop_step_names(playbook: Playbook) -> frozenset[str]:
    return playbook.analysis(
        "loop_step_names", lambda p: frozenset(s.name for s in p.steps if s.loop)
    )


def _workbook_names(playbook: Playbook) -> frozenset[str]:
    return playbook.analysis("workbook_names", lambda p: frozenset(map(str, p.workbook)))


def _check_jumps(ctx: CheckContext, step: Step) -> None:
    labels = [t.name for t in step.tasks if t.name]
    for task in step.tasks:
        for rule in task.rules:
            if (
                rule.action == "jump"
                and rule.to
                and rule.to not in labels
                and rule.to not in ("previous", "prev")
            ):
                ctx.report(
                    "R206",
                    (rule.to_span or rule.span).position,
                    f"`jump` in step {step.name!r} targets unknown task {rule.to!r}"
                    + did_you_mean(rule.to, labels),
                )


def _check_task(ctx: CheckContext, step: Step | None, task: Task) -> None:
    config = task.config if isinstance(task.config, YMap) else None
    if config is None:
        return
    if task.kind == "workbook" and step is not None:
        key = "name" if "name" in config else "task"
        name = config.get(key)
        if isinstance(name, str) and not is_template(name) and name not in ctx.playbook.workbook:
            ctx.report(
                "R202",
                ctx.pos(config, key),
                f"workbook task {name!r} is not defined in `workbook`"
                + did_you_mean(name, _workbook_names(ctx.playbook)),
            )
    if task.kind in ("playbook", "playbooks"):
        path = config.get("path")
        own_tool = step is not None and step.pipeline is None and step.tool is task
        if own_tool and not isinstance(path, str):
            # A step that is a nested call becomes an operator that needs the path when the DAG
            # file is parsed (a workbook or pipeline task may get it elsewhere).
            ctx.report(
                "S101",
                ctx.pos(config, "path") if "path" in config else ctx.pos(config),
                f"the nested playbook call of step {step.name!r} needs a `path` (a string)",
            )
        elif isinstance(path, str) and not path.strip("/ "):
            # The nested-playbook operator refuses an empty path when the DAG file is parsed.
            ctx.report("S101", ctx.pos(config, "path"), "the nested playbook `path` is empty")
        elif isinstance(path, str) and not is_template(path):
            ctx.project.nested_calls.append(
                NestedCall(
                    ctx.sink.path, ctx.pos(config, "path"), path, by_file(ctx.playbook, path)
                )
            )


def _others(claim: CatalogClaim, group: list[CatalogClaim]) -> str:
    return ", ".join(sorted({c.file for c in group if c.file != claim.file}))


def duplicate_claims(claims: list[CatalogClaim]) -> list[Diagnostic]:
    """R208 at every playbook whose catalog path (or DAG id) another playbook of the run claims.

    NoETL registers the second as a newer version of the first, so which one a call runs depends
    on registration order; Airflow loads only one of two DAGs with one id. No tie-break would be
    stable (it would change when the other file comes or goes), so both are reported.
    """
    by_key: dict[str, list[CatalogClaim]] = defaultdict(list)
    by_id: dict[str, list[CatalogClaim]] = defaultdict(list)
    for claim in claims:
        by_key[claim.key].append(claim)
        by_id[claim.dag_id.lower()].append(claim)  # case-folding file systems and UIs
    found = []
    for claim in claims:
        same_key = by_key[claim.key]
        same_id = [c for c in by_id[claim.dag_id.lower()] if c.key != claim.key]
        if len(same_key) > 1:
            message = (
                f"catalog path {claim.key!r} is also claimed by {_others(claim, same_key)}: "
                "NoETL keeps one as a newer version of the other, and a nested call runs "
                "whichever was registered last"
            )
        elif same_id:
            message = (
                f"DAG id {claim.dag_id!r} of catalog path {claim.key!r} is also the DAG id of "
                f"{_others(claim, same_id)}: Airflow loads only one of them"
            )
        else:
            continue
        found.append(Diagnostic("R208", severity_of("R208"), claim.file, claim.position, message))
    return found


def by_file(playbook: Playbook, path: str) -> bool:
    """Whether a nested call names its child by file: always under NoETL's local runtime (the
    CLI joins the path to the caller's folder), and for a `./`/`../` path in NoETL 5."""
    if playbook.generation != "noetl5":
        return False
    return playbook.profile == "local" or path.startswith(("./", "../"))


def child_file(caller: str, target: str) -> str:
    """The file a by-file nested call names: ``target`` joined to the caller's folder."""
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(caller)), target))


def unresolved_nested_calls(
    calls: list[NestedCall], claims: list[CatalogClaim]
) -> list[Diagnostic]:
    """Resolve nested playbook paths as NoETL's catalog does: by exact catalog path (``metadata.path``,
    else ``path``, else the name), never by a playbook's name when it has a path. R204 when no
    playbook of the run has that path, R209 when more than one does."""
    by_key: dict[str, list[CatalogClaim]] = defaultdict(list)
    for claim in claims:
        by_key[claim.key].append(claim)
    known = frozenset(by_key)
    found = []
    for call in calls:
        if call.by_file:
            resolved = child_file(call.file, call.target)
            if not os.path.isfile(resolved):
                message = (
                    f"nested playbook file {call.target!r} does not exist (NoETL's local runtime "
                    f"reads it from the calling playbook's folder: {resolved})"
                )
                found.append(
                    Diagnostic("R204", severity_of("R204"), call.file, call.position, message)
                )
            continue
        matches = by_key.get(call.target.strip("/"), [])
        if len(matches) == 1:
            continue
        if matches:
            code = "R209"
            message = (
                f"nested playbook {call.target!r} is claimed by {len(matches)} playbooks "
                f"({', '.join(sorted(c.file for c in matches))}); NoETL runs whichever was "
                "registered last, so the call cannot be compiled to one DAG"
            )
        else:
            code = "R204"
            message = (
                f"nested playbook {call.target!r} is not among the checked playbooks"
                + did_you_mean(call.target.strip("/"), known)
            )
        found.append(Diagnostic(code, severity_of(code), call.file, call.position, message))
    return found


# The string literals an expression can evaluate to as a fallback: `default('x')`, `d("x")`,
# `or 'x'`, `else 'x'`. A quoted run is capped at 256 characters, so the scan stays linear.
_FALLBACK = re.compile(
    r"""(?:\b(?:default|d)\(\s*|\bor\s+|\belse\s+)(?:'([^'\n]{0,256})'|"([^"\n]{0,256})")"""
)


def connection_names(ctx: CheckContext, value: object) -> list[str]:
    """The connection names an `auth` value can take: itself when literal, else the workload
    defaults of the names its template reads and its literal fallbacks."""
    if not isinstance(value, str) or not value.strip():
        return []
    if not is_template(value):
        return [value]
    names: list[str] = []
    literal = resolve_literal(ctx, value)
    if literal is not None:
        names.append(literal)
    scan = scan_template(value)
    if scan.error is None:
        workload = ctx.playbook.workload if isinstance(ctx.playbook.workload, dict) else {}
        for ref in scan.references:
            key = ref.path[0] if ref.root in ("workload", "ctx") and ref.path else ref.root
            default = workload.get(key) if isinstance(key, str) else None
            if isinstance(default, str) and default.strip() and not is_template(default):
                names.append(default)
    for match in _FALLBACK.finditer(value):
        fallback = match.group(1) if match.group(1) is not None else match.group(2)
        if fallback.strip():
            names.append(fallback)
    return list(dict.fromkeys(names))


def resolve_literal(ctx: CheckContext, value: object) -> str | None:
    """A literal name, or `{{ key }}` / `{{ workload.key }}` resolved through workload defaults."""
    if not isinstance(value, str):
        return None
    if not is_template(value):
        return value
    inner = value.strip()
    if not (inner.startswith(_SIMPLE_REF[0]) and inner.endswith(_SIMPLE_REF[1])):
        return None
    expression = inner[2:-2].strip()
    key = expression.removeprefix("workload.")
    workload = ctx.playbook.workload or {}
    resolved = workload.get(key) if key.isidentifier() else None
    return resolved if isinstance(resolved, str) and not is_template(resolved) else None


def _check_executor(ctx: CheckContext) -> None:
    executor = ctx.playbook.executor
    spec = executor.get("spec") if isinstance(executor, YMap) else None
    if not isinstance(spec, YMap):
        return
    for key in ("entry_step", "final_step"):
        name = spec.get(key)
        if isinstance(name, str) and name not in ctx.step_names:
            ctx.report(
                "R207",
                ctx.pos(spec, key),
                f"`executor.spec.{key}` names unknown step {name!r}"
                + did_you_mean(name, ctx.step_names),
            )
