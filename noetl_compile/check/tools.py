"""Rule family: tool config (C501-C515).

Every tool invocation is visited once: a step's tool, each task of a pipeline, each workbook
task and each sink whose `tool` is a mapping. Kind-specific rules live in ``pycode`` (python),
``gates`` (gate) and ``quantum`` (quantum), cursor loops in ``cursor``; this module holds the
dispatch, the http/SQL/postgres rules, tool settings written on the step and the kinds the
Airflow runtime cannot execute (C515, from ``runtime_support``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..ast import Playbook, Step, Task
from ..diagnostics import Position
from ..load import YList, YMap, YStr
from ..read.base import TOOL_SETTING_KEYS, is_template, tool_kinds
from ..runtime_support import NEEDS, SINK_EVENT_KINDS, runtime_executes
from . import cursor, gates, pycode, quantum, shell
from .context import CheckContext
from .tool_fields import check_fields, closest_unknown

# NoETL 5's postgres keys that name the server without `auth` (noetl/tools postgres.rs).
NOETL5_CONNECTION_KEYS = ("connection_string", "host", "port", "database", "user", "password")

SQL_KINDS = ("postgres", "duckdb", "ducklake", "snowflake")
SQL_KEYS = ("query", "queries", "command", "commands", "cmd", "cmds", "sql", "statement", "script")
SQL_KEYS_ALL = SQL_KEYS + tuple(f"{key}_b64" for key in SQL_KEYS)
INPUT_KEYS = ("input", "args", "with", "data")
# TOOL_SETTING_KEYS (C513) is shared with the readers, which skip S103 for those step keys.


@dataclass
class Site:
    """One tool invocation and where it sits."""

    task: Task
    label: str
    step: Step | None = None  # None for workbook tasks
    in_pipeline: bool = False
    sink: YMap | None = None  # the sink mapping, for sink tools


def check(ctx: CheckContext) -> None:
    for site in sites(ctx):
        check_site(ctx, site)
    for step in ctx.playbook.steps:
        if step.loop is not None and step.loop.cursor is not None:
            cursor.check_cursor(ctx, step)
        if ctx.playbook.dialect != "v1":  # v1 steps carry their tool settings inline by design
            check_step_keys(ctx, step)


def sites(ctx: CheckContext) -> Iterator[Site]:
    for step in ctx.playbook.steps:
        if step.pipeline is not None:
            for task in step.pipeline:
                yield Site(
                    task, f"task {task.name!r} of step {step.name!r}", step, in_pipeline=True
                )
        elif step.tool is not None:
            yield Site(step.tool, f"step {step.name!r}", step)
        for sink in _sinks(step):
            tool = sink["tool"]
            if isinstance(tool, YStr):
                # `tool: postgres`: the kind alone, its settings beside it in the sink (the
                # runtime strips and lower-cases it, as NoETL's sink executors did).
                span = sink.value_span("tool")
                task = Task(span=span, name=step.name, kind=tool.strip().lower(), kind_span=span)
            else:
                kind = tool.get("kind") if isinstance(tool.get("kind"), str) else None
                task = Task(
                    span=tool.span,
                    name=step.name,
                    kind=kind,
                    config=tool,
                    kind_span=tool.value_span("kind") if "kind" in tool else tool.span,
                )
            yield Site(task, f"the sink of step {step.name!r}", step, sink=sink)
    for name, task in ctx.playbook.workbook.items():
        yield Site(task, f"workbook task {name!r}")


def _sinks(step: Step) -> Iterator[YMap]:
    values = [step.sink] + [
        rule.then.get("sink") for rule in step.case if isinstance(rule.then, dict)
    ]
    for value in values:
        for sink in value if isinstance(value, YList) else [value]:
            if isinstance(sink, YMap) and isinstance(sink.get("tool"), (YMap, YStr)):
                yield sink


def check_site(ctx: CheckContext, site: Site) -> None:
    kind, config = site.task.kind, site.task.config
    check_runtime_support(ctx, site)
    if site.sink is not None and config is None:
        # `tool: <kind>` as text: its settings sit beside it in the sink, which the postgres
        # check reads as the tool's input (the runtime refuses such a sink without `auth` too).
        if kind == "postgres":
            check_postgres_auth(ctx, site)
        return
    if not isinstance(config, dict) or kind is None:
        return
    check_fields(ctx, kind, config, site.label)
    if kind == "python":
        own_tool = site.step is not None and site.step.tool is site.task
        pycode.check_task_code(ctx, config, site.label, site.step.raw if own_tool else None)
    elif kind == "http":
        check_http(ctx, site)
    elif kind == "gate":
        check_gate_site(ctx, site)
    elif kind == "quantum":
        quantum.check_quantum(ctx, config, site.label, _kind_pos(site))
    elif kind == "shell":
        shell.check_shell(ctx, config, site.label, _kind_pos(site))
    if kind == "postgres":
        check_postgres_auth(ctx, site)
    if kind in SQL_KINDS and site.sink is None:  # a sink may write rows to a `table` instead
        check_sql(ctx, site)


def _kind_pos(site: Site) -> Position:
    span = site.task.kind_span or site.task.span
    return span.position if span is not None else Position(1, 1)


def _present(value: Any) -> bool:
    """The engine treats null, "" and {} as absent (`auth_cfg in (None, "", {})`)."""
    return value is not None and value != "" and value != {}


def _misplaced(ctx: CheckContext, site: Site, keys: tuple[str, ...]) -> str:
    """A note when the missing keys were written where the engine does not read them: inside
    `spec` or an input mapping of the tool, or (canonical/case-v2) on the step itself."""
    config = site.task.config if isinstance(site.task.config, dict) else {}
    places = [(f"inside `{name}`", config.get(name)) for name in ("spec",) + INPUT_KEYS]
    if ctx.playbook.dialect != "v1" and site.step is not None and site.sink is None:
        places.append(("on the step, outside `tool`", site.step.raw))
    for where, mapping in places:
        found = [key for key in keys if isinstance(mapping, dict) and _present(mapping.get(key))]
        if found:
            return f" (`{found[0]}` is {where}, where the engine does not read it)"
    return ""


# -- http ----------------------------------------------------------------------------------------
def check_http(ctx: CheckContext, site: Site) -> None:
    config = site.task.config
    if any(_present(config.get(key)) for key in ("url", "endpoint")):
        return
    typo = closest_unknown(config, "http", ("url", "endpoint"))
    if typo is not None:
        ctx.report(
            "C502",
            ctx.key_pos(config, typo),
            f"the http tool of {site.label} has no `url` (or `endpoint`); did you mean `url` "
            f"instead of {typo!r}?",
            hint=f"rename `{typo}` to `url`",
        )
        return
    ctx.report(
        "C502",
        _kind_pos(site),
        f"the http tool of {site.label} has no `url` (or `endpoint`)"
        + _misplaced(ctx, site, ("url", "endpoint")),
    )


# -- SQL tools -----------------------------------------------------------------------------------
def check_sql(ctx: CheckContext, site: Site) -> None:
    config = site.task.config
    keys = [key for key in SQL_KEYS_ALL if key in config]
    if any(_present(config[key]) and config[key] != [] for key in keys):
        return
    if keys:
        ctx.report("C504", ctx.pos(config, keys[0]), f"`{keys[0]}` of {site.label} is empty")
        return
    ctx.report(
        "C504",
        _kind_pos(site),
        f"the {site.task.kind} tool of {site.label} has no SQL (`query`, `command`, `commands` "
        f"or `script`)" + _misplaced(ctx, site, SQL_KEYS_ALL),
    )


# -- postgres auth -------------------------------------------------------------------------------
def check_postgres_auth(ctx: CheckContext, site: Site) -> None:
    """The engine needs a credential. Since 2026-03 (canonical engine) only `auth` counts, on the
    tool or in the command input, and a command without it is refused before it runs. Earlier
    engines (v1, case-v2) also took a `credential(s)` name or direct `db_*` fields in the inputs."""
    config = site.task.config if isinstance(site.task.config, dict) else {}
    inputs = list(_input_mappings(ctx, site))
    if _present(config.get("auth")) or any(_present(m.get("auth")) for m in inputs):
        return
    canonical = ctx.playbook.dialect == "canonical"
    legacy = [k for k in ("credential", "credentials") if _present(config.get(k))]
    if ctx.playbook.generation == "noetl5" and any(
        _present(config.get(k)) for k in ("credential", *NOETL5_CONNECTION_KEYS)
    ):
        # NoETL 5's tools take the credential name as `credential` too, and its postgres tool
        # connects with its own keys (noetl5_tools; the runtime builds that connection).
        return
    if not canonical and (legacy or any(_legacy_connection(m) for m in inputs)):
        return
    if canonical and legacy:
        ctx.report(
            "C503",
            ctx.key_pos(config, legacy[0]),
            f"the postgres tool of {site.label} has `{legacy[0]}` but no `auth`; the engine reads "
            f"only `auth` and refuses the command",
            hint=f"rename `{legacy[0]}` to `auth`",
        )
        return
    if canonical:
        problem = "has no `auth` (a credential name); the engine refuses the command"
    else:
        problem = (
            "has no `auth` (a credential name), no `credential` and no `db_*` connection fields "
            "in its inputs, so it cannot connect"
        )
    ctx.report(
        "C503",
        _kind_pos(site),
        f"the postgres tool of {site.label} {problem}" + _misplaced(ctx, site, ("auth",)),
    )


def _legacy_connection(mapping: dict) -> bool:
    return any(
        _present(value)
        for key, value in mapping.items()
        if key in ("credential", "credentials") or str(key).startswith("db_")
    )


def _input_mappings(ctx: CheckContext, site: Site) -> Iterator[dict]:
    """Mappings whose `auth` reaches the tool: its own inputs, the step's input, args passed by
    arcs into the step (v1/case-v2), and for a workbook task the same of every calling step."""
    yield from _inputs_of(site.task.config)
    if site.sink is not None:
        yield site.sink
        yield from _inputs_of(site.sink)
    playbook = ctx.playbook
    steps = (
        [site.step]
        if site.step is not None
        else _calls_of_workbook_tasks(playbook).get(site.task.name, [])
    )
    arc_args = _arc_args_by_target(playbook)
    for step in steps:
        if site.step is None:
            for task in step.tasks:
                yield from _inputs_of(task.config)
        if isinstance(step.input, dict):
            yield step.input
        yield from arc_args.get(step.name, ())


# Built once per playbook: asked for every postgres tool, a scan of all steps per tool made a
# playbook of thousands of such steps quadratic.
def _arc_args_by_target(playbook: Playbook) -> dict[str, list[dict]]:
    """The `args` mappings arcs pass into each step, in step and arc order."""

    def compute(playbook: Playbook) -> dict[str, list[dict]]:
        found: dict[str, list[dict]] = {}
        for step in playbook.steps:
            for arc in step.router.arcs:
                if isinstance(arc.args, dict):
                    found.setdefault(arc.target, []).append(arc.args)
        return found

    return playbook.analysis("arc_args_by_target", compute)


def _calls_of_workbook_tasks(playbook: Playbook) -> dict[str | None, list[Step]]:
    """The steps calling each workbook task (a step once per calling task, in step order)."""

    def compute(playbook: Playbook) -> dict[str | None, list[Step]]:
        found: dict[str | None, list[Step]] = {}
        for step in playbook.steps:
            for task in step.tasks:
                if task.kind == "workbook":
                    found.setdefault(task.name, []).append(step)
        return found

    return playbook.analysis("workbook_callers", compute)


def _inputs_of(mapping: Any) -> Iterator[dict]:
    if isinstance(mapping, dict):
        yield from (mapping[key] for key in INPUT_KEYS if isinstance(mapping.get(key), dict))


# -- gates ---------------------------------------------------------------------------------------
def check_gate_site(ctx: CheckContext, site: Site) -> None:
    if site.in_pipeline:
        ctx.report(
            "C509",
            _kind_pos(site),
            f"{site.label} is a gate inside a pipeline; a gate must be a step of its own",
        )
    elif site.step is not None and site.step.loop is not None and site.sink is None:
        ctx.report(
            "C509",
            _kind_pos(site),
            f"{site.label} is a gate inside a loop; move the gate into its own step before or after the loop",
        )
    gates.check_gate(ctx, site.task.config, site.label)


# -- kinds the Airflow runtime cannot execute ----------------------------------------------------
def check_runtime_support(ctx: CheckContext, site: Site) -> None:
    """C515 at the `kind` value of a tool the runtime has no executor for.

    The readers already normalise kinds (v1 `type:` and `tool: <name>`, the task of a v1
    `type: iterator` step), so ``site.task.kind`` is what reaches the runtime, except for a
    workbook call: lowering replaces it with the workbook task's tool, and that task is a site
    of its own, so the warning lands once, on the task, naming the steps that call it.
    """
    kind = site.task.kind
    if not isinstance(kind, str) or is_template(kind) or runtime_executes(kind):
        return
    if site.sink is not None and kind in SINK_EVENT_KINDS:
        return  # written to the event log by the sink itself
    if site.sink is None and kind not in tool_kinds(ctx.playbook.dialect, ctx.playbook.generation):
        return  # an unknown kind is already an error (S110); sinks are not read for kinds
    label = site.label
    if site.step is None:
        callers = _workbook_callers(ctx, site.task.name)
        if callers:
            steps = "step" if len(callers) == 1 else "steps"
            label += f", called by {steps} " + ", ".join(repr(name) for name in callers)
    if ctx.playbook.generation == "noetl5":
        # NoETL 5 projects use many engine-only kinds: once per kind and file, with what the
        # kind would need, is what a user can act on.
        if kind in ctx.c515_kinds:
            return
        ctx.c515_kinds.add(kind)
        more = sum(1 for other in sites(ctx) if other.task.kind == kind) - 1
        also = f" and {more} more in this file" if more > 0 else ""
        ctx.report(
            "C515",
            _kind_pos(site),
            f"this runtime cannot execute tool kind {kind!r} ({label}{also}), so it fails at "
            "run time",
            hint=NEEDS.get(kind, "needs an executor in airflow_plugin/tools"),
        )
        return
    ctx.report(
        "C515",
        _kind_pos(site),
        f"this runtime cannot execute tool kind {kind!r} ({label}), so it fails at run time",
        hint="use a kind the Airflow runtime executes, or add an executor to airflow_plugin/tools",
    )


def _workbook_callers(ctx: CheckContext, task_name: str | None) -> list[str]:
    calls = _calls_of_workbook_tasks(ctx.playbook).get(task_name, [])
    return list(dict.fromkeys(step.name for step in calls))


# -- tool settings on the step -------------------------------------------------------------------
def check_step_keys(ctx: CheckContext, step: Step) -> None:
    raw = step.raw
    if not isinstance(raw, YMap):
        return
    if step.pipeline is not None:
        where = "the pipeline task that needs it"
    elif step.tool is not None:
        where = "`tool`"
    else:
        where = "a `tool` block"
    for key in raw:
        if key in TOOL_SETTING_KEYS:
            ctx.report(
                "C513",
                ctx.key_pos(raw, key),
                f"`{key}` is a tool setting, but it sits on step {step.name!r} where the engine "
                f"ignores it; move it into {where}",
            )
