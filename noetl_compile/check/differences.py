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

from ..analyze.expressions import scan_template
from ..ast import Arc, Step
from ..read import detect_dialect
from ..spans import YList, YMap, YStr
from .context import CheckContext

# `result = None` on a line of its own (the whole statement): linear, anchored per line.
_RESULT_NONE = re.compile(r"^[ \t]*result[ \t]*=[ \t]*None[ \t]*(?:#[^\n]*)?$", re.MULTILINE)
_DEF_MAIN = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+main[ \t]*\(", re.MULTILINE)
_WHOLE_TEMPLATE = re.compile(r"[ \t]*\{\{[^{}]*\}\}[ \t]*")
# A python result that is a list or a scalar literal: `result = [..`, `return 7` (per line,
# anchored; one alternation after fixed prefixes: linear).
_NON_DICT_RESULT = re.compile(
    r"^[ \t]*(?:result[ \t]*=|return\b)[ \t]*(?:\[|\(|-?[0-9]|'|\"|True\b|False\b)",
    re.MULTILINE,
)
# The names a case-v2 rule reads the call's outcome by (table (b), place case-v2 context).
_OUTCOME_NAMES = ("error", "response", "result")
_WORKLOAD_NAME = re.compile(r"\{\{[ \t]*workload\.([A-Za-z_][A-Za-z0-9_]*)[ \t]*\}\}")


def check(ctx: CheckContext) -> None:
    playbook = ctx.playbook
    if playbook.generation == "noetl5":
        return  # the rows are about the three recorded engines (58c2a16b, dc55c492, 138c10ed)
    dialect = playbook.dialect
    loop_steps = {s.name for s in playbook.steps if s.loop is not None}
    pipeline_steps = {
        s.name for s in playbook.steps if s.pipeline is not None or any(t.rules for t in s.tasks)
    }
    for step in playbook.steps:
        if dialect == "v1":
            _v1_step(ctx, step)
        else:
            _engine_step(ctx, step, dialect)
    if dialect == "case-v2":
        _case_next_on_canonical(ctx)
    _references(ctx, dialect, loop_steps, pipeline_steps)


# ----------------------------------------------------------------------------- canonical, case-v2


def _engine_step(ctx: CheckContext, step: Step, dialect: str) -> None:
    raw = step.raw if isinstance(step.raw, YMap) else None
    arcs = step.router.arcs
    if not step.tasks and step.loop is None and (arcs or step.case) and dialect == "canonical":
        ctx.report(
            "D901",
            _step_pos(ctx, step),
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
        where = ctx.pos(written, "in") if explicit_null else _pos_of(ctx, collection, loop)
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
            _pos_of(ctx, collection, loop),
            f"the loop of step {step.name!r} runs over {text}: read as canonical, it is one "
            "item; the case-v2 engine (dc55c492) runs it character by character, so a case-v2 "
            "playbook read as canonical runs it once",
            hint="written for case-v2: --dialect case-v2; else make the collection a list",
        )
    if loop.mode == "parallel":
        ctx.report(
            "D908",
            _pos_of(ctx, collection, loop),
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
            _step_pos(ctx, step),
            f"step {step.name!r} is a {what} with no `next`: NoETL's execution stays RUNNING "
            "after it; noetlc ends the run there",
        )
    for arc in arcs:
        if arc.event == "call.error" or (arc.when and _mentions(arc.when, "error")):
            ctx.report(
                "D906",
                _arc_pos(ctx, arc),
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
        if isinstance(sink, YMap) and isinstance(sink.get("tool"), YMap) and "args" in sink:
            ctx.report(
                "D921",
                ctx.key_pos(then, "sink"),
                f"`sink` with `tool` and `args` in a case rule of step {step.name!r}: the "
                "case-v2 engine refuses this form at run time and writes nothing; noetlc writes "
                "the row",
            )
        if isinstance(rule.when, str) and _reads(rule.when, "response"):
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
        names = [n for n in _OUTCOME_NAMES if isinstance(when, str) and _reads(when, n)]
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
    if kind == "postgres":
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
            ctx.pos(config, "kind") if "kind" in config else _step_pos(ctx, step),
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
    elif kind == "python" and dialect == "case-v2":
        code = config.get("code")
        found = _NON_DICT_RESULT.search(code) if isinstance(code, str) else None
        if found:
            ctx.report(
                "D942",
                ctx.position_in_string(code, found.start()),
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


# ----------------------------------------------------------------------------- v1


# v1 step keys that never reach 58c2a16b's tool (D934): per step type, the key and why.
_V1_KEYS_DROPPED: dict[Any, tuple[tuple[str, str], ...]] = {
    "http": (
        ("params", "sends no `params` (an empty `data` map is taken as the query first)"),
        ("timeout", "never hands a step's `timeout` to its http plugin (30 s applies)"),
    ),
    "python": (
        ("code_b64", "never hands `code_b64` to its python plugin ('No code provided')"),
        ("code_base64", "never hands `code_base64` to its python plugin ('No code provided')"),
    ),
}


def _v1_step(ctx: CheckContext, step: Step) -> None:
    raw = step.raw if isinstance(step.raw, YMap) else None
    if raw is None:
        return
    if step.loop is not None:
        ctx.report(
            "D909",
            ctx.pos(raw, "type") if "type" in raw else _step_pos(ctx, step),
            f"v1 iterator {step.name!r}: 58c2a16b runs every item in one job and `{{{{ "
            f"{step.name} }}}}` is the plain list; noetlc runs one call per item and the list is "
            f"`{{{{ {step.name}.result }}}}`",
        )
    _v1_whole_template(ctx, raw, ("with", "args", "data", "input"))
    if isinstance(raw.get("data"), dict):
        ctx.report(
            "D911",
            ctx.key_pos(raw, "data"),
            f"a step's `data` (step {step.name!r}): 58c2a16b reads a step's arguments from "
            "`with`/`args` only; noetlc reads `data` as the arguments",
            hint="with: {...}",
        )
    code = raw.get("code")
    if raw.get("type") == "python" and isinstance(code, str) and not _DEF_MAIN.search(code):
        ctx.report(
            "D913",
            ctx.pos(raw, "code"),
            f"python code of step {step.name!r} defines no `main`: 58c2a16b fails it; noetlc "
            "runs it and takes `result`",
        )
    kind = raw.get("type")
    # A mistyped `type` (a list, a map) is the structure checks' finding, not a lookup key here.
    dropped = _V1_KEYS_DROPPED.get(kind, ()) if isinstance(kind, str) else ()
    for key, why in dropped:
        if key in raw and not (key.startswith("code_") and "code" in raw):
            ctx.report(
                "D934",
                ctx.key_pos(raw, key),
                f"`{key}` of v1 {raw.get('type')} step {step.name!r}: 58c2a16b {why}; noetlc "
                f"applies `{key}`",
            )
    entries = raw.get("next")
    if not isinstance(entries, YList):
        return
    conditional = False
    for entry in entries:
        if not isinstance(entry, YMap):
            continue
        if "step" in entry:
            _v1_whole_template(ctx, entry, ("data", "input", "with", "args"))
        if "with" in entry and "step" in entry:
            ctx.report(
                "D911",
                ctx.key_pos(entry, "with"),
                f"an arc's `with` (to {entry.get('step')!r}): 58c2a16b reads an arc's arguments "
                "from `data`/`input` only; noetlc reads `with` as the arguments",
                hint="data: {...}",
            )
        if "then" in entry or "else" in entry:
            key = "then" if "then" in entry else "else"
            ctx.report(
                "D915",
                ctx.key_pos(entry, key),
                f"`{key}` block in `next` of step {step.name!r}: 58c2a16b reads only `step` of a "
                "`next` entry (neither block runs, the execution stays RUNNING); noetlc follows "
                "the blocks",
            )
            conditional = True
            continue
        when = entry.get("when")
        if when is not None:
            conditional = True
            if isinstance(when, str) and _mentions(when, "error"):
                ctx.report(
                    "D912",
                    ctx.pos(entry, "when"),
                    f"this arc of step {step.name!r} routes a failure: 58c2a16b fails the "
                    "execution at the failed action and takes no arc; noetlc takes it",
                )
    if conditional and not any("then" in e or "else" in e for e in entries if isinstance(e, YMap)):
        ctx.report(
            "D914",
            ctx.key_pos(raw, "next"),
            f"conditional `next` of step {step.name!r}: 58c2a16b keeps the execution RUNNING "
            "when a branch is not taken; noetlc ends the run when the branch taken ends",
        )


def _v1_whole_template(ctx: CheckContext, holder: YMap, keys: tuple[str, ...]) -> None:
    """D910 at the first argument (of a step or an arc) that is one whole template."""
    for key in keys:
        block = holder.get(key)
        whole = _first_whole_template(block) if isinstance(block, dict) else None
        if whole is not None:
            ctx.report(
                "D910",
                ctx.pos(whole),
                f"`{whole.strip()}` is one whole template: 58c2a16b renders it to text; "
                "noetlc keeps the value's type",
            )
            return


def _first_whole_template(block: dict) -> YStr | None:
    for value in block.values():
        if isinstance(value, YStr) and _WHOLE_TEMPLATE.fullmatch(value):
            return value
    return None


# ----------------------------------------------------------------------------- template reads


def _references(
    ctx: CheckContext, dialect: str, loop_steps: set[str], pipeline_steps: set[str]
) -> None:
    """D907, D916, D923, D926, D944: what a template reads, once per construct and step."""
    if dialect == "v1":
        return
    steps = ctx.step_names
    said: set[tuple[str, str | None]] = set()
    for site in ctx.sites:
        for ref in scan_template(site.value).references:
            code = _reference_code(ref.root, ref.path, dialect, steps, loop_steps, pipeline_steps)
            if code is None or (code, site.step) in said:
                continue
            said.add((code, site.step))
            ctx.report(code, ctx.position_in_string(site.value, ref.offset), _MESSAGES[code](ref))


def _reference_code(
    root: str,
    path: tuple,
    dialect: str,
    steps: frozenset[str],
    loop_steps: set[str],
    pipeline_steps: set[str],
) -> str | None:
    if dialect == "case-v2":
        return "D926" if root == "ctx" else None
    if root == "ctx" and (not path or path[0] in steps):
        return "D923"
    if root == "output" and path[:1] in (("ref",), ("context",)):
        return "D944"
    if root in loop_steps and path[:1] == ("results",):
        return "D907"
    if root in steps and (not path or root in pipeline_steps):
        return "D916"
    return None


_MESSAGES = {
    "D907": lambda ref: (
        f"`{ref.root}.results` of a loop: NoETL hands templates one result-store record per "
        "iteration (an item's fields fail there); noetlc hands the iteration results"
    ),
    "D916": lambda ref: (
        f"`{ref.root}` rendered whole: NoETL renders the step's result-store envelope (ref, "
        "_ref, context, ...), '' for a failed step; noetlc renders the result"
        if not ref.path
        else f"a field of pipeline step `{ref.root}`: NoETL hands templates its result-store "
        "envelope, whose `context` flattens the record (the field renders ''); noetlc reads the "
        "field, the last task's fields laid under the record"
    ),
    "D923": lambda ref: (
        "a step's result read through `ctx`: NoETL's `ctx.<step>` is the result-store envelope "
        "(the result's keys plus ref, _ref, data, status, ...); noetlc's is the result itself"
    ),
    "D944": lambda ref: (
        f"`output.{ref.path[0]}`: 138c10ed fills it from the worker's result-store record (a "
        "mapping after every call, failed or not); noetlc keeps no result store, so it is none"
    ),
    "D926": lambda ref: (
        "`ctx` in a case-v2 template: dc55c492 has no `ctx` in its render context (the template "
        "stays text there); noetlc keeps `ctx`"
    ),
}


# ----------------------------------------------------------------------------- helpers


def _mentions(when: Any, word: str) -> bool:
    return isinstance(when, str) and word in when


def _reads(text: str, name: str) -> bool:
    return any(ref.root == name for ref in scan_template(text).references)


def _step_pos(ctx: CheckContext, step: Step):
    raw = step.raw
    if isinstance(raw, YMap) and "step" in raw:
        return ctx.pos(raw, "step")
    return ctx.pos(step, None)


def _arc_pos(ctx: CheckContext, arc: Arc):
    if isinstance(arc.when, YStr):
        return ctx.pos(arc.when)
    return ctx.pos(arc, None)


def _pos_of(ctx: CheckContext, value: Any, fallback: Any):
    if isinstance(value, (YStr, YMap, YList)):
        return ctx.pos(value)
    return ctx.pos(fallback, None)
