"""D9xx: constructs whose run on Airflow differs from their run on NoETL's engine.

Each finding names a row of docs/semantics.md section 1: a behaviour of NoETL's engine noetlc
deliberately does not copy (a hang, a race, a storage artefact, a dropped write). The playbook
is valid; the info is there so that a team moving it from NoETL sees the difference at the
construct before it runs (issue 33: no silent divergence). Which engine a row is about follows
the playbook's generation (``Playbook.dialect``; NoETL 5 files are not the April engine's and
get none of the canonical rows).

Every detector here reads the AST and the template scans check already made; nothing is run.
"""

from __future__ import annotations

import re
from typing import Any

from ..ast import Step
from ..read import detect_dialect
from ..spans import YList, YMap, YStr
from .context import CheckContext
from .difference_reads import references
from .difference_sites import arc_pos, mentions, pos_of, reads, step_pos
from .differences_case_v2 import auth_service, swallowed_sink
from .differences_noetl5 import check_noetl5
from .differences_v1 import v1_first_step, v1_step
from .pycode import non_mapping_result

# `result = None` on a line of its own (the whole statement): linear, anchored per line.
_RESULT_NONE = re.compile(r"^[ \t]*result[ \t]*=[ \t]*None[ \t]*(?:#[^\n]*)?$", re.MULTILINE)
# The names a case-v2 rule reads the call's outcome by (table (b), place case-v2 context).
_OUTCOME_NAMES = ("error", "response", "result")
_WORKLOAD_NAME = re.compile(r"\{\{[ \t]*workload\.([A-Za-z_][A-Za-z0-9_]*)[ \t]*\}\}")


def check(ctx: CheckContext) -> None:
    playbook = ctx.playbook
    if playbook.generation == "noetl5":
        # The rows of section 1's main table are about the three recorded engines (58c2a16b,
        # dc55c492, 138c10ed); NoETL 5's own table has its codes (differences_noetl5).
        check_noetl5(ctx)
        return
    dialect = playbook.dialect
    loop_steps = {s.name for s in playbook.steps if s.loop is not None}
    pipeline_steps = {
        s.name for s in playbook.steps if s.pipeline is not None or any(t.rules for t in s.tasks)
    }
    for step in playbook.steps:
        if dialect == "v1":
            v1_step(ctx, step)
            # 58c2a16b's duckdb plugin returns the same result shape as the later engines' (D919).
            for task in step.tasks:
                if task.kind == "duckdb":
                    _task(ctx, step, task.kind, task.config, dialect)
        else:
            _engine_step(ctx, step, dialect)
    if dialect == "v1":
        v1_first_step(ctx)
    if dialect == "case-v2":
        _case_next_on_canonical(ctx)
    references(ctx, dialect, loop_steps, pipeline_steps)


# ----------------------------------------------------------------------------- canonical, case-v2


def _engine_step(ctx: CheckContext, step: Step, dialect: str) -> None:
    raw = step.raw if isinstance(step.raw, YMap) else None
    arcs = step.router.arcs
    if not step.tasks and step.loop is None and (arcs or step.case) and dialect == "canonical":
        ctx.report(
            "D901",
            step_pos(ctx, step),
            f"step {step.name!r} has no tool: NoETL's engine issues no command for it and its "
            "execution never finishes; noetlc passes through it (docs/semantics.md section 1)",
            hint="give it `tool: {kind: noop}` if the playbook must also run on NoETL",
        )
    if step.loop is not None:
        _loop(ctx, step, dialect)
    if dialect == "canonical":
        _canonical_step(ctx, step, raw)
    else:
        _case_v2_step(ctx, step)
    for task in step.tasks:
        _task(ctx, step, task.kind, task.config, dialect)


def _loop(ctx: CheckContext, step: Step, dialect: str) -> None:
    loop = step.loop
    collection = loop.collection
    written = step.raw.get("loop") if isinstance(step.raw, YMap) else None
    explicit_null = isinstance(written, YMap) and "in" in written and written["in"] is None
    empty = "null" if explicit_null else _empty_collection(ctx, collection)
    if empty is not None:
        where = ctx.pos(written, "in") if explicit_null else pos_of(ctx, collection, loop)
        ctx.report(
            "D903",
            where,
            f"the loop of step {step.name!r} runs over {empty}: NoETL issues no command and its "
            "execution never finishes (the case-v2 engine refuses an empty entry loop); noetlc "
            "completes the step with an empty aggregate and goes on",
        )
        return  # no item runs: the other loop rows cannot apply
    if dialect != "canonical" or loop.cursor is not None or not step.tasks:
        return
    text = _string_collection(ctx, collection)
    if text is not None and ctx.playbook.generation is None:
        ctx.report(
            "D917",
            pos_of(ctx, collection, loop),
            f"the loop of step {step.name!r} runs over {text}: read as canonical, it is one "
            "item; the case-v2 engine (dc55c492) runs it character by character, so a case-v2 "
            "playbook read as canonical runs it once",
            hint="written for case-v2: --dialect case-v2; else make the collection a list",
        )
    if loop.mode == "parallel":
        ctx.report(
            "D908",
            pos_of(ctx, collection, loop),
            f"parallel loop of step {step.name!r}: NoETL's aggregate can miss iterations that "
            "finish together and start the next step twice; noetlc counts every iteration once, "
            "in collection order",
        )


def _empty_collection(ctx: CheckContext, collection: Any) -> str | None:
    """'an empty list' / 'null' where the loop's `in` is (or names a workload key that is) one."""
    if collection is None:
        return None  # a missing `in` (S108), or a cursor loop; `in: null` is read in _loop
    if isinstance(collection, list) and not collection:
        return "an empty list"
    if isinstance(collection, str):
        match = _WORKLOAD_NAME.fullmatch(collection.strip())
        workload = ctx.playbook.workload
        if match and isinstance(workload, dict) and match.group(1) in workload:
            value = workload[match.group(1)]
            if value is None:
                return f"workload `{match.group(1)}`, which is null"
            if isinstance(value, list) and not value:
                return f"workload `{match.group(1)}`, which is an empty list"
    return None


def _string_collection(ctx: CheckContext, collection: Any) -> str | None:
    """'a string' where the loop's `in` is (or names a workload key that is) plain text."""
    # Text that reads as a JSON list or mapping is parsed by both engines: not this row.
    if not isinstance(collection, str):
        return None
    if "{{" not in collection and "{%" not in collection:
        return "a string" if not collection.lstrip().startswith(("[", "{")) else None
    match = _WORKLOAD_NAME.fullmatch(collection.strip())
    workload = ctx.playbook.workload
    value = workload.get(match.group(1)) if match and isinstance(workload, dict) else None
    if isinstance(value, str) and not value.lstrip().startswith(("[", "{")):
        return f"workload `{match.group(1)}`, which is a string"
    return None


def _canonical_step(ctx: CheckContext, step: Step, raw: YMap | None) -> None:
    arcs = step.router.arcs
    has_rules = any(task.rules for task in step.tasks)
    if (step.pipeline is not None or has_rules) and not arcs:
        what = "pipeline" if step.pipeline is not None else "tool with `spec.policy.rules`"
        ctx.report(
            "D904",
            step_pos(ctx, step),
            f"step {step.name!r} is a {what} with no `next`: NoETL's execution stays RUNNING "
            "after it; noetlc ends the run there",
        )
    for arc in arcs:
        if arc.event == "call.error" or (arc.when and mentions(arc.when, "error")):
            ctx.report(
                "D906",
                arc_pos(ctx, arc),
                f"arc to {arc.target!r} after a failed call of step {step.name!r}: NoETL marks "
                "the execution failed at the error and its recovery steps race that mark (a "
                "step after the recovery step never runs there); noetlc runs the chain to its "
                "end and ends the run failed",
            )
            break
    if (
        ctx.playbook.generation is None
        and step.router.mode == "exclusive"
        and raw is not None
        and isinstance(raw.get("next"), YList)
        and len(arcs) >= 2
        and all(arc.when is None for arc in arcs)
    ):
        targets = ", ".join(arc.target for arc in arcs)
        ctx.report(
            "D917",
            ctx.pos(raw, "next"),
            f"`next` of step {step.name!r} lists {len(arcs)} steps ({targets}) without "
            f"conditions: read as canonical, only {arcs[0].target!r} runs; the case-v2 engine "
            "(dc55c492) starts every one, so a case-v2 playbook read as canonical drops branches",
            hint="written for case-v2: --dialect case-v2 (or a `case` rule); a canonical fan-out: "
            "next: {spec: {mode: inclusive}, arcs: [...]}",
        )
    _init_page_break(ctx, step)
    for task in step.tasks:
        for rule in task.rules:
            block = rule.set
            if isinstance(block, dict) and any(str(k).startswith("ctx.") for k in block):
                ctx.report(
                    "D925",
                    ctx.pos(block),
                    f"a policy rule of step {step.name!r} sets ctx: NoETL renders the value to "
                    "text and later steps read it as ''; noetlc keeps its type and later steps "
                    "read it",
                )


# 138c10ed task_sequence_executor.py 329-370: the names its no-progress guard looks for after a
# `break` at a pipeline's first task `init_page`.
_NO_PROGRESS_PAGINATE = "paginate"
_NO_PROGRESS_PAGES = frozenset({"fetch_page", "save_page"})


def _init_page_break(ctx: CheckContext, step: Step) -> None:
    """D937: 138c10ed fails a pipeline that breaks at `init_page` before `paginate` and
    `fetch_page`/`save_page` when a positive `patient_count` is anywhere in its context."""
    tasks = step.tasks
    if len(tasks) < 2 or (tasks[0].name or "").strip().lower() != "init_page":
        return
    later = {(t.name or "").strip().lower() for t in tasks[1:]}
    if _NO_PROGRESS_PAGINATE not in later or not later & _NO_PROGRESS_PAGES:
        return
    for rule in tasks[0].rules:
        if rule.action == "break":
            ctx.report(
                "D937",
                ctx.pos(tasks[0].config, "spec"),
                f"`break` at task 'init_page' of step {step.name!r}, before 'paginate' and a page "
                "task: 138c10ed fails the step there (TASK_SEQUENCE_NO_PROGRESS) when a "
                "`patient_count` above 0 is in its context; noetlc ends the pipeline as any "
                "break",
                hint="rename the tasks if the playbook must also run on 138c10ed",
            )
            return


def _case_v2_step(ctx: CheckContext, step: Step) -> None:
    for rule in step.case:
        then = rule.then if isinstance(rule.then, YMap) else None
        if then is None:
            continue
        if "retry" in then and isinstance(rule.when, str) and "call.error" in rule.when:
            ctx.report(
                "D905",
                ctx.key_pos(then, "retry"),
                f"retry on `call.error` in a case rule of step {step.name!r}: the case-v2 engine "
                "re-issues the call without bound; noetlc stops after `max_attempts`",
            )
        sink = then.get("sink")
        if isinstance(sink, YMap):
            ctx.report(
                "D952",
                ctx.key_pos(then, "sink"),
                f"`sink` in a case rule of step {step.name!r}: the case-v2 engine (dc55c492) "
                "keeps the call's result as the step's (the sink's summary is only in its "
                "`sink.done` event); noetlc adds the summary to the step's result as `_sink`",
                hint="read the call's fields, not `_sink`, downstream if the playbook must also "
                "run on dc55c492",
            )
        swallowed_sink(ctx, step, then)
        if isinstance(sink, YMap) and isinstance(sink.get("tool"), YMap) and "args" in sink:
            ctx.report(
                "D921",
                ctx.key_pos(then, "sink"),
                f"`sink` with `tool` and `args` in a case rule of step {step.name!r}: the "
                "case-v2 engine refuses this form at run time and writes nothing; noetlc writes "
                "the row",
            )
        if "collect" in then:
            ctx.report(
                "D951",
                ctx.key_pos(then, "collect"),
                f"`collect` in a case rule of step {step.name!r}: the case-v2 engine (dc55c492) "
                "finds no result in the call's event and collects nothing, the step's result "
                "staying the call's; noetlc adds the collected values to the step's result "
                "(under `into`)",
                hint="read the pages from the step's result downstream if the playbook must also "
                "run on dc55c492 (it keeps no collected list)",
            )
        if isinstance(rule.when, str) and reads(rule.when, "response"):
            ctx.report(
                "D922",
                ctx.pos(rule, None) if not isinstance(rule.when, YStr) else ctx.pos(rule.when),
                f"`response` in a case rule of step {step.name!r}: the case-v2 engine binds it "
                "to its worker's envelope {id, status, data} (`response.status_code` is "
                "undefined there after a successful call); noetlc binds the step's result",
            )
    _case_rules_on_call_outcome(ctx, step)


def _case_rules_on_call_outcome(ctx: CheckContext, step: Step) -> None:
    """D943, once per step (at the first such `when`): dc55c492 evaluates a step's case rules on
    more than one of its events, so a rule on the call's outcome can route twice or both ways."""
    for rule in step.case:
        if not (isinstance(rule.then, YMap) and "next" in rule.then):
            continue
        when = rule.when
        names = [n for n in _OUTCOME_NAMES if isinstance(when, str) and reads(when, n)]
        if names:
            ctx.report(
                "D943",
                ctx.pos(when) if isinstance(when, YStr) else ctx.pos(rule, None),
                f"a case rule of step {step.name!r} routes on `{names[0]}`: the case-v2 engine "
                "(dc55c492) evaluates the step's rules on each of its events, so a branch can "
                "run twice, or both branches after a failed call, and a run whose call failed "
                "completes; noetlc takes the first rule that holds, once, and a failed call no "
                "rule handles fails the run",
                hint="make each branch's steps safe to run twice if the playbook must also run on "
                "dc55c492 (it may run a branch twice, or both)",
            )
            return


def _case_next_on_canonical(ctx: CheckContext) -> None:
    """D941, once per playbook (at its first `then.next`): every case-v2 file whose only mark is
    `case` could be either generation's, so one finding says it without repeating per rule."""
    if not _case_v2_by_case_alone(ctx):
        return
    found = [
        (step, rule.then)
        for step in ctx.playbook.steps
        for rule in step.case
        if isinstance(rule.then, YMap) and "next" in rule.then
    ]
    if not found:
        return
    step, then = found[0]
    more = f" (and {len(found) - 1} more such rules)" if len(found) > 1 else ""
    ctx.report(
        "D941",
        ctx.key_pos(then, "next"),
        f"`then.next` in a case rule of step {step.name!r}{more}: `case` is this playbook's "
        "only case-v2 mark; on the canonical engine (138c10ed) such a rule routes nowhere (no "
        "branch runs); noetlc takes the branch, as the case-v2 engine does",
        hint="for the canonical engine route with arcs: next: {arcs: [{step: ..., when: ...}]}",
    )


def _case_v2_by_case_alone(ctx: CheckContext) -> bool:
    """True where the file reads as canonical once its steps' `case` keys are set aside: `case`
    is its only mark of the case-v2 generation, so it may be a canonical playbook with the
    worker-side case rules 138c10ed evaluates (table (b) place `worker`)."""
    root = ctx.document.data
    steps = root.get("workflow") if isinstance(root, dict) else None
    if not isinstance(steps, list):
        return False
    without = dict(root)
    without["workflow"] = [
        {k: v for k, v in s.items() if k != "case"} if isinstance(s, dict) else s for s in steps
    ]
    return detect_dialect(without) == "canonical"


def _task(ctx: CheckContext, step: Step, kind: Any, config: Any, dialect: str) -> None:
    if not isinstance(config, dict):
        return
    if dialect == "canonical":
        _canonical_tool_keys(ctx, step, kind, config)
    if kind == "postgres":
        if dialect == "case-v2":
            auth_service(ctx, step, config)
        pool = config.get("pool")
        if dialect == "case-v2" and isinstance(pool, dict) and pool.get("timeout") is None:
            ctx.report(
                "D940",
                ctx.pos(config, "pool"),
                f"`pool` without `timeout` in postgres step {step.name!r}: the case-v2 engine "
                "opens its connection pool with no acquire timeout and every call fails "
                "(`unsupported operand type(s) for +: 'float' and 'NoneType'`); noetlc runs the "
                "call on its own connection",
                hint="give the pool a timeout if the playbook must also run on dc55c492:\n"
                "  pool: {timeout: 10}",
            )
        for key in ("command", "query", "sql"):
            text = config.get(key)
            if isinstance(text, str) and _statement_count(text) > 1:
                ctx.report(
                    "D918",
                    ctx.pos(config, key),
                    f"{_statement_count(text)} statements in one postgres call of step "
                    f"{step.name!r}: NoETL runs each in autocommit (a later failure keeps the "
                    "earlier writes); noetlc runs them in one transaction that rolls back "
                    "together",
                )
                break
    elif kind == "duckdb":
        ctx.report(
            "D919",
            ctx.pos(config, "kind") if "kind" in config else step_pos(ctx, step),
            f"the result of duckdb step {step.name!r}: NoETL's has no named "
            "columns ({executed_commands, command_N_rows, command_N_sample, ...}); noetlc's is "
            "the postgres tool's shape (`rows` with named columns, `row_count`)",
        )
    elif kind == "transfer":
        source = config.get("source")
        if isinstance(source, dict) and "postgres" in (source.get("tool"), source.get("kind")):
            ctx.report(
                "D920",
                ctx.pos(config, "source"),
                f"postgres transfer source of step {step.name!r}: a failure's error text quotes "
                "noetlc's server-side cursor (`DECLARE ... CURSOR FOR SELECT ...`), NoETL's the "
                "plain SELECT",
            )
        _transfer_without_columns(ctx, step, config)
    elif kind == "http" and dialect == "case-v2":
        args = step.raw.get("args") if isinstance(step.raw, YMap) else None
        if isinstance(args, YMap) and isinstance(args.get("headers"), dict):
            ctx.report(
                "D939",
                ctx.key_pos(args, "headers"),
                f"`headers` in the `args` of http step {step.name!r}: the case-v2 engine's "
                "http tool merges them into a variable it has not set yet and fails the call "
                "(`cannot access local variable 'headers'`); noetlc sends them over the tool's",
                hint="put the headers on the tool if the playbook must also run on dc55c492:\n"
                "  tool: {kind: http, headers: {...}}",
            )
    elif kind == "python" and dialect == "case-v2":
        code = config.get("code")
        found = non_mapping_result(code) if isinstance(code, str) else None
        if found is not None:
            ctx.report(
                "D942",
                ctx.position_in_string(code, found),
                f"python step {step.name!r} returns a list or a scalar: the case-v2 engine's "
                "worker cannot report such a result (its event is refused, HTTP 422) and the "
                "run fails there; noetlc keeps the value",
                hint="return a mapping (`{'items': [...]}`) if the playbook must also run on "
                "dc55c492",
            )
    elif kind == "python" and dialect == "canonical":
        code = config.get("code")
        if isinstance(code, str):
            found = _RESULT_NONE.search(code)
            if found:
                ctx.report(
                    "D924",
                    ctx.position_in_string(code, found.start()),
                    f"step {step.name!r} sets `result = None`: NoETL stores it as "
                    "{_value: None}; noetlc keeps None",
                )


def _canonical_tool_keys(ctx: CheckContext, step: Step, kind: Any, config: dict) -> None:
    """D935, D936, D954: tool keys 138c10ed's worker reads otherwise than noetlc (table (a)
    cases dsl_keys/output_*, tool_output_*, python_args_*, nested_*)."""
    if isinstance(config.get("output"), dict):
        ctx.report(
            "D935",
            ctx.key_pos(config, "output"),
            f"`output` of the tool of step {step.name!r}: 138c10ed's result store takes it "
            "(without a `store` the step's stored result is only {command_id}; `select` is "
            "refused); noetlc ignores it and the result is the tool's value",
        )
    if kind == "playbook":
        waits = "return_step" in config
        ctx.report(
            "D954",
            ctx.key_pos(config, "return_step" if waits else "kind"),
            f"the playbook call of step {step.name!r}: 138c10ed returns "
            + (
                "the child's status document (or a start record after `timeout`), not the "
                "result of its `return_step`"
                if waits
                else "a start record without waiting for the child"
            )
            + "; noetlc waits and returns the child's step result",
        )
    if kind == "python" and "args" in config:
        ctx.report(
            "D936",
            ctx.key_pos(config, "args"),
            f"`args` of python step {step.name!r}: 138c10ed's worker replaces it with the "
            "tool's `input`, so its names are undefined there; noetlc binds them",
            hint="input: {...}",
        )


def _statement_count(sql: str) -> int:
    """Statements in a SQL text, split at `;` outside quotes (enough for a count)."""
    count, quote, current = 0, "", False
    for char in sql:
        if quote:
            if char == quote:
                quote = ""
            continue
        if char in ("'", '"'):
            quote, current = char, True
        elif char == ";":
            count += current
            current = False
        elif not char.isspace():
            current = True
    return count + current


# A transfer end's type, in the order NoETL's transfer executor reads it (executor.py:440).
_END_TYPE = ("tool", "kind", "type")
# The end types NoETL's transfer executor supports (138c10ed/dc55c492 executor.py SUPPORTED_TYPES).
_NOETL_TRANSFER_TYPES = frozenset({"postgres", "snowflake", "http"})


def _end_type(end: Any) -> Any:
    return next((end.get(key) for key in _END_TYPE if end.get(key)), None)


def _transfer_without_columns(ctx: CheckContext, step: Step, config: dict) -> None:
    """D938: a transfer that fails on NoETL before it copies a row, where noetlc's outcome or
    error text differs: a missing end, an end naming no type (NoETL `source.tool is
    required`), a target without `table`/`query` or `auth`, or an http source into a table
    without `target.mapping` (NoETL inserts no columns)."""
    source, target = config.get("source"), config.get("target")
    for side, end in (("source", source), ("target", target)):
        if not isinstance(end, dict) or not end:
            ctx.report(
                "D938",
                ctx.pos(config, side) if side in config else ctx.pos(config),
                f"transfer of step {step.name!r} has no `{side}`: the call fails on both "
                f"engines, NoETL's error saying `'{side}' configuration is required`, noetlc's "
                "asking for both mappings",
                hint=f"add the {side}:\n  {side}: {{tool: postgres, auth: ..., table: ...}}",
            )
            return
        if _end_type(end) is None:
            ctx.report(
                "D938",
                ctx.pos(config, side),
                f"transfer {side} of step {step.name!r} names no `tool`, `kind` or `type`: the "
                f"call fails on both engines, NoETL's error saying `{side}.tool is required`, "
                "noetlc's naming the three keys it reads",
                hint=f"name the {side}'s type:\n  {side}: {{tool: postgres, ...}}",
            )
            return
    for missing, needs in (
        (not (target.get("table") or target.get("query")), "Either target.table or target.query"),
        (not target.get("auth"), "target.auth"),
    ):
        # Only the target types NoETL's transfer supports reach these checks (executor.py:266,
        # 481-484); another type (a duckdb target) fails there on its type first.
        if missing and str(_end_type(target)).lower() in _NOETL_TRANSFER_TYPES:
            ctx.report(
                "D938",
                ctx.pos(config, "target"),
                f"transfer target of step {step.name!r} lacks what NoETL requires: the call fails "
                f"on both engines, NoETL's error saying `{needs} is required`, noetlc's naming "
                "the key it needs",
                hint="complete the target:\n  target: {tool: postgres, auth: ..., table: ...}",
            )
            return
    if (
        isinstance(source, dict)
        and isinstance(target, dict)
        and str(_end_type(source)).lower() == "http"
        and not target.get("mapping")
    ):
        ctx.report(
            "D938",
            ctx.pos(config, "target"),
            f"http transfer of step {step.name!r} without `target.mapping`: NoETL inserts no "
            "columns (`INSERT INTO t () VALUES ()`) and fails; noetlc inserts each record's "
            "fields into the columns of the same name",
            hint="name the columns:\n  target: {mapping: {column: field}}",
        )
