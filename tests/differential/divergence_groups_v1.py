"""Groups of table (a)'s v1 cases (``dsl_key_specs_v1.py``, NoETL 58c2a16b) that differ.

``record_divergences.py`` lays these over its own maps: each case's group names the behaviour
that differs, a docs/semantics.md section 1 row says why noetlc keeps its own and which check
code reports it. Kept apart so that the lanes recording the three engines' rows do not edit one
mapping.
"""

from __future__ import annotations

_DUCKDB_KEYS = (
    "auto_secrets",
    "command_b64",
    "commands_b64",
    "credentials",
    "database",
    "db_type",
    "require_cloud_output",
)

V1_KEY_GROUPS: dict[str, str] = {
    # noetlc refuses what 58c2a16b fails or skips without a word.
    **{
        f"dsl_keys/{name}": "missing-field-refused"
        for name in (
            "v1_code_base64_present",
            "v1_iterator_collection_absent",
            "v1_iterator_element_absent",
            "v1_iterator_task_absent",
            "v1_step_key_absent",
            "v1_step_key_broker_absent",
            "v1_step_name_present",
            "v1_step_name_none_present",
            "v1_steps_list_present",
            "v1_steps_none_present",
            "v1_workbook_absent",
            "v1_workflow_list_absent",
            "v1_workflow_none_absent",
        )
    },
    **{
        f"dsl_keys/v1_iterator_{key}_{variant}": "v1-iterator-one-job"
        for key in ("collection", "element", "task", "task_with")
        for variant in ("absent", "present")
    },
    **{
        f"dsl_keys/v1_loop_{key}_{variant}": "v1-loop-block-dropped"
        for key in ("in", "iterator")
        for variant in ("absent", "present")
    },
    **{
        f"dsl_keys/{name}": "v1-first-step-not-action"
        for name in (
            "v1_control_next_absent",
            "v1_control_next_present",
            "v1_step_type_absent",
            "v1_step_type_none_absent",
            "v1_step_type_or_action_absent",
        )
    },
    "dsl_keys/v1_duckdb_command_b64_present": "v1-step-fields-dropped",
    "dsl_keys/v1_duckdb_commands_b64_present": "v1-step-fields-dropped",
    **{
        f"dsl_keys/v1_duckdb_{key}_{variant}": "duckdb-result-fields"
        for key in _DUCKDB_KEYS
        for variant in ("absent", "present")
        if not (key.endswith("_b64") and variant == "present")
    },
    **{
        f"dsl_keys/v1_save{name}_{variant}": "v1-save-outcome"
        for name in (
            "",
            "_python_code",
            "_python_script",
            "_http_url",
            "_http_method",
            "_http_endpoint",
            "_duckdb_commands",
            "_duckdb_sql",
            "_duckdb_table",
            "_postgres_dsn",
        )
        for variant in ("absent", "present")
    },
    "dsl_keys/v1_next_condition_present": "v1-arc-condition-refused",
    "dsl_keys/v1_task_args_absent": "v1-input-spellings",
    "dsl_keys/v1_task_args_present": "v1-input-spellings",
    **{
        f"dsl_keys/v1_transfer_{key}_absent": "v1-transfer-error-document"
        for key in ("source", "target", "type", "auth", "table", "mapping")
    },
    # The playbook-call keys (dsl_key_specs_v1_calls.py): every call that reaches the child.
    **{
        f"dsl_keys/v1_call_{key}_{variant}": "v1-nested-call-result"
        for key in ("resource_path", "path", "task", "version")
        for variant in ("absent", "present")
    },
    **{
        f"dsl_keys/v1_call_{key}_absent": "v1-nested-call-result"
        for key in ("playbook_path", "content", "playbook_content", "loop")
    },
    # The child named only by a key 58c2a16b's call does not send: noetlc refuses (S101).
    **{
        f"dsl_keys/v1_call_{key}_present": "missing-field-refused"
        for key in ("playbook_path", "content", "playbook_content")
    },
    "dsl_keys/v1_call_loop_present": "v1-call-loop-dropped",
}

V1_KEY_REASONS: dict[str, str] = {
    "v1-nested-call-result": "a v1 `type: playbook` call's result: 58c2a16b's playbook plugin "
    "posts the child's execution to the server and does not wait; the step's result is the "
    "execution record the server answers ({id, path, type: playbook, status: running, result: "
    "{status: success, message: 'Execution accepted ...'}, execution_id, ...}) and the parent "
    "goes on; noetlc waits for the child (its steps run inline, listed with the parent's) and "
    "returns its last step's result (D955, docs/semantics.md section 1)",
    "v1-call-loop-dropped": "a `loop: {in, iterator}` block on a v1 `type: playbook` step: "
    "58c2a16b's broker does not copy `loop` onto the job, so the call runs once, without the "
    "items; noetlc calls the child once per item (D945), and waits for each (D955, "
    "docs/semantics.md section 1)",
    "v1-loop-block-dropped": "a v1 step's `loop: {in, iterator}` block: 58c2a16b's broker copies "
    "a fixed list of step fields onto the job and `loop` is not on it (its own normalize_step "
    "would make it an iterator), so the step has no `type`: the first dispatch marks it "
    "completed without following its `next` and the execution stays RUNNING with no item run; "
    "noetlc runs the loop as the v1 whitepaper's form, or refuses one without `in`/`iterator` "
    "(D945, docs/semantics.md section 1)",
    "v1-first-step-not-action": "the first step of `start` is no action (no `type`, only "
    "`action`, or python without `code`): 58c2a16b's first dispatch (event/service/initial.py "
    "_finalize_control_step) marks it completed without following its `next`, and the execution "
    "stays RUNNING; noetlc passes through it and finishes the run (D947, docs/semantics.md "
    "section 1)",
    "v1-save-outcome": "a v1 step's `save` block: 58c2a16b's worker runs the save after the call "
    "and keeps its outcome out of the step's result (the envelope's `meta.save`); a failed save "
    "(no url, no statement, a refused request) is only `meta.save_error` and the step succeeds, "
    "and a python save without code runs a default; noetlc records the outcome as the result's "
    "`_sink` and a failed save fails the step (D946, docs/semantics.md section 1)",
    "v1-arc-condition-refused": "a v1 arc's `condition:`: 58c2a16b records it in its workflow "
    "table but routes on `when` only, so the arc is always taken; noetlc refuses the playbook "
    "(S114, naming `when`) rather than drop a guard (docs/semantics.md section 1)",
    "v1-transfer-error-document": "a v1 transfer call that fails (no `source`, `target`, "
    "`source.type`, `target.table` or `target.auth`, an http source without `mapping`): both "
    "fail the step and the run; 58c2a16b's result is `{error: 'Transfer failed: ...', "
    "traceback}`, noetlc's its error document `{status: error, error: {kind, type, message, "
    "...}}` or the transfer record with `status: error` (docs/semantics.md section 1)",
}
