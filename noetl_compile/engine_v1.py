"""The v1 engine's profile (issue 29): NoETL's first playbook engine (noetl/noetl 58c2a16b),
cited as ``path:line`` there; ``engine_profiles`` holds it beside case-v2, canonical and NoETL 5.
Its own module like ``engine_noetl5``: one engine's citations per module.

Standard library only: the runtime imports it (like ``step_contract``).
"""

from __future__ import annotations

from .engine_behaviours import EngineProfile, Source

__all__ = ["V1"]

V1 = EngineProfile(
    name="v1",
    title="v1",
    commits={"noetl/noetl": "58c2a16bc2a43bad5910e56a419ae27d9ab8d32f"},
    result_fallbacks=("data", "result"),
    request_ctx_flat=False,
    entry_args_from_request=False,
    result_envelope_fields=False,
    step_results_in_variables=False,
    vars_namespace=False,
    guard_workload_aliases=("work", "context"),
    loop_total_and_bare_index=False,
    output_fields_flat=False,
    catalog_id_bound=False,
    input_event_bound=False,
    input_output_view=False,
    minijinja_filters=False,
    bools_render_lowercase=False,
    vars_flattened=False,
    loop_item_in_variables=False,
    results_namespace=True,
    args_as_bare_names=True,
    collect_into_vars=False,
    output_data_own_data=False,
    output_result_own_keys=False,
    case_result_own_action=False,
    failed_call_takes_every_arc=False,
    routed_failure_fails_run=False,
    routed_failure_takes_next=False,
    loop_string_items="error",
    loop_scalar_items="error",
    loop_result_is_list=True,
    loop_results_capped=False,
    loop_omitted_count=True,
    loop_stops_at_failed_item=False,
    parallel_loop_stops_at_failed_item=False,
    postgres_result_per_statement=True,
    python_function_body=False,
    python_input_undefined_blank=False,
    python_error_status_fails=False,
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
    transfer_failure_result="transfer document",
    playbook_call_waits=True,
    playbook_return_step_status=False,
    sources={
        "result_fallbacks": Source(
            "noetl/core/dsl/render.py:121",
            "TaskResultProxy answers `data` and `result` with the result itself",
        ),
        "request_ctx_flat": Source(
            "noetl/server/api/broker/execute.py:64",
            "the request payload is merged over the workload key by key; `ctx` is one more key",
        ),
        "entry_args_from_request": Source(
            "noetl/server/api/event/service/initial.py:69",
            "the run starts at the `start` step with its own `with`/`input`, not the request",
        ),
        "result_envelope_fields": Source(
            "noetl/core/dsl/render.py:121",
            "TaskResultProxy answers `data`/`result` for a mapping only; no envelope `status`",
        ),
        "step_results_in_variables": Source(
            "noetl/server/api/context/service.py:93",
            "results are read by node name, not stored as workload variables",
        ),
        "vars_namespace": Source(
            "noetl/core/dsl/render.py:114",
            "the render context has no `vars` namespace (v1 has no `vars`)",
        ),
        "bools_render_lowercase": Source(
            "noetl/core/dsl/render.py:36",
            "Python's Jinja writes a bool with `str()`: `True`/`False`",
        ),
        "vars_flattened": Source("noetl/core/dsl/render.py:114", "no `vars`: nothing to flatten"),
        "output_fields_flat": Source(
            "noetl/server/api/event/service/context.py:138",
            "the broker's context has no `output`",
        ),
        "loop_total_and_bare_index": Source(
            "noetl/plugin/iterator/execution.py:64",
            "an item sees `_loop` {current_index, index, item, count} and `index`, no `_total`",
        ),
        "guard_workload_aliases": Source(
            "noetl/server/api/event/service/context.py:139",
            "build_evaluation_context binds `workload`, `work` and `context` to the workload "
            "(recorded: template_names/b_aliases_dict)",
        ),
        "catalog_id_bound": Source(
            "noetl/server/api/context/service.py:160",
            "build_rendering_context binds no catalog_id (nor does the broker's context)",
        ),
        "input_event_bound": Source(
            "noetl/server/api/context/service.py:160",
            "build_rendering_context binds no `event`",
        ),
        "input_output_view": Source(
            "noetl/server/api/context/service.py:160",
            "build_rendering_context binds no `output`",
        ),
        "minijinja_filters": Source(
            "noetl/core/dsl/render.py:36",
            "the Jinja environment gets NoETL's own filters (b64encode, tojson, ...), none "
            "of NoETL 5's",
        ),
        "loop_item_in_variables": Source(
            "noetl/plugin/iterator/executor.py:117",
            "the item is bound in the iteration's own context, not the workload",
        ),
        "results_namespace": Source(
            "noetl/server/api/context/service.py:181",
            "build_rendering_context binds `results` (every completed step's result by name) "
            "beside the bare step names (recorded: template_names/r_results_dict)",
        ),
        "args_as_bare_names": Source(
            "noetl/plugin/python/executor.py:126",
            "a step's `with` (what a `next` entry passed) is rendered and bound by name",
        ),
        "collect_into_vars": Source(
            "noetl/server/api/event/service/transitions.py:299",
            "v1 has no case rules, so no `collect`: noetlc writes ctx",
        ),
        "output_result_own_keys": Source(
            "noetl/core/dsl/render.py:114",
            "the render context has no `output` namespace: noetlc's is its call envelope",
        ),
        "output_data_own_data": Source(
            "noetl/core/dsl/render.py:114",
            "the render context has no `output` namespace: noetlc's `output.data` is the result",
        ),
        "case_result_own_action": Source(
            "noetl/server/api/event/service/transitions.py:299",
            "v1 has no case rules: transitions are `step`/`when`/`with`",
        ),
        "failed_call_takes_every_arc": Source(
            "noetl/server/api/event/service/transitions.py:299",
            "each transition's `when` decides; noetlc takes after a failure only an arc whose "
            "`when` addresses it (recorded: v1/error_when_route)",
        ),
        "routed_failure_fails_run": Source(
            "noetl/server/api/event/service/events.py:148",
            "the workflow's end emits `execution_complete` with status COMPLETED, whatever "
            "error an earlier step's transition routed",
        ),
        "routed_failure_takes_next": Source(
            "noetl/server/api/event/service/transitions.py:299",
            "no case rules: a routed failure is an arc like any other",
        ),
        "loop_string_items": Source(
            "noetl/plugin/iterator/utils.py:34",
            "coerce_items parses a string as a JSON or Python list; other text is one item",
            differs="noetlc fails the step on a string (no live recording of this case)",
        ),
        "loop_scalar_items": Source(
            "noetl/plugin/iterator/utils.py:67",
            "coerce_items wraps any other value as one item",
            differs="noetlc fails the step on a scalar (no live recording of this case)",
        ),
        "loop_result_is_list": Source(
            "noetl/core/dsl/render.py:148",
            "a list step result is rendered as `{'result': value}` so `{{ step.result | length }}` "
            "counts the items; the iterator's result is that list (plugin/iterator/executor.py:228)",
        ),
        "loop_results_capped": Source(
            "noetl/plugin/iterator/executor.py:228",
            "`results` holds every iteration's result",
        ),
        "loop_omitted_count": Source(
            "noetl/plugin/iterator/executor.py:236",
            "the iterator reports `results`, `items`, `count`",
            differs="noetlc's loop result is `{results, stats, omitted_results_count}` (by "
            "design: section 2's `v1-iterator-one-job`)",
        ),
        "loop_stops_at_failed_item": Source(
            "noetl/plugin/iterator/executor.py:213",
            "sequential mode runs every item: a failed one is recorded `status: error` "
            "(execution.py run_one_iteration) and the next runs",
            differs="noetlc fails the loop after its last item; the iterator returns "
            "`status: success` with the failures in `errors` (executor.py:283)",
        ),
        "parallel_loop_stops_at_failed_item": Source(
            "noetl/plugin/iterator/executor.py:175",
            "`mode: async` submits every item to a thread pool at once; a failed one is recorded "
            "`status: error` and the others run",
            differs="noetlc fails the loop after its last item; the iterator returns "
            "`status: success` with the failures in `errors` (executor.py:283)",
        ),
        "postgres_result_per_statement": Source(
            "noetl/plugin/postgres/execution.py:94",
            "one `command_N` entry per statement, as the call's `data` (recorded: "
            "dsl_keys/v1_transfer_*, the step that makes the table)",
        ),
        "python_function_body": Source(
            "noetl/plugin/python/executor.py:41",
            "execute_python_task runs the code as a module and calls `main`",
        ),
        "python_input_undefined_blank": Source(
            "noetl/worker/worker.py:324",
            "the worker hands the python plugin a StrictUndefined environment: rendering an "
            "undefined name fails and the input keeps its text (plugin/python/executor.py:141)",
        ),
        "python_error_status_fails": Source(
            "noetl/worker/worker.py:936",
            "the worker judges the tool's envelope; what `main` returned is its `data` "
            "(noetl/plugin/python/executor.py:228), so a returned `status: error` is data",
        ),
        "task_set_after_call": Source(
            "noetl/plugin/tool/execution.py:17",
            "execute_task runs one task by type: no task sequences (pipelines are canonical)",
        ),
        "python_code_before_script": Source(
            "noetl/plugin/python/executor.py:76",
            "`code_b64`, else `code`: the tool reads no `script`",
            differs="noetlc also reads `script`, before `code` (the later engines' order)",
        ),
        "task_input_as_names": Source(
            "noetl/plugin/tool/execution.py:17",
            "execute_task runs one task by type: no task sequences (pipelines are canonical)",
        ),
        "pipeline_last_task_promoted": Source(
            "noetl/plugin/tool/execution.py:17",
            "execute_task runs one task by type: no task sequences (pipelines are canonical)",
        ),
        "pipeline_retry_backoff": Source(
            "noetl/plugin/tool/execution.py:17",
            "execute_task runs one task by type: no task sequences (pipelines are canonical)",
        ),
        "pipeline_result_labelled": Source(
            "noetl/plugin/tool/execution.py:17",
            "execute_task runs one task by type: no task sequences (pipelines are canonical)",
        ),
        "sql_result_shape": Source(
            "noetl/plugin/postgres/execution.py:126",
            "the postgres result is `{status, rows, row_count, columns}`, a statement "
            "without rows `{row_count, message}`; decimals as numbers",
        ),
        "http_body_keys": Source(
            "noetl/plugin/http/executor.py:81",
            "the body is `payload` (beside `data.body`); `body` and `json` are not read",
            differs="noetlc also reads `body`, then `json`, when `payload` is not given",
        ),
        "http_follows_redirects": Source(
            "noetl/plugin/http/executor.py:117",
            "the httpx.Client is built without `follow_redirects`: httpx's default, a 3xx "
            "response returned as it is",
        ),
        "http_result_keys": Source(
            "noetl/plugin/http/response.py:29",
            "the response data: status code, headers, url, elapsed, the parsed body as `data`",
        ),
        "http_empty_body": Source(
            "noetl/plugin/http/request.py:67",
            "a POST without `data.body`/`data.query` sends the data map, `{}` when the step has "
            "none, as the JSON body",
        ),
        "noop_result": Source(
            "noetl/plugin/tool/execution.py:88",
            "v1 has no noop tool (a step without `type` routes only): noetlc's noop record",
        ),
        "transfer_failure_result": Source(
            "noetl/plugin/transfer/executor.py:438",
            "a failure is re-raised as `ValueError('Transfer failed: ...')`",
            differs="how 58c2a16b's worker stores that exception is not recorded: noetlc keeps "
            "the transfer document",
        ),
        "playbook_call_waits": Source(
            "noetl/plugin/tool/execution.py:89",
            "execute_playbook_task posts the child's execution and returns its start response",
            differs="noetlc waits for the child and returns its last step's result (recorded: dsl_keys/v1_call_path_present; D955, docs/semantics.md section 1)",
        ),
        "playbook_return_step_status": Source(
            "noetl/server/api/queue/service.py:268",
            "the child's completion handler reads the call's `return_step` and hands the parent "
            "that step's result",
        ),
    },
)
