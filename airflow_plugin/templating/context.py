"""The NoETL render context (reference/noetl_dsl.md section 5, design brief section 4).

One flat dict is handed to Jinja. Its layers, lowest first:

1. execution variables flattened to the top level (``{{ api_url }}`` ≡ ``{{ ctx.api_url }}``), i.e.
   the merged workload plus ``ctx`` writes of earlier steps — except names that are reserved
   (below) or that are step names, because the engine lets those win;
2. step results by step name, wrapped in :class:`~.proxy.ResultProxy`;
3. the reserved namespaces: ``workload``, ``ctx``, ``execution_id``, ``job``, and depending on
   where a template is evaluated ``iter``/the iterator/``loop_index``, ``event``, ``output``,
   ``error``, ``_prev``, ``results`` (pipelines) and, for the case-v2 dialect, ``vars``,
   ``response``, ``result``, ``this``, ``_retry``, ``args``.

``workload`` and ``ctx`` are the same mapping, as in NoETL's engine (one variables store exposed
under both names): a ``set: ctx.x`` is visible as ``{{ workload.x }}`` too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from noetl_compile.engine_profiles import CANONICAL, EngineProfile, profile_for

from ..hooks.secrets import resolve_secret_refs
from .proxy import wrap_result
from .render import LOWER_BOOLS_KEY

# Context entry (not a valid template name) holding the names flattening must not shadow.
PROTECTED_KEY = "__noetl_protected__"
# The context's own entries, which are no playbook data (a python tool's `context` leaves them out).
INTERNAL_KEYS = frozenset({PROTECTED_KEY, LOWER_BOOLS_KEY})

__all__ = [
    "INTERNAL_KEYS",
    "PROTECTED_KEY",
    "RESERVED_KEYS",
    "apply_ctx_writes",
    "apply_vars_writes",
    "build_context",
    "entry_args",
    "execution_variables",
    "issuing_context",
    "job_namespace",
    "loop_variables",
    "reveal",
    "step_context",
    "with_bindings",
    "with_loop",
    "with_values",
]

# Names the runtime owns. A workload key with one of these names is reachable only as
# ``workload.<name>``; flattening it would shadow the namespace some template relies on.
RESERVED_KEYS = frozenset(
    {
        "workload",
        "ctx",
        "vars",
        "execution_id",
        "catalog_id",
        "job",
        "iter",
        "loop",
        "loop_index",
        "event",
        "output",
        "error",
        "_prev",
        "_task",
        "_attempt",
        "_retry",
        "results",
        "response",
        "result",
        "this",
        "args",
        "input",
        "keychain",
    }
)


def execution_variables(
    workload: Mapping[str, Any], request: Mapping[str, Any], profile: EngineProfile = CANONICAL
) -> dict[str, Any]:
    """The execution's variables before any step runs: the workload with the request payload
    on top. A payload's ``ctx`` mapping is merged flat where the engine does that
    (``profile.request_ctx_flat``: 138c10ed's "Merge execution request ctx into variables";
    recorded: tests/differential/cases/ctx/payload_ctx_flat)."""
    variables = dict(workload)
    for key, value in request.items():
        if key == "ctx" and isinstance(value, Mapping) and profile.request_ctx_flat:
            variables.update(value)
        else:
            variables[key] = value
    return variables


def entry_args(request: Mapping[str, Any], profile: EngineProfile = CANONICAL) -> dict[str, Any]:
    """What the engine hands its entry step's first command as args
    (``profile.entry_args_from_request``): the request payload (138c10ed start_execution ->
    _issue_loop_commands(state, start_step, payload)), so a payload key overrides the entry
    step's ``input`` key of that name (recorded: ctx/payload_overrides). noetlc's own run
    controls (``noetl_*``) are not payload."""
    if not profile.entry_args_from_request:
        return {}
    return {k: v for k, v in request.items() if not str(k).startswith("noetl_")}


def reveal(value: Any) -> Any:
    """A step result as templates see it: secret references (what the secrets tool stores in
    XCom instead of a value) replaced by the values, registered with Airflow's log masker."""
    return resolve_secret_refs(value)


def job_namespace(execution_id: int | str) -> dict[str, str]:
    """``job`` as NoETL exposes it: every field is the execution id (as text)."""
    text = str(execution_id)
    return {"uuid": text, "execution_id": text, "id": text}


def build_context(
    *,
    workload: Mapping[str, Any] | None = None,
    results: Mapping[str, Any] | None = None,
    ctx: Mapping[str, Any] | None = None,
    vars: Mapping[str, Any] | None = None,
    execution_id: int | str = 0,
    profile: EngineProfile = CANONICAL,
    step_names: Iterable[str] = (),
    catalog_id: int | str | None = None,
) -> dict[str, Any]:
    """Build the render context of one step.

    ``workload``: merged workload (defaults overridden by the run request).
    ``results``: step name -> result of the upstream steps this step reads.
    ``ctx``: ctx variables written by earlier steps (override workload keys).
    ``vars``: case-v2 ``vars`` visible to this step.
    ``profile``: the engine whose names a template sees (result fallbacks, results in the
    variables, ``vars``).
    ``step_names``: further names that must not be shadowed by flattened variables (every step of
    the playbook, when known — a step that did not run is still not a variable).
    ``catalog_id``: the DAG's catalog id, bound as text where the engine binds one
    (``profile.catalog_id_bound``; recorded: template_names/c_catalog_id_dict).
    """
    workload = dict(workload or {})
    results = dict(results or {})
    fallbacks = profile.result_fallbacks
    views = {
        "promote": profile.pipeline_last_task_promoted,
        "envelope": profile.result_envelope_fields,
        "loop_list": profile.loop_result_is_list,
    }
    shown = {
        name: wrap_result(reveal(value), fallbacks, **views) for name, value in results.items()
    }
    variables: dict[str, Any] = dict(workload)
    if profile.step_results_in_variables:
        # NoETL's canonical engine stores each finished step's result as an execution variable
        # (138c10ed mark_step_completed: variables[step] = result), so `{{ ctx.start.r }}` and
        # `{{ ctx }}` see it; a later `set` of the same name writes over it.
        variables.update(shown)
    variables.update(ctx or {})

    context: dict[str, Any] = {}
    protected = set(RESERVED_KEYS) | set(results) | set(step_names)
    for key, value in variables.items():
        if isinstance(key, str) and key not in protected:
            context[key] = value
    context.update(shown)

    eid = str(execution_id)
    context["workload"] = variables
    context["ctx"] = variables
    context["execution_id"] = eid
    context["job"] = job_namespace(eid)
    if profile.results_namespace and "results" not in shown:
        # 58c2a16b's build_rendering_context binds `results`: every completed step's result by
        # name, beside the bare names (recorded: template_names/r_results_dict). The step reads
        # only the upstream results its templates name (lower/dataflow), so these are those.
        context["results"] = dict(shown)
    if profile.catalog_id_bound and catalog_id:
        context["catalog_id"] = str(catalog_id)
    if profile.vars_namespace:
        # The case-v2 engine binds ``vars`` to its execution variables, the workload included
        # (dc55c492 get_render_context: "vars": self.variables; recorded:
        # template_names/v2_vars_workload_bare_alias), with what steps wrote into ``vars``.
        context["vars"] = {**variables, **(vars or {})}
    elif vars:
        # ``vars`` is a case-v2 namespace; canonical playbooks are told to use ctx instead.
        context["vars"] = dict(vars)
    if profile.vars_flattened:
        # The case-v2 engine stores `vars` in its execution variables, which its render context
        # spreads to the top level: `{{ got }}` reads `vars: {got: ..}` of an earlier step
        # (dc55c492 get_render_context; recorded: case_v2/vars_bare_in_args).
        for key, value in (vars or {}).items():
            if isinstance(key, str) and key not in protected:
                context[key] = value
    context[PROTECTED_KEY] = frozenset(protected)
    if profile.bools_render_lowercase:
        context[LOWER_BOOLS_KEY] = True
    return context


def step_context(payload: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The render context of a step's templates outside its tool call (a loop's ``in`` and
    ``max_in_flight``, a cursor's claim, a gate's texts, a nested call's config): the step's
    pulled inputs, no iteration bound."""
    return build_context(
        workload=inputs.get("workload"),
        results=inputs.get("results"),
        ctx=inputs.get("ctx"),
        vars=inputs.get("vars"),
        execution_id=inputs.get("execution_id", 0),
        catalog_id=inputs.get("catalog_id"),
        profile=profile_for(payload),
        step_names=[payload["step"], *(inputs.get("step_names") or ())],
    )


def with_values(context: Mapping[str, Any], **values: Any) -> dict[str, Any]:
    """A copy of ``context`` with reserved namespaces added/replaced (``_prev=``, ``output=``...)."""
    new = dict(context)
    new.update(values)
    return new


def issuing_context(
    context: Mapping[str, Any], step: str, profile: EngineProfile = CANONICAL
) -> Mapping[str, Any]:
    """The context a step's input and tool templates render in. NoETL's Python engines render
    them when they issue the command, under the event ``command_creation`` of that step with an
    empty payload (``profile.input_event_bound``; 138c10ed engine.py:4160, dc55c492
    engine.py:1277; recorded: template_names/c_event_fields_dict, s_event_keys_dict), and
    138c10ed with its output view (``profile.input_output_view``; recorded:
    template_names/c_output_keys_dict); arc guards, case rules and ``set`` keep the call's own."""
    values: dict[str, Any] = {}
    if profile.input_event_bound:
        stamp = datetime.now(UTC).isoformat()
        values["event"] = {
            "name": "command_creation",
            "step": step,
            "payload": {},
            "timestamp": stamp,
        }
    if profile.input_output_view:
        # 138c10ed builds its output view from that empty payload and the step's result, which
        # a step being issued does not have yet (engine.py:380-423, :922).
        values["output"] = {"status": "ok", "data": None, "ref": None, "error": None}
    return with_values(context, **values) if values else context


def with_loop(
    context: Mapping[str, Any],
    *,
    iterator: str,
    item: Any,
    index: int,
    length: int | None = None,
    iter_scope: Mapping[str, Any] | None = None,
    profile: EngineProfile = CANONICAL,
) -> dict[str, Any]:
    """Add loop iteration names: ``iter``, the bare iterator, ``loop_index``, ``loop``; where
    the engine binds them (``profile.loop_total_and_bare_index``) ``iter._total``, bare
    ``_index``/``_total`` and the item under ``ctx``."""
    last = length is not None and index == length - 1
    iter_ns = {
        **dict(iter_scope or {}),
        iterator: item,
        "_index": index,
        "_first": index == 0,
        "_last": last,
    }
    new = dict(context)
    new["iter"] = iter_ns
    if iterator not in RESERVED_KEYS:
        new[iterator] = item
    new["loop_index"] = index
    new["loop"] = {"index": index, "first": index == 0, "length": length, "done": False}
    if profile.loop_total_and_bare_index:
        # NoETL 5 build_iteration_command (commands.rs:195-217): the item, `_index` and
        # `_total` at the top and under `iter`; its `ctx` shim is built after them.
        iter_ns["_total"] = length
        bound = {iterator: item, "_index": index, "_total": length}
        for key in ("_index", "_total"):
            new[key] = bound[key]
        new["ctx"] = {**(context.get("ctx") or {}), **bound}
    return new


def loop_variables(payload: Mapping[str, Any], binding: Mapping[str, Any]) -> dict[str, Any]:
    """What NoETL's canonical engine writes into the execution variables as it issues a loop
    item (138c10ed ``state.variables[step.loop.iterator] = item`` and ``loop_index``): an
    iteration's ctx writes, so ``{{ ctx.<iterator> }}`` is the item and, after the loop, the
    last one (recorded: ctx/ctx_after_loop); ``profile.loop_item_in_variables``. Other
    engines, cursor claims and v1 bodies: none."""
    loop = payload.get("loop")
    if (
        not profile_for(payload).loop_item_in_variables
        or not isinstance(loop, Mapping)
        or loop.get("cursor") is not None
        or loop.get("body")
    ):
        return {}
    return {binding["iterator"]: binding.get("item"), "loop_index": binding.get("index", 0)}


def apply_ctx_writes(context: Mapping[str, Any], writes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``context`` where ``writes`` are visible as ctx/workload and at top level."""
    if not writes:
        return dict(context)
    new = dict(context)
    variables = {**context.get("ctx", {}), **writes}
    new["ctx"] = variables
    new["workload"] = variables
    protected = context.get(PROTECTED_KEY, RESERVED_KEYS)
    for key, value in writes.items():
        if key not in protected:
            new[key] = value
    return new


def with_bindings(context: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``context`` where ``values`` are visible as bare names; reserved namespaces and
    step results keep their meaning (a binding never shadows them)."""
    new = dict(context)
    protected = context.get(PROTECTED_KEY, RESERVED_KEYS)
    for key, value in values.items():
        if isinstance(key, str) and key not in protected:
            new[key] = value
    return new


def apply_vars_writes(context: Mapping[str, Any], writes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``context`` where case-v2 ``vars`` writes are visible as ``vars.<name>``."""
    new = dict(context)
    new["vars"] = {**context.get("vars", {}), **writes}
    return new
