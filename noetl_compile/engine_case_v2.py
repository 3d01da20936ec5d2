"""The case-v2 engine's profile (issue 29): NoETL's case-rule engine (noetl/noetl dc55c492),
cited as ``path:line`` there; ``engine_profiles`` holds it beside v1, canonical and NoETL 5.
Its own module like ``engine_v1`` and ``engine_noetl5``: one engine's citations per module.

Standard library only: the runtime imports it (like ``step_contract``).
"""

from __future__ import annotations

from .engine_behaviours import EngineProfile, Source

__all__ = ["CASE_V2"]

CASE_V2 = EngineProfile(
    name="case-v2",
    title="case-v2",
    commits={"noetl/noetl": "dc55c49215151886a4239bfaeb46caaf36b6c84a"},
    result_fallbacks=("data",),
    request_ctx_flat=False,
    entry_args_from_request=False,
    result_envelope_fields=False,
    step_results_in_variables=False,
    vars_namespace=True,
    guard_workload_aliases=(),
    loop_total_and_bare_index=False,
    output_fields_flat=False,
    catalog_id_bound=True,
    input_event_bound=True,
    input_output_view=False,
    minijinja_filters=False,
    bools_render_lowercase=False,
    vars_flattened=True,
    loop_item_in_variables=False,
    results_namespace=False,
    args_as_bare_names=False,
    collect_into_vars=True,
    output_data_own_data=False,
    output_result_own_keys=False,
    case_result_own_action=True,
    failed_call_takes_every_arc=False,
    routed_failure_fails_run=False,
    routed_failure_takes_next=True,
    loop_string_items="characters",
    loop_scalar_items="one item",
    loop_result_is_list=False,
    loop_results_capped=False,
    loop_omitted_count=False,
    loop_stops_at_failed_item=False,
    parallel_loop_stops_at_failed_item=False,
    postgres_result_per_statement=True,
    python_function_body=False,
    python_input_undefined_blank=True,
    python_error_status_fails=True,
    pipeline_last_task_promoted=False,
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
    transfer_failure_result="worker exception",
    playbook_call_waits=True,
    playbook_return_step_status=False,
    sources={
        "result_fallbacks": Source(
            "noetl/core/dsl/v2/engine.py:379",
            "step results are spread into the context as stored; `data` reads the tool "
            "envelope's body",
        ),
        "request_ctx_flat": Source(
            "noetl/core/dsl/v2/engine.py:244",
            "request keys are set one by one; `ctx` stays one variable",
        ),
        "entry_args_from_request": Source(
            "noetl/core/dsl/v2/engine.py:2163",
            "the start command is created with the request as its args",
            differs="noetlc hands the entry step no args (no live recording of a request key "
            "that is also an entry `input` key)",
        ),
        "result_envelope_fields": Source(
            "noetl/core/dsl/v2/engine.py:379",
            "step results are spread into the context as stored: no hydrated envelope",
        ),
        "step_results_in_variables": Source(
            "noetl/core/dsl/v2/engine.py:269",
            "mark_step_completed stores the result in step_results only",
        ),
        "vars_namespace": Source(
            "noetl/core/dsl/v2/engine.py:378", "`vars` is the execution variables"
        ),
        "output_fields_flat": Source(
            "noetl/worker/case_evaluator.py:380",
            "`output` is {status, data, ref, error}: the result is `output.data`",
        ),
        "loop_total_and_bare_index": Source(
            "noetl/core/dsl/v2/engine.py:401",
            "a loop item sees the `loop` namespace and its iterator only",
        ),
        "guard_workload_aliases": Source(
            "noetl/core/dsl/v2/engine.py:377",
            "the render context names the variables `workload` and `vars` only",
        ),
        "catalog_id_bound": Source(
            "noetl/core/dsl/v2/engine.py:391",
            "catalog_id = str(self.catalog_id) (recorded: template_names/s_catalog_id_dict)",
        ),
        "input_event_bound": Source(
            "noetl/core/dsl/v2/engine.py:1277",
            'the input is rendered with Event(name="command_creation", step=step.step, '
            "payload={}) (recorded: template_names/s_event_keys_dict)",
        ),
        "input_output_view": Source(
            "noetl/core/dsl/v2/engine.py:369",
            "get_render_context binds no `output`",
        ),
        "minijinja_filters": Source(
            "noetl/core/dsl/render.py:35",
            "the Jinja environment gets NoETL's own filters (b64encode, tojson, ...), none "
            "of NoETL 5's",
        ),
        "bools_render_lowercase": Source(
            "noetl/core/dsl/render.py:35",
            "Python's Jinja writes a bool with `str()`: `True`/`False`",
        ),
        "vars_flattened": Source(
            "noetl/core/dsl/v2/engine.py:384",
            "every variable (vars included) is spread to the top level",
        ),
        "loop_item_in_variables": Source(
            "noetl/core/dsl/v2/engine.py:360",
            "loop variables are added to the variables in _create_command_for_step",
            differs="noetlc binds the item in the iteration only (no live recording of "
            "`ctx.<iterator>` after a case-v2 loop)",
        ),
        "results_namespace": Source(
            "noetl/core/dsl/v2/engine.py:379",
            "get_render_context spreads the step results by name; it binds no `results`",
        ),
        "args_as_bare_names": Source(
            "noetl/core/dsl/v2/engine.py:1174",
            "_create_command_for_step hands args to the command, not to bare names",
        ),
        "collect_into_vars": Source(
            "noetl/core/dsl/v2/engine.py:965",
            "`collect.into` names the variable the pages collect into",
        ),
        "output_result_own_keys": Source(
            "noetl/core/dsl/v2/engine.py:379",
            "the render context has no `output` namespace: noetlc's is its call envelope",
        ),
        "output_data_own_data": Source(
            "noetl/core/dsl/v2/engine.py:379",
            "the render context has no `output` namespace: noetlc's `output.data` is the result",
        ),
        "case_result_own_action": Source(
            "noetl/core/dsl/v2/engine.py:945",
            "_process_then_actions applies `result` only in an action of its own",
        ),
        "failed_call_takes_every_arc": Source(
            "noetl/core/dsl/v2/engine.py:1722",
            "a failed step skips its structural `next`",
        ),
        "routed_failure_fails_run": Source(
            "noetl/core/dsl/v2/engine.py:1818",
            '`completion_status = "failed" if has_error else "completed"`: only the final '
            "step's error fails the run (recorded: case_v2/case_error_route)",
        ),
        "routed_failure_takes_next": Source(
            "noetl/worker/v2_worker_nats.py:1432",
            "a case rule that handled the error ends the step CASE_HANDLED, so its `next` runs",
        ),
        "loop_string_items": Source(
            "noetl/core/dsl/v2/engine.py:1198", "`list(collection)`: a string's characters"
        ),
        "loop_scalar_items": Source(
            "noetl/core/dsl/v2/engine.py:1198", "a non-iterable is wrapped as one item"
        ),
        "loop_result_is_list": Source(
            "noetl/core/dsl/v2/engine.py:348",
            "the aggregation is `{results, stats}`: no `result` field",
        ),
        "loop_results_capped": Source(
            "noetl/core/dsl/v2/engine.py:337",
            "get_loop_aggregation returns every result",
        ),
        "loop_omitted_count": Source(
            "noetl/core/dsl/v2/engine.py:348", "the aggregation is `{results, stats}`"
        ),
        "loop_stops_at_failed_item": Source(
            "noetl/core/dsl/v2/engine.py:1521",
            "a failed item's `step.exit` is counted (`failed_count`) and the loop check issues the "
            "next item (engine.py:1602); the engine has no `command.failed` stop",
        ),
        "parallel_loop_stops_at_failed_item": Source(
            "noetl/core/dsl/v2/engine.py:1521",
            "every item's `step.exit` is counted, a failed one too (`failed`), and the loop check "
            "issues the next item whatever the mode (engine.py:1602): no failure stops a parallel loop",
        ),
        "postgres_result_per_statement": Source(
            "noetl/tools/postgres/execution.py:151", '`results[f"command_{i}"]` per statement'
        ),
        "python_function_body": Source(
            "noetl/tools/python/executor.py:640",
            "the python tool runs the code as a module; failures are `{status: error, ...}`",
        ),
        "python_input_undefined_blank": Source(
            "noetl/tools/python/executor.py:479",
            "each text input is rendered with the worker's Environment(loader=BaseLoader()) "
            "(v2_worker_nats.py:1739), whose default undefined renders ''",
        ),
        "python_error_status_fails": Source(
            "noetl/worker/v2_worker_nats.py:1347",
            "a tool response with `status: error` is a tool error",
        ),
        "task_set_after_call": Source(
            "noetl/core/dsl/v2/models.py:283",
            "a step's `tool` is one ToolSpec: no task sequences (pipelines are canonical)",
        ),
        "python_code_before_script": Source(
            "noetl/tools/python/executor.py:323",
            "`script` is resolved first; `code_b64`, then `code`, only without it",
        ),
        "task_input_as_names": Source(
            "noetl/core/dsl/v2/models.py:283",
            "a step's `tool` is one ToolSpec: no task sequences (pipelines are canonical)",
        ),
        "pipeline_last_task_promoted": Source(
            "noetl/core/dsl/v2/models.py:283",
            "a step's `tool` is one ToolSpec: no task sequences (pipelines are canonical)",
        ),
        "pipeline_retry_backoff": Source(
            "noetl/core/dsl/v2/models.py:283",
            "a step's `tool` is one ToolSpec: no task sequences (pipelines are canonical)",
        ),
        "pipeline_result_labelled": Source(
            "noetl/core/dsl/v2/models.py:283",
            "a step's `tool` is one ToolSpec: no task sequences (pipelines are canonical)",
        ),
        "sql_result_shape": Source(
            "noetl/tools/postgres/execution.py:183",
            "the postgres result is `{status, rows, row_count, columns}`, a statement "
            "without rows `{row_count, message}`; decimals as numbers",
        ),
        "http_body_keys": Source(
            "noetl/tools/http/executor.py:114",
            "the body is `payload`; `body` and `json` are not read",
            differs="noetlc also reads `body`, then `json`, when `payload` is not given",
        ),
        "http_follows_redirects": Source(
            "noetl/tools/http/executor.py:142",
            "`follow_redirects` defaults to False: httpx returns a 3xx response as it is",
        ),
        "http_result_keys": Source(
            "noetl/tools/http/response.py:29",
            "the response data: status code, headers, url, elapsed, the parsed body as `data`",
        ),
        "http_empty_body": Source(
            "noetl/tools/http/request.py:82",
            "a POST without `data`/`body` takes the payload, `{}` when the step has none: the "
            "request carries the JSON body `{}`",
        ),
        "noop_result": Source(
            "noetl/core/dsl/v2/models.py:170",
            "the tool kinds of case-v2 have no noop: noetlc's noop record",
        ),
        "transfer_failure_result": Source(
            "noetl/tools/transfer/executor.py:613",
            "every failure is re-raised as `ValueError('Transfer failed: ...')`; the worker "
            "(v2_worker_nats.py:1591) reports `{status: failed, error, error_type}` as the "
            "step's result",
        ),
        "playbook_call_waits": Source(
            "noetl/worker/v2_worker_nats.py:2267",
            "without `return_step` the worker returns `{status: started, execution_id, path, async: true}`",
            differs="noetlc waits for the child and returns its last step's result (no live recording of a nested case-v2 call)",
        ),
        "playbook_return_step_status": Source(
            "noetl/worker/v2_worker_nats.py:2236",
            "with `return_step` the worker polls the child's `/status` and returns that document",
            differs="noetlc returns the named step's result: the April server's status "
            "document (`completed`/`failed` flags) is not recorded",
        ),
    },
)
