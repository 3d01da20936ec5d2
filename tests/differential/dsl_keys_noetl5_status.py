"""The status of each row of NoETL 5's table (a) (dsl_keys_noetl5.py): the cases under
tests/noetl5/cases/ that pin the key on noetlc against the Rust line the case cites, or the
rule that says why the key has no case. Derived, never typed per row: a case's own ``differs``
makes its row ``differs``; a rule holds for a whole struct or reader, checked by
test_dsl_keys_noetl5.py against the code it names (runtime_support.NEEDS, noetl5_tools)."""

from __future__ import annotations

from functools import cache

# (key, read by) -> the cases (area/name) that run the key absent and/or present on noetlc.
# The server's ToolSpec field and the tool's config struct are one key seen twice (the server
# copies it into the command, the tool deserializes it): both rows cite the same cases.
_HTTP = {
    "url": ("result_shapes/http_result_keys",),
    "method": ("defaults/http_method_default_get", "tool_args/http_json_body"),
    "headers": ("tool_args/http_headers",),
    "json": ("tool_args/http_json_body", "tool_args/http_json_wins_over_body"),
    "body": (
        "tool_args/http_body_text",
        "tool_args/http_body_mapping",
        "tool_args/http_json_wins_over_body",
    ),
    "form": ("tool_args/http_form_body",),
    "params": ("tool_args/http_query_params",),
    "response_type": (
        "tool_args/http_response_type_json",
        "tool_args/http_response_type_text",
        "tool_args/http_response_type_binary",
    ),
    "timeout_seconds": ("tool_args/http_timeout_seconds",),
    "follow_redirects": (
        "defaults/http_follows_redirects",
        "tool_args/http_follow_redirects_false",
    ),
}
_PG = {
    "query": ("result_shapes/pg_select", "tool_args/pg_command_alias"),
    "params": ("defaults/pg_params_default_empty", "tool_args/pg_params_list"),
    "as_objects": ("defaults/pg_as_objects_default", "tool_args/pg_as_objects_false"),
    "schema": ("tool_args/pg_schema_search_path",),
    "connection_string": ("tool_args/pg_connection_string",),
    "host": ("tool_args/pg_connection_fields", "defaults/pg_database_user_default_postgres"),
    "port": ("tool_args/pg_connection_fields", "defaults/pg_database_user_default_postgres"),
    "database": ("tool_args/pg_connection_fields", "defaults/pg_database_user_default_postgres"),
    "user": ("tool_args/pg_connection_fields", "defaults/pg_database_user_default_postgres"),
}
_DUCK = {
    "query": ("result_shapes/duck_select",),
    "params": ("tool_args/duck_params",),
    "as_objects": ("defaults/duck_as_objects_default", "tool_args/duck_as_objects_false"),
    "db_path": ("defaults/duck_in_memory", "tool_args/duck_db_path"),
}
_PY = {
    "code": (
        "tool_args/python_return_wrapped",
        "result_shapes/python_printed_result",
        "tool_args/python_code_wins_over_script",
    ),
    "script": (
        "defaults/python_script_source_inline",
        "tool_args/python_script_file",
        "tool_args/python_script_http",
        "tool_args/python_code_wins_over_script",
    ),
    "args": (
        "defaults/python_args_default_empty",
        "tool_args/python_args",
        "tool_args/python_input_alias",
    ),
    "cwd": ("tool_args/python_cwd",),
    "env": ("tool_args/python_env",),
    "python": ("tool_args/python_interpreter",),
    "timeout_seconds": ("tool_args/python_timeout_seconds",),
}
_NOOP = {
    "message": ("defaults/noop_default_result", "tool_args/noop_message"),
    "result": ("defaults/noop_default_result", "tool_args/noop_result"),
}
_PLAYBOOK = {
    "path": ("nested/playbook_return_result",),
    "payload": ("nested/playbook_payload_key", "nested/playbook_args_win_over_payload"),
    "args": ("nested/playbook_args_win_over_payload",),
    "parent_execution_id": ("nested/playbook_parent_execution_id",),
    "return_result": ("nested/playbook_fire_and_forget", "nested/playbook_return_result"),
    "return_step": ("nested/playbook_fire_and_forget", "nested/playbook_return_step_status"),
    "result_step": ("nested/playbook_return_result", "nested/playbook_result_step"),
    # A step's `timeout` is the worker's ToolConfig timeout (serde's flatten); a pipeline task
    # keeps it in the config PlaybookConfig reads: both places are pinned.
    "timeout": ("nested/playbook_timeout_step_level", "nested/playbook_timeout_pipeline_task"),
    "poll_interval": ("nested/playbook_poll_interval",),
}
_SHELL = {
    "command": ("tool_args/shell_command_one_process", "tool_args/shell_exit_code_fails"),
    "shell": ("defaults/shell_default_shell_sh", "tool_args/shell_named_shell"),
    "cwd": ("tool_args/shell_cwd",),
    "env": ("tool_args/shell_env",),
    "timeout_seconds": ("tool_args/shell_timeout_seconds",),
    "capture": ("tool_args/shell_capture_false",),
}
_LOOP = (
    "loop/loop_in_iterator_sequential",
    "loop/loop_parallel_runs_every_item",
    "loop/loop_empty_collection_walks_on",
)
_RULE_THEN = ("defaults/pipeline_retry_backoff_none", "result_shapes/pipeline_failed_shape")
_STEP_ARGS = (
    "step_args/step_args_reach_python",
    "step_args/step_args_templated",
    "step_args/tool_args_win_over_step_args",
)

CASES: dict[tuple[str, str], tuple[str, ...]] = {
    **{(k, "HttpConfig"): v for k, v in _HTTP.items()},
    **{(k, "PostgresConfig"): v for k, v in _PG.items()},
    **{(k, "DuckdbConfig"): v for k, v in _DUCK.items()},
    **{(k, "PythonConfig"): v for k, v in _PY.items()},
    **{(k, "NoopConfig"): v for k, v in _NOOP.items()},
    **{(k, "PlaybookConfig"): v for k, v in _PLAYBOOK.items()},
    **{(k, "ShellConfig"): v for k, v in _SHELL.items()},
    ("timeout", "ToolConfig"): ("tool_args/shell_timeout_tool_level",),
    ("password", "PostgresConfig"): (
        "tool_args/pg_password_from_template",
        "tool_args/pg_password_literal_refused",
    ),
    ("query", "TargetConfig"): ("tool_args/transfer_target_query_not_read",),
    ("kind", "ToolConfig"): ("tool_args/shell_command_one_process", "tool_args/python_args"),
    ("url", "ToolSpec"): _HTTP["url"],
    ("method", "ToolSpec"): _HTTP["method"],
    ("headers", "ToolSpec"): _HTTP["headers"],
    ("query", "ToolSpec"): _PG["query"] + _DUCK["query"],
    ("command", "ToolSpec"): ("tool_args/pg_command_alias",),
    ("params", "ToolSpec"): _PG["params"] + ("tool_args/pg_params_mapping",),
    ("code", "ToolSpec"): _PY["code"],
    ("args", "ToolSpec"): _PY["args"],
    ("kind", "ToolSpec"): ("result_shapes/pg_select", "tool_args/python_args"),
    ("apiVersion", "Playbook"): ("guards/when_true_runs",),
    ("kind", "Playbook"): ("guards/when_true_runs",),
    ("metadata", "Playbook"): ("guards/when_true_runs",),
    ("name", "Metadata"): ("guards/when_true_runs",),
    ("path", "Metadata"): ("nested/playbook_return_result",),
    ("workflow", "Playbook"): ("guards/when_true_runs",),
    ("workload", "Playbook"): (
        "workload/workload_template_is_data",
        "workload/workload_request_overrides",
    ),
    ("step", "Step"): ("guards/when_true_runs",),
    ("tool", "Step"): ("guards/when_true_runs", "label_form/label_form_names_the_task"),
    ("when", "Step"): ("guards/when_true_runs", "guards/when_false_skips_and_walks_on"),
    ("args", "Step"): _STEP_ARGS,
    ("args", "command input"): _STEP_ARGS,
    ("spec", "Step"): ("guards/next_mode_inclusive",),
    ("next_mode", "StepSpec"): (
        "guards/next_mode_exclusive_default",
        "guards/next_mode_inclusive",
        "guards/router_mode_overrides_step",
    ),
    ("next", "Step"): (
        "guards/arc_when_on_result",
        "guards/when_skip_chain",
        "guards/next_list_of_names_fans_out",
    ),
    ("step", "NextArc"): ("guards/next_mode_exclusive_default", "set/arc_set_binds_for_target"),
    ("when", "NextArc"): ("guards/next_mode_exclusive_default", "set/arc_set_binds_for_target"),
    ("set", "NextArc"): ("set/arc_set_binds_for_target",),
    ("arcs", "NextRouter"): ("guards/next_mode_exclusive_default", "guards/router_mode_inclusive"),
    ("spec", "NextRouter"): ("guards/router_mode_inclusive", "guards/router_mode_overrides_step"),
    ("mode", "NextRouterSpec"): (
        "guards/next_mode_exclusive_default",
        "guards/router_mode_inclusive",
        "guards/router_mode_overrides_step",
    ),
    ("step", "CanonicalNextTarget"): ("guards/arc_when_on_result", "guards/when_skip_chain"),
    ("when", "CanonicalNextTarget"): ("guards/arc_when_on_result", "guards/next_mode_inclusive"),
    ("args", "CanonicalNextTarget"): ("step_args/target_args_bound_in_next_step",),
    ("set", "Step"): ("set/step_set_reads_output",),
    ("loop", "Step"): _LOOP,
    ("in", "Loop"): _LOOP,
    ("cursor", "Loop"): ("loop/cursor_claim_drains", "loop/cursor_step_result"),
    ("kind", "CursorClaim"): ("loop/cursor_claim_drains", "loop/cursor_kind_default_postgres"),
    ("auth", "CursorClaim"): ("loop/cursor_claim_drains", "loop/cursor_auth_absent_refused"),
    ("claim", "CursorClaim"): (
        "loop/cursor_claim_drains",
        "loop/cursor_claim_required",
        "loop/cursor_claim_update_returning",
    ),
    ("iterator", "Loop"): _LOOP,
    ("spec", "Loop"): ("loop/loop_parallel_runs_every_item",),
    ("mode", "LoopSpec"): (
        "loop/loop_in_iterator_sequential",
        "loop/loop_parallel_runs_every_item",
    ),
    ("uri", "PythonScript"): ("tool_args/python_script_file", "tool_args/python_script_http"),
    ("source", "PythonScript"): (
        "defaults/python_script_source_inline",
        "tool_args/python_script_file",
    ),
    ("type", "PythonScriptSource"): (
        "defaults/python_script_source_inline",
        "tool_args/python_script_file",
        "tool_args/python_script_http",
    ),
    ("code", "PythonScriptSource"): ("defaults/python_script_source_inline",),
    ("endpoint", "PythonScriptSource"): ("tool_args/python_script_http",),
    ("method", "PythonScriptSource"): ("tool_args/python_script_http",),
    ("timeout", "PythonScriptSource"): ("tool_args/python_script_http",),
    **{
        (k, "TransferConfig"): ("tool_args/transfer_postgres_append",)
        for k in ("source", "target", "mode")
    },
    ("chunk_size", "TransferConfig"): ("tool_args/transfer_http_mapping_data_path",),
    **{
        (k, "SourceConfig"): ("tool_args/transfer_http_mapping_data_path",)
        for k in ("url", "method", "headers", "data_path")
    },
    ("mapping", "TargetConfig"): ("tool_args/transfer_http_mapping_data_path",),
    **{
        (k, "SourceConfig"): ("tool_args/transfer_postgres_append",)
        for k in ("type", "query", "connection")
    },
    **{
        (k, "TargetConfig"): ("tool_args/transfer_postgres_append",)
        for k in ("type", "table", "connection")
    },
    ("workbook", "Playbook"): (
        "workbook/workbook_task_input_merged",
        "workbook/workbook_unknown_action_refused",
    ),
    ("name", "WorkbookTask"): ("workbook/workbook_task_input_merged",),
    ("name", "tool (extra keys)"): (
        "workbook/workbook_task_input_merged",
        "workbook/workbook_unknown_action_refused",
        "label_form/flat_name_labels_the_task",
    ),
    ("tool", "WorkbookTask"): ("workbook/workbook_task_input_merged",),
    ("eval", "ToolSpec"): ("guards/tool_eval_block_not_acted_on",),
    **{
        (k, "EvalCondition"): ("guards/tool_eval_block_not_acted_on",)
        for k in ("expr", "do", "attempts", "backoff", "delay", "set_vars", "target")
    },
    **{(k, "EvalElse"): ("guards/tool_eval_block_not_acted_on",) for k in ("do", "set_vars")},
    ("auth", "ToolSpec"): ("result_shapes/pg_select",),
    ("auth", "ToolConfig"): ("result_shapes/pg_select",),
    ("timeout", "StepSpec"): ("defaults/step_spec_timeout_not_applied",),
    ("on_error", "StepSpec"): ("defaults/step_spec_on_error_not_read",),
    ("case", "step (yaml)"): ("guards/step_case_block_refused",),
    ("step", "step (yaml)"): ("guards/step_case_block_refused",),
    ("workflow", "playbook (yaml)"): ("guards/step_case_block_refused",),
    ("label", "PipelineTask"): ("label_form/label_form_names_the_task",),
    ("tool", "PipelineTask"): ("label_form/label_form_names_the_task",),
    ("kind", "pipeline task"): ("label_form/label_form_python_and_noop",),
    ("set", "pipeline task"): ("result_shapes/pipeline_task_set",),
    ("input", "pipeline task"): ("tool_args/pipeline_task_input_names",),
    ("args", "pipeline task"): ("result_shapes/pipeline_task_set",),
    ("command", "pipeline task"): ("tool_args/pipeline_task_command_deferred",),
    ("tasks", "TaskSequenceConfig"): ("label_form/label_form_names_the_task",),
    ("spec", "pipeline task"): _RULE_THEN,
    ("policy", "pipeline task spec"): _RULE_THEN,
    ("rules", "pipeline task policy"): _RULE_THEN,
    ("when", "pipeline task rule"): _RULE_THEN,
    ("then", "pipeline task rule"): _RULE_THEN,
    ("do", "pipeline rule then"): _RULE_THEN
    + (
        "tool_args/pipeline_jump_to",
        "tool_args/pipeline_break",
        "defaults/pipeline_rule_do_continue",
    ),
    ("to", "pipeline rule then"): ("tool_args/pipeline_jump_to",),
    ("delay", "pipeline rule then"): ("defaults/pipeline_retry_backoff_none",),
    ("else", "pipeline task rule"): _RULE_THEN,
    ("then", "pipeline rule else/then"): ("result_shapes/pipeline_failed_shape",),
    ("attempts", "pipeline rule then"): ("defaults/pipeline_retry_backoff_none",),
    ("backoff", "pipeline rule then"): ("defaults/pipeline_retry_backoff_none",),
    ("set", "pipeline rule else/then"): ("result_shapes/pipeline_context_updates",),
}

# read by -> the tool kind whose executor noetlc lacks (runtime_support.NEEDS has it, and
# `noetlc check` warns C515 at the tool)
SERVICE_KINDS: dict[str, str] = {
    "SnowflakeConfig": "snowflake",
    "ContainerConfig": "container",
    "ContainerToleration": "container",
    "ContainerVolume": "container",
    "ContainerVolumeMount": "container",
    "ContainerEnvVar": "container",
    "ContainerResources": "container",
    "McpConfig": "mcp",
    "NatsConfig": "nats",
    "SubscriptionConfig": "subscription",
    "PollConfig": "provider",
    "GuardSpec": "provider",
    "ProviderSpec": "provider",
    "ResultFetchConfig": "result_fetch",
    "ArtifactConfig": "artifact",
    "ArtifactInput": "artifact",
    "ScriptConfig": "script",
    "ScriptSource": "script",
    "JobConfig": "script",
    "ResourceRequirements": "script",
    "RhaiConfig": "rhai",
    "wasm plugin config": "wasm",
}
# read by -> the tool kind of noetl5_tools.TOOLS whose keys it holds (for the S116 rule)
TOOL_KINDS = {
    "PlaybookConfig": "playbook",
    "HttpConfig": "http",
    "PostgresConfig": "postgres",
    "DuckdbConfig": "duckdb",
    "PythonConfig": "python",
    "NoopConfig": "noop",
}
# readers that hold what NoETL writes itself: the server's command to the worker
INTERNAL = {
    ("args", "tool config"),
    "command args",
    "command input",
    "pipeline item",
    "Case",
    ("tool_config", "tool config"),
}
# readers whose fields no code of the commit acts on: tools' registry RetryConfig is parsed and
# copied between configs (artifact.rs, task_sequence.rs) but no loop reads max_retries or a delay
INERT = {
    "RetryConfig",
    ("retry", "ToolConfig"),
    ("vars", "Step"),
    ("vars", "Playbook"),
    ("desc", "Step"),
    ("labels", "Metadata"),
    ("libs", "ToolSpec"),
    ("sink", "WorkbookTask"),
    ("max_in_flight", "LoopSpec"),
    ("auth", "PythonScriptSource"),
    ("output_select", "ToolSpec"),
    ("connection", "ToolSpec"),
}
# read only to register or look up the playbook in NoETL's catalog (parser.rs extract_kind,
# extract_metadata): what a run does never depends on them
# read to classify a command for NoETL's own delivery bookkeeping (command.rs
# command_is_side_effecting, command_declares_sink)
BOOKKEEPING = {("sink", "tool config"), ("sink", "tool spec"), ("kind", "tool spec")}
CATALOG = {"metadata (yaml)", "playbook (yaml)", ("description", "Metadata")}
# reader -> the NOT_EXECUTED entry (read/noetl5_schema.py) of the S116 noetlc reports at it
S116_AT = {"FrameSpec": "LoopSpec.frame", ("frame", "LoopSpec"): "LoopSpec.frame"}
KEYCHAIN = {"KeychainDef", ("keychain", "Playbook")}

RULES: dict[str, str] = {
    "internal": "a key NoETL writes itself into the command the server hands the worker "
    "(`command.input`'s `tool_config`, `__stateless__`, `trigger_event_id`, a pipeline item's "
    "`tool_config`, the `args` of the `system/orchestrate` command; the worker's `cases` and their `Case` rules, which this server never "
    "writes), not playbook text",
    "service": "a field of a tool noetlc has no executor for (snowflake, container, mcp, nats, "
    "subscription, provider, result_fetch, artifact, script, rhai, wasm): `noetlc check` "
    "warns C515 at the tool (runtime_support.NEEDS says what to use instead)",
    "not-run (S116)": "a key noetlc reads but the Airflow runtime does not act on: `noetlc "
    "check` warns S116 at the key with the reason (noetl5_tools.py for a tool's keys, "
    "read/noetl5_schema.py NOT_EXECUTED for `loop.spec.frame`; docs/noetl5.md)",
    "cloud-auth": "a `keychain:` entry: a credential NoETL 5's server fetches from its keychain "
    "store or a cloud provider (token type, scope, region, residency, renewal); noetlc binds "
    "the entry's name (no unknown-name warning) and fetches nothing (airflow_plugin has no "
    "keychain resolver): credentials come from Airflow connections (`auth:`)",
    "inert": "parsed into a field no code of the commit reads (tools' `RetryConfig`, copied "
    "between configs and never acted on; a step's `vars` and `desc`, the playbook's `vars`, "
    "`metadata.labels`, a workbook task's `sink`, a python `script.source.auth` (python.rs: "
    "kept for forward compatibility), `loop.spec.max_in_flight` (a parallel loop "
    "dispatches every item at once; noetlc caps its mapped tasks with it, which changes no "
    "result), a tool's `libs`, `output_select` and `connection`, copied into the tool config and "
    "read by no tool): nothing a playbook can observe",
    "catalog": "read only where NoETL's server registers or looks up the playbook (parser.rs "
    "`extract_kind`, `extract_metadata`: `kind`, `metadata.name`/`path`/`description`): no "
    "step, template or routing decision reads it",
    "bookkeeping": "read by the worker to classify a command for NoETL's own delivery "
    "bookkeeping (a side-effecting task `kind`; an author's `sink: true`, which confirms a "
    "write of the execution's context for NoETL's write-behind cache): no result, template or "
    "routing decision depends on it; noetlc has no such cache (C516 says it ignores `sink`)",
    "open": "playbook text can set the key and no case pins it yet",
}


@cache
def _differs() -> dict[str, str]:
    """case id -> the semantics.md row it differs by ('' when the case matches)."""
    from tests.noetl5.cases_runner import load_cases

    return {cid: (case.get("differs") or {}).get("row", "") for cid, case in load_cases().items()}


def rule_of(row: dict) -> str:
    """The no-case rule that holds for the row's reader, or ``open``."""
    from noetl_compile.noetl5_tools import not_run

    key, reader = row["key"], row["read_by"]
    if reader in INTERNAL or (key, reader) in INTERNAL:
        return "internal"
    if reader in SERVICE_KINDS:
        return "service"
    if reader in TOOL_KINDS and not_run(TOOL_KINDS[reader], key):
        return "not-run (S116)"
    if reader in S116_AT or (key, reader) in S116_AT:
        return "not-run (S116)"
    if reader in KEYCHAIN or (key, reader) in KEYCHAIN:
        return "cloud-auth"
    if reader in INERT or (key, reader) in INERT:
        return "inert"
    if (key, reader) in BOOKKEEPING:
        return "bookkeeping"
    if reader in CATALOG or (key, reader) in CATALOG:
        return "catalog"
    return "open"


def status_of(row: dict) -> str:
    cases = CASES.get((row["key"], row["read_by"]))
    if not cases:
        return rule_of(row)
    differs = _differs()
    same = [c for c in cases if not differs[c]]
    other = [c for c in cases if differs[c]]
    parts = [f"matches: {', '.join(same)}"] if same else []
    parts += [f"differs: {differs[c]} ({c})" for c in other]
    return "; ".join(parts)
