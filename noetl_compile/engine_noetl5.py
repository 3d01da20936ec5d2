"""NoETL 5's engine profile (issue 29): the engine of three Rust repositories (noetl/server,
noetl/worker, noetl/tools), cited as ``repo:path:line``; ``engine_profiles`` holds it beside the
three Python engines of noetl/noetl.

Standard library only: the runtime imports it (like ``step_contract``).
"""

from __future__ import annotations

from .engine_behaviours import EngineProfile, Source

__all__ = ["NOETL5"]

NOETL5 = EngineProfile(
    name="noetl5",
    title="NoETL 5",
    commits={
        "noetl/server": "d9ec700c116d4dddfdb581a344d44a86bd99324a",
        "noetl/worker": "f6fae7ef2ddb3793ce1ec2d4e7af0966e07f4932",
        "noetl/tools": "ded945468e67cf72e5547a039145f14a6866343b",
    },
    result_fallbacks=("data", "context"),  # the canonical profile's (138c10ed)
    request_ctx_flat=False,
    entry_args_from_request=False,
    result_envelope_fields=False,
    step_results_in_variables=False,
    vars_namespace=False,
    guard_workload_aliases=(),
    loop_total_and_bare_index=True,
    output_fields_flat=True,
    catalog_id_bound=True,
    input_event_bound=False,
    input_output_view=False,
    minijinja_filters=True,
    bools_render_lowercase=True,
    vars_flattened=False,
    loop_item_in_variables=False,
    results_namespace=False,
    args_as_bare_names=True,
    collect_into_vars=False,
    output_data_own_data=True,
    output_result_own_keys=False,
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
    parallel_loop_stops_at_failed_item=False,
    postgres_result_per_statement=False,
    python_function_body=True,
    python_input_undefined_blank=False,
    python_error_status_fails=False,
    pipeline_last_task_promoted=False,
    pipeline_retry_backoff="none",
    task_set_after_call=True,
    task_input_as_names=True,
    python_code_before_script=True,
    pipeline_result_labelled=True,
    sql_result_shape="columns and rows",
    http_result_keys=("status_code", "headers", "data", "body"),
    http_empty_body=False,
    http_body_keys=("json", "body", "payload"),
    http_follows_redirects=True,
    noop_result="ok message",
    transfer_failure_result="transfer document",
    playbook_call_waits=False,
    playbook_return_step_status=True,
    sources={
        "result_fallbacks": Source(
            "noetl/server:orchestrate-core/src/state.rs:1129",
            "build_context exposes a step's user data with a synthetic `data` of itself",
            differs="noetlc also answers `context` (138c10ed's alias)",
        ),
        "request_ctx_flat": Source(
            "noetl/server:src/handlers/execute.rs:1377",
            "the request payload's keys override the workload's one by one",
        ),
        "entry_args_from_request": Source(
            "noetl/server:src/handlers/execute.rs:1377",
            "the request payload goes into the start command's context, not its args",
        ),
        "result_envelope_fields": Source(
            "noetl/server:orchestrate-core/src/state.rs:1129",
            "build_context exposes a step's user data with a synthetic `data` of itself: no "
            "envelope `status`",
        ),
        "step_results_in_variables": Source(
            "noetl/server:orchestrate-core/src/state.rs:1107",
            "step results are top-level names and `steps.<name>`, not ctx variables",
        ),
        "vars_namespace": Source(
            "noetl/server:orchestrate-core/src/state.rs:1066",
            "build_context has no `vars` namespace (the CLI's local profile has step `vars`)",
        ),
        "vars_flattened": Source(
            "noetl/server:orchestrate-core/src/state.rs:1066", "no `vars` to flatten"
        ),
        "output_fields_flat": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:54",
            "output_namespace: the step's data with its fields at the top and under `.data`",
        ),
        "loop_total_and_bare_index": Source(
            "noetl/server:orchestrate-core/src/commands.rs:195",
            "build_iteration_command binds the item, _index and _total at the top and under "
            "`iter`, then builds `ctx` from that context",
        ),
        "guard_workload_aliases": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:94",
            "with_ctx_shims adds `ctx` and `workload` only",
        ),
        "catalog_id_bound": Source(
            "noetl/server:orchestrate-core/src/state.rs:1160",
            "build_context binds catalog_id = self.catalog_id.to_string()",
        ),
        "input_event_bound": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:1112",
            "`event` is bound in the loop.done arc guard only, never in an input",
        ),
        "input_output_view": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:54",
            "`output` is bound in arc guards and `set` only, never in an input",
        ),
        "minijinja_filters": Source(
            "noetl/server:orchestrate-core/src/template.rs:59",
            "TemplateRenderer registers keys, values, items, get, split, len, string, int, float, trim",
        ),
        "bools_render_lowercase": Source(
            "noetl/tools:src/template/engine.rs:37",
            "the tools render with a minijinja Environment, which writes a bool as `true`/`false` "
            "(NoETL 5.3.2's CLI alike: `enabled=true`, tests/noetl5/playbooks/shell_workload_scalars)",
        ),
        "loop_item_in_variables": Source(
            "noetl/server:orchestrate-core/src/state.rs:1151",
            "only durable `set: ctx.*` writes overlay the context",
        ),
        "results_namespace": Source(
            "noetl/server:orchestrate-core/src/state.rs:1140",
            "earlier step results are top-level names and `steps.<name>`: no `results`",
        ),
        "args_as_bare_names": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:1482",
            "a `next` target's `args` (`{step, when, args}`, evaluator.rs:283 `with_params`) are "
            "merged into the target step's context as plain names",
            differs="noetlc also keeps them under `args` (`{{ args.name }}`, as NoETL 5's local "
            "CLI reads them)",
        ),
        "collect_into_vars": Source(
            "noetl/server:orchestrate-core/src/state.rs:1189",
            "set mutations write ctx (apply_set_mutations)",
        ),
        "output_result_own_keys": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:58",
            "output_namespace lays every field of the data at the top (output_fields_flat)",
        ),
        "output_data_own_data": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:58",
            "output_namespace: the user data, with `data` added only where it has none",
        ),
        "case_result_own_action": Source(
            "noetl/worker:src/executor/case_evaluator.rs:109",
            "case rules are evaluated against the context and the tool result; no "
            "`then.result` action list",
        ),
        "failed_call_takes_every_arc": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:709",
            "a failed step does not have its next.arcs evaluated; the run ends failed",
            differs="noetlc evaluates the arcs as 138c10ed does (no live recording of NoETL 5)",
        ),
        "routed_failure_fails_run": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:709",
            "a failed step ends the run failed",
        ),
        "routed_failure_takes_next": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:709",
            "no case rules on the server: a failed step ends its branch",
        ),
        "loop_string_items": Source(
            "noetl/server:orchestrate-core/src/evaluator.rs:346",
            "a JSON array text is parsed, any other string split on commas and newlines",
            differs="noetlc iterates the string as one item (138c10ed)",
        ),
        "loop_scalar_items": Source(
            "noetl/server:orchestrate-core/src/evaluator.rs:358",
            "a number n iterates 0..n; null and booleans fail the step",
            differs="noetlc iterates the value as one item (138c10ed)",
        ),
        "loop_result_is_list": Source(
            "noetl/server:orchestrate-core/src/state.rs:810",
            "iteration results are pushed onto the step's results: no `result` field",
        ),
        "loop_results_capped": Source(
            "noetl/server:orchestrate-core/src/state.rs:810",
            "iteration results are pushed onto the step's results",
            differs="noetlc keeps 138c10ed's cap",
        ),
        "loop_omitted_count": Source(
            "noetl/server:orchestrate-core/src/state.rs:810",
            "iteration results are pushed onto the step's results",
            differs="noetlc keeps 138c10ed's `omitted_results_count`",
        ),
        "loop_stops_at_failed_item": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:832",
            "the next sequential item is dispatched only on the previous item's "
            "`command.completed`; a failed item dispatches none",
        ),
        "parallel_loop_stops_at_failed_item": Source(
            "noetl/server:orchestrate-core/src/orchestrator.rs:1829",
            "a parallel loop dispatches every item at once (`dispatch_count = total`); a failed "
            "iteration cancels none",
        ),
        "postgres_result_per_statement": Source(
            "noetl/tools:src/tools/postgres.rs:331",
            "the last statement's rows are the result",
        ),
        "python_function_body": Source(
            "noetl/tools:src/tools/python.rs:111",
            "code with a top-level return runs as `def __noetl_step__(args, input_data, **kw)`",
        ),
        "python_input_undefined_blank": Source(
            "noetl/tools:src/template/engine.rs:46",
            "templates render with minijinja's Chainable undefined: an undefined name or field is ''",
            differs="noetlc keeps the text of an input it cannot render (no live recording of "
            "NoETL 5's python inputs)",
        ),
        "python_error_status_fails": Source(
            "noetl/tools:src/tools/python.rs:745",
            "success is the process's exit code alone: a returned `status: error` is data",
        ),
        "task_set_after_call": Source(
            "noetl/tools:src/tools/task_sequence.rs:301",
            "a task's own `set` is read beside its call and rendered with its output",
        ),
        "python_code_before_script": Source(
            "noetl/tools:src/tools/python.rs:262",
            "resolve_source: `code` when given, else `script` (inline, file, gcs, http)",
        ),
        "task_input_as_names": Source(
            "noetl/tools:src/tools/task_sequence.rs:324",
            "a task's `input` (else `args`) values are rendered against the running context "
            "and bound as names the task's own templates read",
        ),
        "pipeline_last_task_promoted": Source(
            "noetl/tools:src/tools/task_sequence.rs:838",
            "build_pipeline_result: the result is the labelled task results, nothing promoted "
            "(`{{ step.<label>.field }}` reads a task)",
        ),
        "pipeline_retry_backoff": Source(
            "noetl/tools:src/tools/task_sequence.rs:767",
            '`backoff` defaults to "none" (calc_retry_delay: 0 s)',
        ),
        "pipeline_result_labelled": Source(
            "noetl/tools:src/tools/task_sequence.rs:848",
            "build_pipeline_result: the labelled task results as the result's map, "
            "`_context_updates` added when a policy rule's `set` wrote; a failed pipeline's data "
            "is `{labeled_results, failed_task}` (line 681)",
        ),
        "sql_result_shape": Source(
            "noetl/tools:src/tools/postgres.rs:336",
            "a SELECT/WITH gives `{columns, rows, row_count}` (`{columns: [], rows: [], "
            "row_count: 0}` when empty), any other statement `{affected_rows}` (line 383); "
            "numeric as its exact decimal text (line 697); duckdb.rs:287/301 the same (an "
            "empty duckdb result keeps its column names)",
            differs="a statement that is not a SELECT/WITH but returns rows (`INSERT ... "
            "RETURNING`) also keeps `columns`/`rows`/`row_count` beside `affected_rows` (NoETL 5 "
            "drops the rows)",
        ),
        "http_body_keys": Source(
            "noetl/tools:src/tools/http.rs:212",
            "`json` is the body, else `form` (form-encoded), else `body` (a text as it is, "
            "anything else as JSON)",
            differs="noetlc also reads `payload` (the Python engines' key) when neither `json` "
            "nor `body` is given",
        ),
        "http_follows_redirects": Source(
            "noetl/tools:src/tools/http.rs:167",
            "the tool's one client is built with reqwest's default redirect policy (up to 10 "
            "redirects followed); `follow_redirects` (line 85, default true) is never read",
            differs="an explicit `follow_redirects: false` is honoured: the 3xx response is the "
            "result (NoETL 5 declares the key and follows anyway)",
        ),
        "http_result_keys": Source(
            "noetl/tools:src/tools/http.rs:320",
            "build_response_data: `{status_code, headers, data, body}`, `body` the same parsed "
            "payload as `data`",
        ),
        "http_empty_body": Source(
            "noetl/tools:src/tools/http.rs:211",
            "a body is set only from the config's `json`, `form` or `body`: none, no body",
        ),
        "noop_result": Source(
            "noetl/tools:src/tools/noop.rs:60",
            "the config's `result`, else `{status: ok, message}` (message defaults to `noop`)",
        ),
        "transfer_failure_result": Source(
            "noetl/tools:src/tools/transfer.rs:346",
            "a failure is an `Err(ToolError)`",
            differs="what NoETL 5's worker stores for it is not recorded: noetlc keeps the "
            "transfer document",
        ),
        "playbook_call_waits": Source(
            "noetl/tools:src/tools/playbook.rs:387",
            "without `return_step` and `return_result` the call returns `{status: started, "
            "execution_id, path, async: true}` as soon as the child is started",
        ),
        "playbook_return_step_status": Source(
            "noetl/tools:src/tools/playbook.rs:446",
            "with `return_step` the tool polls the child's `/status` until COMPLETED, FAILED or "
            "CANCELLED and returns that payload (server services/execution.rs:962 "
            "ExecutionStatus): the step's name is not read",
        ),
    },
)
