"""Rule family T: templates — syntax (Jinja is the authority), names that resolve to nothing
(misspelt declared names are errors, other unknown names warnings), unknown filters, stale
result fields, and step results read where the step may not have run."""

from __future__ import annotations

from jinja2.defaults import DEFAULT_FILTERS, DEFAULT_TESTS

from ..analyze.expressions import loader_statements, scan_template
from ..analyze.names import (
    ITER_FIELDS,
    LOOP_FIELDS,
    NOETL5_FILTERS,
    NOETL_FILTERS,
    RUNTIME_NAMES,
    name_table,
)
from ..engine_profiles import PROFILES
from ..read.base import did_you_mean
from .context import CheckContext

KNOWN_FILTERS = frozenset(DEFAULT_FILTERS) | NOETL_FILTERS
KNOWN_FILTERS_5 = KNOWN_FILTERS | NOETL5_FILTERS
KNOWN_TESTS = frozenset(DEFAULT_TESTS)
# Functions people expect of a template language; no NoETL engine's renderer defines them (NoETL 5's
# minijinja environments register filters only), so each fails the render there too.
JINJA_LESS_FUNCTIONS = frozenset({"now", "utcnow", "today"})
NO_FUNCTIONS = (
    "NoETL's renderers define no such function (NoETL 5's register filters only): pass the value "
    "in `workload` or compute it in a python step"
)
# Filter names people bring from other languages (Python methods, Ansible, Liquid), too far from
# Jinja's by edit distance for "did you mean" to find: the filter each one means.
FILTER_ALIASES = {
    "uppercase": "upper",
    "upcase": "upper",
    "toupper": "upper",
    "lowercase": "lower",
    "downcase": "lower",
    "tolower": "lower",
    "to_json": "tojson",
    "json": "tojson",
    "to_nice_json": "tojson",
    "from_json": "fromjson",
    "parse_json": "fromjson",
    "len": "length",
    "size": "length",
    "strip": "trim",
    "str": "string",
    "integer": "int",
    "to_int": "int",
    "to_float": "float",
    "to_string": "string",
    "b64_encode": "b64encode",
    "b64_decode": "b64decode",
    "base64": "b64encode",
    "regex_replace": "replace",
    "capitalise": "capitalize",
    "titlecase": "title",
    "uniq": "unique",
    "distinct": "unique",
}


def filter_hint(name: str, known: frozenset[str] = KNOWN_FILTERS) -> str:
    """ "did you mean" for an unknown filter: the filter a known foreign name means (`strip` is
    `trim`, not the nearer `string`), else the closest by spelling."""
    if name in FILTER_ALIASES:
        return f"; did you mean {FILTER_ALIASES[name]!r}?"
    return did_you_mean(name, known)


# Fields postgres results stopped carrying when the tool began returning only the last statement.
# A case-v2 postgres step still returns one entry per statement (its engine, dc55c492), so there
# they are the result's fields, not stale ones (STALE_DIALECTS).
STALE_FIELDS = {"command_0", "command_1", "command_2", "command_3"}
STALE_DIALECTS = frozenset({"canonical", "v1", "noetl5"})
# What a canonical pipeline's `output` holds (the engine's task output envelope); `response` is
# the case-v2 name of the tool result, which canonical templates read as `output.data`.
CANONICAL_OUTPUT_FIELDS = frozenset(
    {"status", "data", "ref", "error", "context", "http", "pg", "py", "meta"}
)


def check(ctx: CheckContext) -> None:
    names = name_table(ctx.playbook)
    # Which filters the generation's engine knows is a profile field (engine differences are data).
    profile = PROFILES.get(ctx.playbook.generation)
    minijinja = profile is not None and profile.minijinja_filters
    known_filters = KNOWN_FILTERS_5 if minijinja else KNOWN_FILTERS
    for site in ctx.sites:
        scan = scan_template(site.value)
        if scan.error is not None:
            ctx.report(
                "T301",
                ctx.position_in_string(site.value, scan.error.offset),
                f"template syntax error in {site.field}: {scan.error.message}",
            )
            continue
        for name, offset in scan.filters:
            if name not in known_filters:
                ctx.report(
                    "T304",
                    ctx.position_in_string(site.value, offset),
                    f"unknown filter {name!r}" + filter_hint(name, known_filters),
                )
        for name, offset in scan.tests:
            if name not in KNOWN_TESTS:
                ctx.report(
                    "T304",
                    ctx.position_in_string(site.value, offset),
                    f"unknown test {name!r}" + did_you_mean(name, KNOWN_TESTS),
                )
        _check_renderable(ctx, site, scan)
        # A step named bare (`a.x if a else b.x`) is tested for having run: the template chooses
        # between alternatives itself, so its step reads are guarded.
        probing = any(
            not ref.path and names.classify(ref.root) == "step" for ref in scan.references
        )
        for ref in scan.references:
            kind = names.classify(ref.root)
            position = None
            if kind is None:
                if ref.guarded:
                    continue
                position = ctx.position_in_string(site.value, ref.offset)
                # One typo away from a step, workload key or iterator: a misspelling that lenient
                # rendering would ship as text (an error); anything else may be a name of the
                # runtime we do not model (a warning). See `noetlc explain T307`.
                typo = did_you_mean(ref.root, names.declared_names)
                ctx.report(
                    "T307" if typo else "T302",
                    position,
                    f"unknown name {ref.root!r} in {site.field}"
                    + (typo or did_you_mean(ref.root, names.all_names)),
                    hint=NO_FUNCTIONS if ref.root in JINJA_LESS_FUNCTIONS else None,
                )
            elif kind == "step":
                _check_step_reference(ctx, site, ref, names, probed=probing)
            elif (
                ref.root in ("response", "result")
                and ref.path
                and ref.path[0] in STALE_FIELDS
                and ctx.playbook.dialect in STALE_DIALECTS
            ):
                _report_stale_field(ctx, site, ref)  # the current step's result
            elif ref.root == "output" and ctx.playbook.dialect == "canonical":
                _check_output_field(ctx, site, ref)
            elif ref.root in NAMESPACE_ROOTS and ref.path and not ref.guarded:
                _check_namespace_path(ctx, site, ref, names)
            elif ref.root in ("iter", "loop") and ref.path and not ref.guarded:
                _check_loop_scoped(ctx, site, ref, names)
            if ref.root in names.iterator_fields and ref.path and not ref.guarded:
                _check_item_field(ctx, site, ref, ref.root, ref.path[0], names)


# `workload.x`, `ctx.x` and `vars.x` name a variable the way a bare `x` does (the engine's variables
# store is exposed as `workload`, as `ctx` and flat; case-v2 `vars` hold what steps wrote), so the
# name after the dot gets the bare name's check: one typo away from a declared name is T307.
# Otherwise `workload.x`/`vars.x` is T302 (the request payload may bring a key check cannot see);
# `ctx.x` written by no step is F403 (flow.py).
NAMESPACE_ROOTS = ("workload", "ctx", "vars")


def _check_namespace_path(ctx: CheckContext, site, ref, names) -> None:
    name = ref.path[0]
    if not isinstance(name, str) or name in names.all_names:
        return  # a declared or written name, or one the runtime keeps in the store (execution_id)
    typo = names.namespace_typo(name)
    if not typo and ref.root == "ctx":
        return  # F403: no step writes it
    field_at = site.value.find(name, ref.offset + len(ref.root))
    position = ctx.position_in_string(site.value, field_at if field_at >= 0 else ref.offset)
    ctx.report(
        "T307" if typo else "T302",
        position,
        f"unknown name `{ref.root}.{name}` in {site.field}"
        + (typo or did_you_mean(name, names.all_names - RUNTIME_NAMES)),
    )


def _field_position(ctx: CheckContext, site, ref, name: str, after: int):
    """Where ``name`` (a field of ``ref``'s path) starts in the template."""
    field_at = site.value.find(name, after)
    return ctx.position_in_string(site.value, field_at if field_at >= 0 else ref.offset)


def _check_loop_scoped(ctx: CheckContext, site, ref, names) -> None:
    """`iter.x` names an iterator, an `iter.`-scoped variable a step sets, or what an iteration
    adds (`_index`, `_first`, `_last`); `loop.x` one of the loop's own fields. A miss one typo
    away from one of them is T307, any other T302 (a runtime may hold more: NoETL 5's scopes)."""
    name = ref.path[0]
    if not isinstance(name, str):
        return
    if ref.root == "iter":
        if name in names.all_names or name in ITER_FIELDS:
            if name in names.iterator_fields and len(ref.path) > 1:
                _check_item_field(ctx, site, ref, name, ref.path[1], names)
            return
        meant = did_you_mean(name, names.iterators | names.variables | ITER_FIELDS)
        known = names.iterators or {"<iterator>"}
        holds = ", ".join(sorted(known)) + " (the loop's iterator), _index, _first, _last"
    else:
        if name in LOOP_FIELDS:
            return
        meant = did_you_mean(name, LOOP_FIELDS)
        holds = ", ".join(sorted(LOOP_FIELDS))
    ctx.report(
        "T307" if meant else "T302",
        _field_position(ctx, site, ref, name, ref.offset + len(ref.root)),
        f"unknown name `{ref.root}.{name}` in {site.field}"
        + (meant or f": in a loop iteration `{ref.root}` holds {holds}"),
    )


def _check_item_field(ctx: CheckContext, site, ref, iterator: str, name, names) -> None:
    """`order.totl` where every loop binding `order` iterates over mappings the playbook writes
    out: a field one typo away from theirs is T307 (another key may come from `--set`)."""
    fields = names.iterator_fields.get(iterator)
    if not fields or not isinstance(name, str) or name in fields:
        return
    meant = did_you_mean(name, fields)
    if not meant:
        return
    ctx.report(
        "T307",
        _field_position(
            ctx, site, ref, name, site.value.find(iterator, ref.offset) + len(iterator)
        ),
        f"unknown field `{iterator}.{name}` in {site.field} (the items of the loop over "
        f"`{iterator}` have {', '.join(sorted(fields))})" + meant,
    )


def _check_output_field(ctx: CheckContext, site, ref) -> None:
    if not ref.path or ref.path[0] in CANONICAL_OUTPUT_FIELDS:
        return
    profile = PROFILES.get(ctx.playbook.generation)
    if profile is not None and profile.output_fields_flat:
        return  # the engine lays the result's own fields over `output` (NoETL 5)
    field_at = site.value.find(ref.path[0], ref.offset + len(ref.root))
    ctx.report(
        "T305",
        ctx.position_in_string(site.value, field_at if field_at >= 0 else ref.offset),
        f"`output.{ref.path[0]}` is not produced: a canonical `output` holds "
        f"{', '.join(sorted(CANONICAL_OUTPUT_FIELDS))} (the tool result is `output.data`)",
    )


def _report_stale_field(ctx: CheckContext, site, ref) -> None:
    # Point at the stale field itself (`load.command_0` -> `command_0`), not at the root name.
    field_at = site.value.find(ref.path[0], ref.offset + len(ref.root))
    ctx.report(
        "T305",
        ctx.position_in_string(site.value, field_at if field_at >= 0 else ref.offset),
        f"`{ref.root}.{ref.path[0]}` is no longer produced; read `{ref.root}.rows` / "
        f"`{ref.root}.row_count` (the last statement's result)",
    )


def _check_step_reference(ctx: CheckContext, site, ref, names, *, probed: bool) -> None:
    if ref.path and ref.path[0] in STALE_FIELDS and ctx.playbook.dialect in STALE_DIALECTS:
        _report_stale_field(ctx, site, ref)
        return
    reader, producer = site.step, ref.root
    if reader is None or reader == producer or ref.guarded or probed or ref.root in names.workload:
        return
    flow = ctx.flow
    if reader not in flow.reachable or flow.dominates(producer, reader):
        return
    step = ctx.playbook.step(reader)
    if step is not None and step.end_loop == producer:
        return  # v1: the loop-end step reads its own loop's results
    position = ctx.position_in_string(site.value, ref.offset)
    if not flow.is_ancestor(producer, reader):
        ctx.report(
            "T306",
            position,
            f"step {reader!r} reads the result of {producer!r}, which never runs before it",
        )
    else:
        ctx.report(
            "T303",
            position,
            f"step {reader!r} reads the result of {producer!r}, which does not run before it "
            "on every path",
        )


# Attributes Jinja's sandbox refuses (every name starting with `_` that is not a mapping key):
# the ones a template reaches for to escape it. A playbook's data never has such keys, so a
# path through one fails at render every time.
_SANDBOX_ESCAPES = frozenset(
    {
        "__class__", "__mro__", "__base__", "__bases__", "__subclasses__", "__globals__",
        "__builtins__", "__init__", "__dict__", "__code__", "__func__", "__self__",
        "__closure__", "__module__", "__getattribute__", "__reduce__", "__reduce_ex__",
    }
)  # fmt: skip


def _check_renderable(ctx: CheckContext, site, scan) -> None:
    """Templates Jinja parses but the runtime can never render: what Jinja would refuse at render
    time, check refuses too (T301), instead of a step that fails on every run."""
    if "{%" in site.value:
        for keyword, offset in loader_statements(site.value):
            ctx.report(
                "T301",
                ctx.position_in_string(site.value, offset),
                f"`{{% {keyword} %}}` in {site.field} loads another template, and playbook "
                "templates render without a template loader: it fails every time",
            )
    for ref in scan.references:
        escape = next((p for p in ref.path if p in _SANDBOX_ESCAPES), None)
        if escape is not None:
            ctx.report(
                "T301",
                ctx.position_in_string(site.value, ref.offset),
                f"`{escape}` in {site.field}: the runtime renders in Jinja's sandbox, which "
                "refuses attributes starting with `_`; rendering fails every time",
            )
