"""What each NoETL engine does, as one frozen object per engine (issue 29).

NoETL's engines differ in small ways a playbook notices: which names a template sees, what a
loop returns, where a failed call routes. The runtime (``airflow_plugin``) reads those
differences off an :class:`~.engine_behaviours.EngineProfile` and never asks which engine it is
running for (``tests/test_engine_profiles.py`` holds it: no comparison with an engine's name in
the plugin). A profile is chosen once per step payload, by :func:`profile_for` (the compiler
asks :func:`profile_of` for a playbook).

Each profile cites, per behaviour, the engine source line the value comes from (``path:line``
in the engine's repository at the profile's commit). Where noetlc applies a value the engine's
source does not show (a case nobody recorded against a live engine), the source says so in
``differs``; docs/semantics.md's engine table (``engine_table``) shows both.

Standard library only: the runtime imports it (like ``step_contract``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .engine_behaviours import EngineProfile, Source
from .engine_case_v2 import CASE_V2
from .engine_noetl5 import NOETL5
from .engine_v1 import V1

__all__ = [
    "CANONICAL",
    "CASE_V2",
    "NOETL5",
    "PROFILES",
    "V1",
    "EngineProfile",
    "profile_for",
    "profile_of",
]

_CANONICAL_FALLBACKS = ("data", "context")

CANONICAL = EngineProfile(
    name="canonical",
    title="canonical",
    commits={"noetl/noetl": "138c10ed7706c3a3644807e9f48e06796295f3bd"},
    result_fallbacks=_CANONICAL_FALLBACKS,
    request_ctx_flat=True,
    entry_args_from_request=True,
    result_envelope_fields=True,
    step_results_in_variables=True,
    vars_namespace=False,
    guard_workload_aliases=(),
    loop_total_and_bare_index=False,
    output_fields_flat=False,
    catalog_id_bound=True,
    input_event_bound=True,
    input_output_view=True,
    minijinja_filters=False,
    bools_render_lowercase=False,
    vars_flattened=False,
    loop_item_in_variables=True,
    results_namespace=False,
    args_as_bare_names=False,
    collect_into_vars=False,
    output_data_own_data=True,
    output_result_own_keys=True,
    case_result_own_action=False,
    failed_call_takes_every_arc=True,
    routed_failure_fails_run=True,
    routed_failure_takes_next=False,
    loop_string_items="one item",
    loop_scalar_items="one item",
    loop_result_is_list=False,
    loop_results_capped=True,
    loop_omitted_count=True,
    loop_stops_at_failed_item=True,
    parallel_loop_stops_at_failed_item=True,
    postgres_result_per_statement=False,
    python_function_body=False,
    python_input_undefined_blank=True,
    python_error_status_fails=True,
    pipeline_last_task_promoted=True,
    pipeline_retry_backoff="none",
    task_set_after_call=False,
    task_input_as_names=False,
    python_code_before_script=False,
    pipeline_result_labelled=False,
    sql_result_shape="statement record",
    http_result_keys=("status_code", "headers", "url", "elapsed", "data"),
    http_empty_body=True,
    http_body_keys=("payload", "body", "json"),
    http_follows_redirects=False,
    noop_result="noop record",
    transfer_failure_result="transfer document",
    playbook_call_waits=True,
    playbook_return_step_status=False,
    sources={
        "result_fallbacks": Source(
            "noetl/core/dsl/v2/engine.py:400",
            "a result's `context` is also its `data`; `data` falls back to the result",
        ),
        "request_ctx_flat": Source(
            "noetl/core/dsl/v2/engine.py:622", "Merge execution request ctx into variables"
        ),
        "entry_args_from_request": Source(
            "noetl/core/dsl/v2/engine.py:6468",
            "_issue_loop_commands(state, start_step, payload): the request is the entry args",
        ),
        "result_envelope_fields": Source(
            "noetl/core/dsl/v2/engine.py:312",
            "_merge_hydrated_step_result: a mapping gets `status` by default (the compact "
            "result's, COMPLETED: v2_worker_nats.py:2076), anything else `{data: value, status}`",
        ),
        "step_results_in_variables": Source(
            "noetl/core/dsl/v2/engine.py:659", "mark_step_completed: variables[step] = result"
        ),
        "vars_namespace": Source(
            "noetl/core/dsl/v2/engine.py:619", "'vars' is removed in strict v10: use ctx"
        ),
        "output_fields_flat": Source(
            "noetl/core/dsl/v2/engine.py:387",
            "_build_output_view: {status, data, ref, error} and the result's "
            "http/pg/py/meta/context keys only",
        ),
        "loop_total_and_bare_index": Source(
            "noetl/core/dsl/v2/engine.py:866",
            "`iter` holds the item, _index, _first and _last; no _total, no bare _index",
        ),
        "guard_workload_aliases": Source(
            "noetl/core/dsl/v2/engine.py:878",
            "the render context names the variables `ctx` and `workload` only",
        ),
        "catalog_id_bound": Source(
            "noetl/core/dsl/v2/engine.py:894",
            "catalog_id = str(self.catalog_id) (recorded: template_names/c_catalog_id_dict)",
        ),
        "input_event_bound": Source(
            "noetl/core/dsl/v2/engine.py:4160",
            'the input is rendered with Event(name="command_creation", step=step.step, '
            "payload={}) (recorded: template_names/c_event_fields_dict)",
        ),
        "input_output_view": Source(
            "noetl/core/dsl/v2/engine.py:922",
            "the output view of an empty payload for a step with no result yet (recorded: template_names/c_output_keys_dict)",
        ),
        "minijinja_filters": Source(
            "noetl/core/dsl/render.py:107",
            "the Jinja environment gets NoETL's own filters (b64encode, tojson, ...), none "
            "of NoETL 5's",
        ),
        "bools_render_lowercase": Source(
            "noetl/core/dsl/render.py:107",
            "Python's Jinja writes a bool with `str()`: `True`/`False`",
        ),
        "vars_flattened": Source(
            "noetl/core/dsl/v2/engine.py:5773", "step.vars is removed in strict v10"
        ),
        "loop_item_in_variables": Source(
            "noetl/core/dsl/v2/engine.py:4120",
            "state.variables[iterator] = item; variables['loop_index'] = index",
        ),
        "results_namespace": Source(
            "noetl/core/dsl/v2/engine.py:882",
            "the render context spreads `self.step_results` by name; it binds no `results`",
        ),
        "args_as_bare_names": Source(
            "noetl/core/dsl/v2/engine.py:3447",
            "_create_command_for_step hands arc args to the command as `args`",
        ),
        "collect_into_vars": Source(
            "noetl/core/dsl/v2/engine.py:619",
            "no `vars` in v10: collected pages land in ctx",
        ),
        "output_result_own_keys": Source(
            "noetl/core/dsl/v2/engine.py:416",
            '_build_output_view: for key in ("http", "pg", "py", "meta", "context"): '
            "output[key] = step_result[key] (recorded: template_names/c_output_own_key_dict)",
        ),
        "output_data_own_data": Source(
            "noetl/core/dsl/v2/engine.py:413",
            '_build_output_view: output["data"] = step_result.get("data", step_result)',
        ),
        "case_result_own_action": Source(
            "noetl/core/dsl/v2/models.py:717",
            "a v10 Step has no `case`; noetlc reads a rule's `result.from` as a template",
        ),
        "failed_call_takes_every_arc": Source(
            "noetl/core/dsl/v2/engine.py:5153",
            "next arcs are evaluated on call.done and call.error alike",
        ),
        "routed_failure_fails_run": Source(
            "noetl/core/dsl/v2/engine.py:5996",
            '`completion_status = "failed" if (state.failed or has_error)`: a call.error marks '
            "the execution failed (engine.py:5113) whatever ran after it (recorded: "
            "final_status/error_arc_recovery_raise)",
        ),
        "routed_failure_takes_next": Source(
            "noetl/core/dsl/v2/engine.py:5153",
            "no case rules: the arcs themselves route a failure",
        ),
        "loop_string_items": Source(
            "noetl/core/dsl/v2/engine.py:1884",
            "_normalize_loop_collection wraps a string as one item (never split or parsed)",
        ),
        "loop_scalar_items": Source(
            "noetl/core/dsl/v2/engine.py:1896", "any other value is one item"
        ),
        "loop_result_is_list": Source(
            "noetl/core/dsl/v2/engine.py:734",
            "the loop result is a record (`results`, `stats`, `omitted_results_count`)",
        ),
        "loop_results_capped": Source(
            "noetl/core/dsl/v2/engine.py:45",
            "NOETL_LOOP_RESULT_MAX_ITEMS (128) bounds the results kept",
        ),
        "loop_omitted_count": Source(
            "noetl/core/dsl/v2/engine.py:734", "loop state counts `omitted_results_count`"
        ),
        "loop_stops_at_failed_item": Source(
            "noetl/core/dsl/v2/engine.py:6103",
            "`command.failed` marks the execution failed and issues no command; an item counts "
            "only on its `call.done` (engine.py:5165), so no item after the failed one is issued "
            "(recorded: loops/loop_item_fails, 2 calls of 3 items)",
        ),
        "parallel_loop_stops_at_failed_item": Source(
            "noetl/core/dsl/v2/engine.py:6103",
            "a parallel loop is topped up to `max_in_flight` only on an item's `call.done` "
            "(engine.py:5394); a failed item's `call.error` marks the loop step completed and the "
            "execution failed (engine.py:5104), so `command.failed` finds no pending command "
            "(engine.py:5920) and issues none: no item is issued after the failed one",
        ),
        "postgres_result_per_statement": Source(
            "noetl/tools/postgres/response.py:76",
            "the last statement's result with `statement_count`",
        ),
        "python_function_body": Source(
            "noetl/worker/v2_worker_nats.py:2415",
            "execute_python_task_async runs the code as a module",
        ),
        "python_input_undefined_blank": Source(
            "noetl/tools/python/executor.py:504",
            "each text input is rendered with the worker's Environment(loader=BaseLoader()) "
            "(v2_worker_nats.py:2389), whose default undefined renders ''",
        ),
        "python_error_status_fails": Source(
            "noetl/worker/v2_worker_nats.py:2417",
            "a python result with `status: error` is returned as the error response",
        ),
        "task_set_after_call": Source(
            "noetl/worker/task_sequence_executor.py:952",
            "a task's writes are its policy rule's `then.set` only",
        ),
        "python_code_before_script": Source(
            "noetl/tools/python/executor.py:344",
            "`script` is resolved first; `code_b64`, then `code`, only without it",
        ),
        "task_input_as_names": Source(
            "noetl/worker/task_sequence_executor.py:462",
            "a task's config (its `input` among it) is rendered as a whole; no key of it "
            "becomes a name",
        ),
        "pipeline_last_task_promoted": Source(
            "noetl/core/dsl/v2/engine.py:4543",
            "_promoted_data = {**_last_result, **response_data}: so {{ fetch_with_limit.has_more "
            "}} works for multi-tool sequences (its comment: pagination routing)",
        ),
        "pipeline_retry_backoff": Source(
            "noetl/worker/task_sequence_executor.py:959",
            '`backoff` defaults to "none": _calculate_delay waits 0 s',
        ),
        "pipeline_result_labelled": Source(
            "noetl/worker/task_sequence_executor.py:98",
            "the sequence result is `{status, _prev, results}` (the error, `remaining_actions` added)",
        ),
        "sql_result_shape": Source(
            "noetl/tools/postgres/execution.py:525",
            "the postgres result is `{status, rows, row_count, columns}`, a statement "
            "without rows `{row_count, message}`; decimals as numbers",
        ),
        "http_body_keys": Source(
            "noetl/tools/http/executor.py:313",
            "the body is `payload`, else `body` (`task_config.get('payload') or "
            "task_config.get('body')`); `json` is not read",
            differs="noetlc also reads `json` when neither is given",
        ),
        "http_follows_redirects": Source(
            "noetl/tools/http/executor.py:347",
            "`follow_redirects` defaults to False: httpx returns a 3xx response as it is",
        ),
        "http_result_keys": Source(
            "noetl/tools/http/response.py:41",
            "the response data: status code, headers, url, elapsed, the parsed body as `data`",
        ),
        "http_empty_body": Source(
            "noetl/tools/http/request.py:82",
            "a POST without `data`/`body` takes the payload, `{}` when the step has none "
            "(executor.py 313: `raw_payload or {}`): the request carries the JSON body `{}`",
        ),
        "noop_result": Source(
            "noetl/worker/v2_worker_nats.py:2723",
            "a noop tool returns `{status: noop, step}`",
        ),
        "transfer_failure_result": Source(
            "noetl/tools/transfer/executor.py:618",
            "a failure is re-raised as `ValueError('Transfer failed: ...')` (the http source's "
            "own copy returns `{status: error, rows_transferred, chunks_processed, target_table, "
            "error}`, line 256)",
            differs="recorded, 138c10ed stores only the worker's `{command_id}` for a failed "
            "transfer (docs/semantics.md section 1, 'A failed transfer call's stored result'): noetlc keeps "
            "the transfer document",
        ),
        "playbook_call_waits": Source(
            "noetl/worker/v2_worker_nats.py:2590",
            "without `return_step` the worker hands the call to the playbook plugin, which starts "
            "the child and returns `{id, status: success, data: {execution_id, status: started, "
            "commands_generated}, execution_id, duration}` at once",
            differs="noetlc waits for the child and returns its last step's result (recorded: "
            "dsl_keys/nested_return_step_absent; D954, docs/semantics.md section 1)",
        ),
        "playbook_return_step_status": Source(
            "noetl/worker/v2_worker_nats.py:2980",
            "with `return_step` the worker polls the child's `/status` every 2 s and returns that "
            "document (after `timeout` seconds without an end: `{status: started, execution_id, "
            "path, async: false}`)",
            differs="noetlc returns the named step's result (recorded: "
            "dsl_keys/nested_return_step_present, dsl_keys/nested_timeout_present; D954, "
            "docs/semantics.md section 1)",
        ),
    },
)

PROFILES: Mapping[str, EngineProfile] = MappingProxyType(
    {profile.name: profile for profile in (V1, CASE_V2, CANONICAL, NOETL5)}
)


def profile_of(dialect: str | None, generation: str | None = None) -> EngineProfile:
    """The profile of a playbook read as ``dialect`` (and ``generation``): what the compiler
    asks where its output depends on the engine, as the runtime asks :func:`profile_for`."""
    return profile_for({"dialect": dialect, "generation": generation})


def profile_for(payload: Mapping[str, Any]) -> EngineProfile:
    """The engine whose semantics a step payload follows: its ``generation`` when it names a
    profile (NoETL 5), else its ``dialect``; canonical when the payload names neither (the
    contract's default). An unknown name is the payload validator's to report."""
    for key in ("generation", "dialect"):
        profile = PROFILES.get(payload.get(key) or "")
        if profile is not None:
            return profile
    return CANONICAL
