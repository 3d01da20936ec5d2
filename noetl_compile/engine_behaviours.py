"""What an engine profile is: the behaviours in which NoETL's engines differ, one typed field
each, and where an engine decides one (issue 29; the four engines: ``engine_profiles``).

Each behaviour is a field of :class:`EngineProfile`; its metadata says what it decides (``doc``)
and what noetlc does with it on Airflow (``airflow``). A profile cites, per field, the engine
source line its value comes from (:class:`Source`), and refuses to exist without one.

Standard library only: the runtime imports it (like ``step_contract``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Literal

__all__ = [
    "Backoff",
    "EngineProfile",
    "LoopItems",
    "NoopResult",
    "Source",
    "SqlShape",
    "TransferFailure",
    "behaviours",
]

LoopItems = Literal["one item", "characters", "error"]
Backoff = Literal["none", "fixed"]
SqlShape = Literal["statement record", "columns and rows"]
NoopResult = Literal["noop record", "ok message"]
TransferFailure = Literal["transfer document", "worker exception"]


@dataclass(frozen=True)
class Source:
    """Where an engine decides one behaviour: ``where`` is ``path:line`` in the profile's
    repository (``repo:path:line`` for an engine of several repositories), ``says`` what that
    code does, ``differs`` (when set) how noetlc's value for this engine departs from it."""

    where: str
    says: str
    differs: str = ""


def _about(doc: str, airflow: str) -> dict[str, str]:
    """A behaviour field's metadata: what it decides, what noetlc does with it on Airflow."""
    return {"doc": doc, "airflow": airflow}


@dataclass(frozen=True)
class EngineProfile:
    """One NoETL engine's behaviour, field by field (see the module docstring)."""

    name: str
    title: str
    commits: Mapping[str, str]

    # -- what a template sees ---------------------------------------------------------------
    result_fallbacks: tuple[str, ...] = field(
        metadata=_about(
            "Keys a step result answers for itself when a template asks for a field the result "
            "lacks (`{{ s.data.x }}` is `{{ s.x }}`).",
            "templating/proxy.py wraps each step result with these fallbacks.",
        )
    )
    request_ctx_flat: bool = field(
        metadata=_about(
            "A run request's `ctx` mapping is merged flat into the execution variables.",
            "templating/context.execution_variables, for `noetlc run` and a DAG run's conf.",
        )
    )
    entry_args_from_request: bool = field(
        metadata=_about(
            "The run request is handed to the entry step as its args (a request key overrides the "
            "entry step's `input` key of that name).",
            "operators/base.py lays the request (less noetlc's own `noetl_*` controls) over the "
            "entry step's args.",
        )
    )
    result_envelope_fields: bool = field(
        metadata=_about(
            "A step result answers the fields of the engine's hydrated result envelope it lacks: "
            "`status` (`COMPLETED`, after a call that succeeded) and, for a list, text or number "
            "result, `data` (the value itself: `{{ ids.data }}`).",
            "templating/proxy.wrap_result (ResultProxy for a mapping, ValueResult for the rest; "
            "a boolean or null result stays plain).",
        )
    )
    step_results_in_variables: bool = field(
        metadata=_about(
            "A finished step's result is also an execution variable (`{{ ctx.<step> }}`).",
            "templating/context.build_context adds the results under ctx/workload.",
        )
    )
    vars_namespace: bool = field(
        metadata=_about(
            "Every template sees a `vars` namespace: the execution variables (the workload "
            "included) with what steps wrote into `vars`.",
            "build_context binds `vars` to the variables always (otherwise only when a step "
            "wrote vars, and then to those alone).",
        )
    )
    guard_workload_aliases: tuple[str, ...] = field(
        metadata=_about(
            "Further names an arc's `when` and its args read the workload under "
            "(beside `workload`).",
            "step_case.route_arcs binds each to the workload, unless a step result or a "
            "variable has that name.",
        )
    )
    output_fields_flat: bool = field(
        metadata=_about(
            "An arc guard's or `set`'s `output` also holds the result's own fields at its top "
            "(`output.rows` beside `output.data.rows`).",
            "step_calls.after_call_context lays the result's fields over the output envelope; "
            "`noetlc check` does not call them unknown (T305).",
        )
    )
    loop_total_and_bare_index: bool = field(
        metadata=_about(
            "A loop item also sees `iter._total` (the item count), bare `_index` and `_total`, "
            "and `ctx.<iterator>` (the item).",
            "templating/context.with_loop adds them.",
        )
    )
    catalog_id_bound: bool = field(
        metadata=_about(
            "Every template sees `catalog_id`: the id of the playbook's catalog entry, as text.",
            "build_context binds it to the DAG's catalog id (templating/ids.catalog_id_for: "
            "the compiled playbook is the catalog entry).",
        )
    )
    input_event_bound: bool = field(
        metadata=_about(
            "A step's input and its tool's templates see `event`: the command being issued, "
            "`{name: command_creation, step, payload: {}, timestamp}`.",
            "step._execute and CallLoop.call render them with that `event`; arc guards, case "
            "rules and `set` keep the call's event (`call.done`, `call.error`).",
        )
    )
    input_output_view: bool = field(
        metadata=_about(
            "A step's input and its tool's templates also see `output`: the output view of the "
            "command being issued, `{status: ok, data: null, ref: null, error: null}`.",
            "templating/context.issuing_context binds it beside `event`.",
        )
    )
    minijinja_filters: bool = field(
        metadata=_about(
            "The renderer also has NoETL 5's filters (`keys`, `values`, `items`, `get`, `split`, "
            "`len`, `string`, `int`, `float`, `trim`, `safe`) beside Jinja's and NoETL's.",
            "`noetlc check` knows them there (T304 elsewhere); the runtime registers them for "
            "every profile (templating/filters5.py), so a playbook using one still runs.",
        )
    )
    bools_render_lowercase: bool = field(
        metadata=_about(
            "A boolean written into text by a template (`enabled={{ workload.enabled }}`) reads "
            "`true`/`false` (minijinja's rendering), else `True`/`False` (Python's Jinja). A "
            "template that is the whole value keeps the boolean itself either way.",
            "templating/render.py: the environment's `finalize`, told by the render context "
            "(templating/context.build_context).",
        )
    )
    vars_flattened: bool = field(
        metadata=_about(
            "`vars` written by earlier steps are also bare names (`{{ got }}`).",
            "build_context spreads them at the top level, under reserved names and step results.",
        )
    )
    loop_item_in_variables: bool = field(
        metadata=_about(
            "Issuing a loop item writes the iterator and `loop_index` into the execution variables "
            "(`{{ ctx.<iterator> }}` after the loop is the last item).",
            "templating/context.loop_variables returns them as the iteration's ctx writes.",
        )
    )
    results_namespace: bool = field(
        metadata=_about(
            "`results` is every earlier step's result by step name (`{{ results.fetch.id }}`), "
            "beside the bare step names.",
            "templating/context.build_context binds it; lower/dataflow reads `results.<step>` "
            "as a read of that step's result.",
        )
    )
    args_as_bare_names: bool = field(
        metadata=_about(
            "Args arriving along a routing arc are bare names in the target step's templates.",
            "runtime/step.py binds the incoming args by name (never over reserved names).",
        )
    )
    collect_into_vars: bool = field(
        metadata=_about(
            "A case rule's `collect: {into}` writes `vars` (else ctx).",
            "runtime/step_calls.py writes the collected value to vars (always when `vars` is in "
            "the context).",
        )
    )
    output_data_own_data: bool = field(
        metadata=_about(
            "In a step's arcs and `set`, `output.data` is the result's own `data` field when it "
            "has one (else the result).",
            "runtime/step_calls.after_call_context builds `output` so (a pipeline policy rule's "
            "`output` is the task's call envelope, unchanged).",
        )
    )
    output_result_own_keys: bool = field(
        metadata=_about(
            "In a step's arcs and `set`, `output.http`/`pg`/`py`/`meta`/`context` are the "
            "result's own keys of those names where it has them (else noetlc's call envelope's).",
            "runtime/step_calls.after_call_context lays them over `output`.",
        )
    )
    # -- routing and outcomes ---------------------------------------------------------------
    case_result_own_action: bool = field(
        metadata=_about(
            "A case rule's `then.result` applies only as an action of its own (`{from: NAME}` "
            "names a variable); else `result: {from: <template>}` replaces the step result.",
            "runtime/step_case.py applies `result` accordingly.",
        )
    )
    failed_call_takes_every_arc: bool = field(
        metadata=_about(
            "After a failed tool call the step's arcs are evaluated as after a successful one (an "
            "arc without `when` is taken); else only an arc addressing the failure is.",
            "runtime/step_case.route_arcs; the step's task fails and the arcs run by trigger "
            "rules (operators/failure_routes.py).",
        )
    )
    routed_failure_fails_run: bool = field(
        metadata=_about(
            "A run in which a tool call failed ends failed even where the routing took the "
            "failure and the steps after it succeeded; else it ends completed.",
            "lower/outcome.py: the outcome task after the leaves fails or succeeds the DAG run "
            "accordingly (operators/outcome.py); the failed step's task is red either way.",
        )
    )
    routed_failure_takes_next: bool = field(
        metadata=_about(
            "A case rule that routes a failed call also takes the step's plain `next`.",
            "runtime/step.py routes along the arcs after such a rule.",
        )
    )
    # -- loops ------------------------------------------------------------------------------
    loop_string_items: LoopItems = field(
        metadata=_about(
            "What a `loop.in` that renders to a string iterates over.",
            "runtime/loop.render_collection.",
        )
    )
    loop_scalar_items: LoopItems = field(
        metadata=_about(
            "What a `loop.in` that renders to a number or boolean iterates over.",
            "runtime/loop.render_collection.",
        )
    )
    loop_result_is_list: bool = field(
        metadata=_about(
            "`{{ loop_step.result }}` is the plain list of the item results (the engine's loop "
            "result is that list), not the loop record.",
            "templating/proxy.ResultProxy answers `result` of a loop record `{results, stats}` "
            "with its `results`.",
        )
    )
    loop_results_capped: bool = field(
        metadata=_about(
            "A loop result keeps only the last NOETL_LOOP_RESULT_MAX_ITEMS (128) results, each cut "
            "to a preview past NOETL_LOOP_RESULT_MAX_BYTES (65536).",
            "runtime/loop.aggregate and operators/loop.py read the same variables.",
        )
    )
    loop_omitted_count: bool = field(
        metadata=_about(
            "A loop result has `omitted_results_count` beside `results` and `stats`.",
            "runtime/loop.aggregate.",
        )
    )
    loop_stops_at_failed_item: bool = field(
        metadata=_about(
            "A sequential loop issues no further item after an item's call fails (the loop, and "
            "the run, fail); otherwise every item runs and the loop fails at its end.",
            "a sequential loop's items run in order inside one task instance "
            "(runtime/loop_items.run_items), which stops at the failed item.",
        )
    )
    parallel_loop_stops_at_failed_item: bool = field(
        metadata=_about(
            "A parallel loop issues no further item once an item's call failed (the items "
            "already running finish; the loop, and the run, fail); otherwise every item runs "
            "and the loop fails at its end.",
            "inside a task instance no item starts after a failed one (in index order, and on "
            "the threads of a parallel loop run in one process: runtime/loop_items.run_items, "
            "operators/loop._run_concurrently); a deployed loop's mapped instances share a "
            "stop flag (the failed instance's XCom, read before each item: "
            "operators/loop._SiblingStop), so none starts an item once a failure is known.",
        )
    )
    # -- tools ------------------------------------------------------------------------------
    postgres_result_per_statement: bool = field(
        metadata=_about(
            "The postgres tool's result has one `command_N` entry per statement (else the last "
            "statement's result).",
            "tools/postgres.py.",
        )
    )
    python_function_body: bool = field(
        metadata=_about(
            "The python tool runs code with a top-level `return` as a function body, gives "
            "`input_data`, and reports a failure as the process's stderr (NoETL 5's convention).",
            "tools/python.py.",
        )
    )
    python_input_undefined_blank: bool = field(
        metadata=_about(
            "An input of a python tool that still holds a template is rendered again by the tool "
            "with Jinja's default undefined: an undefined name (`{{ error }}`) is `''`; a field of "
            "an undefined name keeps its text.",
            "tools/python.py renders such an input with templating/render.render_blank_undefined.",
        )
    )
    python_error_status_fails: bool = field(
        metadata=_about(
            "A python result dict with `status: error` fails the call.",
            "tools/python.py returns a failed outcome whose step result is that dict.",
        )
    )
    task_set_after_call: bool = field(
        metadata=_about(
            "A pipeline task's own `set` is rendered after the call, with `output` as its result; "
            "a plain name is a variable of the later tasks.",
            "runtime/pipeline.py.",
        )
    )
    python_code_before_script: bool = field(
        metadata=_about(
            "A python tool given both `code` and `script` runs `code` (else `script`).",
            "tools/python.py picks the source in this order.",
        )
    )
    task_input_as_names: bool = field(
        metadata=_about(
            "A pipeline task's `input` (else `args`) values are rendered against the running "
            "context and bound as names its own templates read (`{{ x }}` in a `result` or a "
            "`command`).",
            "runtime/pipeline.py binds them before the task's config is rendered.",
        )
    )
    pipeline_last_task_promoted: bool = field(
        metadata=_about(
            "Templates read a tool pipeline's step result with the last task's result laid "
            "under the record (`{**last, **record}`): `{{ fetch.has_more }}` after a multi-task "
            "pipeline reads the last task's `has_more`; the record's own keys win.",
            "templating/proxy.promoted, applied by context.build_context and runtime/step_calls "
            "(the stored result stays the record).",
        )
    )
    pipeline_retry_backoff: Backoff = field(
        metadata=_about(
            "The wait between tries of a pipeline `retry` rule that names no `backoff`: `none` "
            "(0 s) or `fixed` (`delay` each try).",
            "runtime/pipeline.backoff_delay.",
        )
    )
    pipeline_result_labelled: bool = field(
        metadata=_about(
            "A tool pipeline's step result is its tasks' results by label, flat (`{fetch: "
            "{..}, save: {..}}`, plus `_context_updates` when a policy rule's `set` wrote; a "
            "failed pipeline `{labeled_results, failed_task}` with the task's index); else the "
            "task-sequence record `{status, _prev, results, ctx}`.",
            "runtime/pipeline.run_pipeline builds the one or the other.",
        )
    )
    # -- result shapes of the tools ----------------------------------------------------------
    sql_result_shape: SqlShape = field(
        metadata=_about(
            "What a postgres/duckdb call returns: `statement record` `{status, rows, row_count, "
            "columns, statement_count}` (no result set: `row_count` and a `message`; numeric "
            "values as JSON numbers), or `columns and rows` `{columns, rows, row_count}` for a "
            "SELECT/WITH (postgres: `{columns: [], rows: [], row_count: 0}` when empty), "
            "`{affected_rows}` for any other statement, numeric values as exact decimal text and "
            "rows as lists under `as_objects: false`.",
            "tools/sql.columns_and_rows reshapes the tools' record; hooks/values writes exact "
            "decimals.",
        )
    )
    http_result_keys: tuple[str, ...] = field(
        metadata=_about(
            "The keys of an http call's result (`body` is the parsed body again, as `data`).",
            "tools/http.py keeps these keys of its full result.",
        )
    )
    http_empty_body: bool = field(
        metadata=_about(
            "A POST/PUT/PATCH call with no `data`, `payload` or `body`: `yes` sends the JSON "
            "body `{}` (the Python http tools' default payload), `no` sends no body.",
            "tools/http_request.py (`call.profile.http_empty_body`).",
        )
    )
    http_body_keys: tuple[str, ...] = field(
        metadata=_about(
            "The keys an http call's body is read from, in order: the first one given is the "
            "body (`form`, when given without `json`, is sent form-encoded instead).",
            "tools/http_request.py reads the body from these keys.",
        )
    )
    http_follows_redirects: bool = field(
        metadata=_about(
            "An http call without `follow_redirects` follows a 3xx response to its target (yes) "
            "or returns the 3xx response itself (no).",
            "tools/http_request.py: the default of `follow_redirects`; a value the call gives "
            "wins.",
        )
    )
    noop_result: NoopResult = field(
        metadata=_about(
            "A noop without `result`: `noop record` `{status: noop, step}` (a `message` added), "
            "or `ok message` `{status: ok, message}` (`message` defaults to `noop`).",
            "tools/noop.py.",
        )
    )
    transfer_failure_result: TransferFailure = field(
        metadata=_about(
            "A failed transfer's step result: `transfer document` `{direction, source_type, "
            "target_type, mode, status: error, rows_transferred: 0, chunks_processed: 0, "
            "target_table, error}`, or `worker exception` `{error: 'Transfer failed: <message>', "
            "status: failed, error_type: ValueError}` (the tool re-raises every failure as a "
            "ValueError and the worker reports the exception as the step's result).",
            "tools/transfer.py (the structured error stays the call's `error` either way).",
        )
    )
    playbook_call_waits: bool = field(
        metadata=_about(
            "A `kind: playbook` call without `return_result`/`return_step` waits for the child "
            "and returns its last step's result; else it starts the child and returns "
            "`{status: started, execution_id, path, async: true}` at once.",
            "runtime/nested.py (inline) and operators/nested.py (a triggered child DAG run, not "
            "waited for).",
        )
    )
    playbook_return_step_status: bool = field(
        metadata=_about(
            "A `kind: playbook` call with `return_step` waits for the child and returns its "
            "status payload `{execution_id, status, current_step, progress, is_cancelled}` "
            "(`status` COMPLETED or FAILED, a failed child not failing the call); else the "
            "result of the named step.",
            "runtime/nested.py (inline) and operators/nested.py (the child DAG run's end state and "
            "the results its steps left).",
        )
    )

    sources: Mapping[str, Source] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [name for name in behaviours() if name not in self.sources]
        extra = sorted(set(self.sources) - set(behaviours()))
        if missing or extra:
            raise ValueError(
                f"engine profile {self.name}: every behaviour cites its source "
                f"(missing: {missing}, unknown: {extra})"
            )
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))
        object.__setattr__(self, "commits", MappingProxyType(dict(self.commits)))


def behaviours() -> tuple[str, ...]:
    """The behaviour fields of :class:`EngineProfile`, in declaration order."""
    return tuple(f.name for f in fields(EngineProfile) if "doc" in f.metadata)
