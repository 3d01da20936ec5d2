"""Rebuild ``divergences.yaml`` from a recorded run of the differential test.

    NOETLC_DIFF_RECORD=/tmp/diff.yaml pytest tests/differential
    python -m tests.differential.record_divergences /tmp/diff.yaml

Keeps the reason of every case already listed whose fields did not change; a new or changed
entry gets the reason of its group (:data:`GROUP_REASONS`, matched in order on ``area`` and the
differing fields) and must be reviewed before committing. Cases that now match are dropped.
A partial run (``pytest tests/differential -k v1/``) rewrites only the cases it recorded.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from tests.differential.divergence_groups_v1 import V1_KEY_GROUPS, V1_KEY_REASONS
from tests.differential.runner import DIVERGENCES, load_divergences

# (group, reason, test on the recorded differences): first match wins. A group names the
# runtime behaviour; docs/semantics.md lists them with counts.
GROUP_REASONS: list[tuple[str, str, Any]] = [
    (
        "noetl-hangs",
        "NoETL never finishes this execution (stays RUNNING); noetlc finishes it (docs/semantics.md)",
        lambda d: "noetl running" in d.get("status", ""),
    ),
    (
        "noetlc-rejects",
        "noetlc compile refuses a playbook NoETL's runtime runs (a step without a tool: S107; an arc to a step that does not exist)",
        lambda d: "noetlc rejected" in d.get("status", ""),
    ),
    (
        "noetl-rejects-at-execute",
        "NoETL refuses the execution at POST /api/execute (HTTP 500): dc55c492 crashes on an empty entry loop (`cmd` unbound), which noetlc runs as a loop with no items (docs/semantics.md section 1); 138c10ed cannot render the entry loop's `in` (an undefined name), where noetlc compiles (T302 warns: a request payload may supply the name) and the run fails at that step before any call",
        lambda d: "noetl rejected" in d.get("status", ""),
    ),
    (
        "final-status-after-recovery",
        "NoETL reports an execution failed when any call errored, even if an arc recovered; noetlc reports success",
        lambda d: "noetl failed / noetlc completed" in d.get("status", ""),
    ),
    (
        "routing-after-error",
        "NoETL follows a failed step's unconditional/matching arcs (call.error routes); noetlc stops at the failed step",
        lambda d: (
            any(k.startswith("steps_ran") and "noetl" in v for k, v in d.items())
            and not any("rejected" in v for v in d.values())
        ),
    ),
    (
        "entry-step",
        "entry step: NoETL starts at workflow[0] (or executor.spec.entry_step); noetlc at `start`",
        lambda d: False,
    ),
    (
        "loop-iteration-references",
        "a canonical loop step's `results`: NoETL (138c10ed) keeps one result-store reference record per iteration ({status: COMPLETED, context: <flattened extract>, reference}) and hands templates those records (`r.field` fails); noetlc keeps the iteration results themselves, as NoETL's docs describe them (docs/semantics.md section 1). stats, omitted_results_count and the 128-result bound are NoETL's",
        lambda d: any(
            "'status': 'COMPLETED', 'context'" in v or "'status': 'COMPLETED', 'reference'" in v
            for v in d.values()
        ),
    ),
    (
        "case-v2-loop-exit-event",
        "a case-v2 loop step: NoETL (dc55c492) records a step.exit per iteration, so the step's last step.exit carries the last iteration's result, while `{{ step }}` downstream is the aggregate {results, stats} (the cases' downstream steps show it); noetlc's step result is that aggregate (docs/semantics.md section 1)",
        lambda d: any(
            k.startswith("results.") and " / noetlc {'results'" in v and "noetl {'stats'" not in v
            for k, v in d.items()
        ),
    ),
    (
        "whole-result-render",
        "`{{ step }}` rendered whole: NoETL hands the result-store envelope (ref/_ref) or '' for a failed step; noetlc the result",
        lambda d: any("<result-ref>" in v or "{'seen': ''}" in v for v in d.values()),
    ),
    (
        "python-error-result",
        "a sequential loop's item fails: NoETL (138c10ed) issues no further item after the failing one and records its error document {id, status: error, error: <text>} as the loop step's result; noetlc runs every item (mapped instances Airflow starts on its own, in no index order under dag.test()) and fails the loop step's task (by design, docs/semantics.md section 1)",
        lambda d: any("'status': 'error'" in v for v in d.values()),
    ),
    (
        "step-context-alias",
        "`{{ step.context.x }}` resolves in NoETL (a plain dict result gets a `context` alias); noetlc keeps the template text",
        lambda d: any("context" in v and ("'none'" in v or "{{" in v) for v in d.values()),
    ),
    (
        "python-none-result",
        "`result = None`: NoETL's result handler stores the placeholder {_value: None} (and the worker adds its command_id) as the step's result; noetlc keeps None, the value the code set (docs/semantics.md section 1)",
        lambda d: any("'_value'" in v for v in d.values()),
    ),
    (
        "render-coercion",
        "a rendered 'true'/'false' string: NoETL coerces it to a bool (engine render); noetlc keeps the string",
        lambda d: any("'bool'" in v for v in d.values()),
    ),
    (
        "ctx-contents",
        "ctx: NoETL's variables also hold every step's result (as its result-store envelope: ref, _ref, data, status, context) and, after a loop, its iterator and loop_index; noetlc's ctx holds the workload, the payload and `set` writes only",
        lambda d: any("'ctx'" in v for v in d.values()),
    ),
]


# Cases whose group the text of their differences does not tell.
CASE_GROUPS = {
    "loops/nested_loop_results_downstream": "loop-iteration-references",
    "loops/parallel_max_in_flight_4": "loop-done-race",
    "loops/result_cap_128_items": "loop-done-race",
    "loops/result_cap_130_items": "loop-done-race",
    "loops/result_cap_140_items": "loop-done-race",
    "python_results/result_proxy_context": "step-context-alias",
    "python_results/mark_completed_context_alias": "step-context-alias",
    "case_v2/two_branches": "unmarked-case-v2",
    "case_v2/first_step_not_start": "unmarked-case-v2",
    "case_v2/case_then_set_ctx": "case-v2-context",
    "case_v2/vars_in_ctx_probe": "case-v2-context",
    "case_v2/result_from": "whole-result-render",
    "case_v2/loop_string_in": "unmarked-case-v2",
    "case_v2/case_error_no_route": "unmarked-case-v2",
    "final_status/recovery_chain_raise": "recovery-runs-to-end",
    "final_status/recovery_chain_status_error": "recovery-runs-to-end",
    "final_status/recovery_chain_zero_div": "recovery-runs-to-end",
    "ctx/arc_set_writes": "ctx-step-envelope",
    "ctx/set_writes": "ctx-step-envelope",
    "ctx/step_result_in_ctx": "ctx-step-envelope",
    "ctx/ctx_after_loop": "loop-iteration-references",
    "python_results/none": "python-none-result",
    "pipelines/ctx_set_in_pipeline_rule": "pipeline-set-text",
    "pipelines/results_by_task_name": "pipeline-result-fields",
    "dsl_keys/rule_then_without_do": "rule-then-needs-do",
    "references/pipeline_last_task_promoted": "pipeline-result-fields",
    "references/pipeline_last_task_downstream": "pipeline-result-fields",
    "policies/break_rule": "pipeline-result-fields",
    "pipelines/status_error_task": "failed-step-result",
    "policies/backoff_exponential_delay": "failed-step-result",
    "policies/backoff_linear_delay": "failed-step-result",
    "policies/backoff_none_delay": "failed-step-result",
    "policies/pipeline_task_retry_counts": "failed-step-result",
    "policies/retry_on_status_error_dict": "failed-step-result",
    "v1/iterator_basic": "v1-iterator-one-job",
    "v1/iterator_result_length": "v1-iterator-one-job",
    "v1/iterator_empty": "v1-iterator-one-job",
    "v1/iterator_then_step": "v1-iterator-one-job",
    "v1/iterator_where_limit": "v1-iterator-one-job",
    "v1/iterator_literal_list": "v1-iterator-one-job",
    "v1/iterator_order_by": "v1-iterator-one-job",
    "v1/iterator_order_by_limit": "v1-iterator-one-job",
    "v1/iterator_where_dicts": "v1-iterator-one-job",
    "v1/start_is_action": "v1-with-renders-text",
    "v1/step_data_key": "v1-input-spellings",
    "v1/error_when_route": "v1-error-stops-run",
    "v1/python_result_no_main": "v1-main-required",
    "v1/next_data_params": "v1-with-renders-text",
    "v1/python_scalar_result": "v1-with-renders-text",
    "v1/next_with_params": "v1-input-spellings",
    "v1/when_result_alias": "v1-branch-not-taken-hangs",
    "v1/when_step_true": "v1-branch-not-taken-hangs",
    "v1/when_step_false": "v1-branch-not-taken-hangs",
    "v1/when_then_else": "v1-then-else-dropped",
}
EXTRA_REASONS = {
    "v1-iterator-one-job": "a v1 `type: iterator` step: NoETL (58c2a16b) runs every item inside one worker job (one action event: calls 1, an empty collection included) and `{{ step }}` is the plain list of item results (a downstream `with` rendering it whole sees {result: [...]}); noetlc runs one tool call per item and the loop result is {results, stats, omitted_results_count}, one record for every dialect (docs/semantics.md section 1)",
    "v1-with-renders-text": "a v1 `with` / arc `data` value that is one whole template (`{{ a.x }}`): NoETL's v1 worker (58c2a16b) renders it to text ('5', '7'); noetlc keeps the value's type (5, 7), as the later engines do (docs/semantics.md section 1)",
    "v1-input-spellings": "v1 argument spellings: NoETL 58c2a16b binds a step's arguments from `args`, `with`, `payload` and `input` (recorded: dsl_keys/v1_python_args_present, v1_python_input_present, v1_python_payload_present), not from a step's `data` (dropped on 2025-10-19, f12c9a11), and an arc's from `data`/`input` only (an arc's `with` lands in the target's context), so `def main(v)` fails; noetlc also accepts a step's `data` and an arc's `with`, spellings the v1 whitepaper used (docs/semantics.md section 1)",
    "v1-error-stops-run": "a v1 step whose code raises, with an arc whose `when` addresses the failure: NoETL 58c2a16b fails the execution at the first failed action (step_failed, execution_failed) and takes no arc; noetlc takes the arc that addresses the failure, as the v1 whitepaper's error routing does, and the run completes (docs/semantics.md section 1)",
    "v1-main-required": "v1 python code that sets `result` and defines no `main`: NoETL 58c2a16b fails it ('Main function must be defined in Python task.'); noetlc runs it, as the later engines do (docs/semantics.md section 1)",
    "v1-branch-not-taken-hangs": "a v1 conditional `next`: NoETL's broker (58c2a16b) finalizes an execution only when every typed step has completed, so the branch not taken keeps it RUNNING (and a `with` value renders as text, 'True'/'False', where `not a.flag` is then false); noetlc ends the run when the branch taken ends, with typed values (docs/semantics.md section 1)",
    "v1-then-else-dropped": "v1 `next: [{when, then: [...]}, {else: [...]}]`: NoETL's broker at 58c2a16b reads only `step` of a `next` entry, so neither block runs and the execution stays RUNNING; noetlc follows the v1 whitepaper's blocks (first match wins) (docs/semantics.md section 1)",
    "case-v2-unmarked-error-next": "a raised error with a plain `next`: NoETL's case-v2 engine (dc55c492) stops at the failed step; this playbook carries no case-v2 mark, so noetlc reads it as canonical, whose engine (138c10ed) goes on along the arc (final_status/unconditional_next_after_raise); `--dialect case-v2` stops",
    "unmarked-case-v2": "recorded on the case-v2 engine (dc55c492) but written without a mark of that generation (no `case`, `vars`, `sink`, step `args`, list `retry`): noetlc reads it as canonical and follows the canonical engine (138c10ed), because the same shapes are recorded on that engine with canonical outcomes (final_status/join_reached_twice, final_status/two_branch_one_fails); `--dialect case-v2` ends it as dc55c492 did (docs/semantics.md section 1)",
    "recovery-runs-to-end": "a step after a recovery step: NoETL marks the execution failed at the error and refuses the later claims (a race), so the step after the recovery step never runs; noetlc runs the recovery chain to its end and ends the run failed (docs/semantics.md section 1)",
    "loop-done-race": "a parallel loop: NoETL's aggregate misses iterations that finished together (stats.total 123 of 128, 129 of 130, 136 of 140 items run), may issue the next step twice, and orders results by completion; noetlc counts every iteration once, in collection order, and runs the next step once (docs/semantics.md section 1)",
    "loop-non-list-in": "a string loop `in`: NoETL's case-v2 engine (dc55c492) runs it character by character; this playbook carries no case-v2 mark, so noetlc reads it as canonical, where a string is one item (`--dialect case-v2` runs it per character)",
    "case-v2-next-list": "case-v2 plain `next: [a, b]`: NoETL (dc55c492) runs every listed step; noetlc only the first",
    "case-v2-context": "case-v2 engine context (dc55c492): `ctx` is no name in its render context (`{{ ctx.k | default(..) }}` fails and stays text, `{{ ctx }}` renders '' in the python tool) and a `then` with a `next` never applies its `set` (an if/elif chain); noetlc keeps `ctx` and applies that `set` (S117 warns), as the formal specification's case example (seeds/spec_case_sink) and the corpus's stated outcomes (vars_test/test_vars_block, variable_lifecycle_example) need (by design, docs/semantics.md section 1)",
    "case-v2-result-from": "case-v2 `then.result.from`: NoETL keeps the tool's result; noetlc stores the `from` text itself",
    "failed-step-result": "a step that fails the run: NoETL stores its result (a pipeline's {status: failed, _prev, results, ctx, failed_task, error}); noetlc pushes no XCom for the failed Airflow task",
    "pipeline-set-text": "a pipeline rule's `set`: NoETL's worker renders the value to text ('7'), and its engine's sync of the pipeline's ctx into the execution variables (engine.py: 'Synced ctx variable from task sequence') finds no ctx in the reference-only event, so later steps render `{{ ctx.x }}` as ''; noetlc keeps the value (7), as NoETL's step and arc `set` do, and later steps read it, as the engine intends (docs/semantics.md section 1)",
    "ctx-step-envelope": "`{{ ctx }}` rendered whole: NoETL's `ctx.<step>` is the step's result-store envelope (the result's keys plus ref, _ref, data, status, context, reference); noetlc's is the result itself, the value `{{ step }}` gives (`{{ ctx.<step>.<field> }}` reads the same in both; docs/semantics.md section 1)",
    "transfer-failure-result": "a transfer call that fails (a source with no `tool`/`kind`/`type`; an http source into postgres without `mapping`, whose records' columns the table lacks): both engines fail the step and the run, but 138c10ed's stored result is only the worker's {command_id} (the error is in the event), where noetlc's is its error document (status, error: kind, type, message; the rows transferred so far): a result that says nothing of the failure is not copied (by design, docs/semantics.md section 1)",
    "pipeline-result-fields": "a field of a pipeline step's result (`{{ step.status }}`, `{{ step.results }}`): NoETL hands templates the result-store envelope, whose `context` flattens the record, so it renders ''; noetlc the field",
}

# Tool cases (cases/tools_*): groups the text of their differences does not tell.
CASE_GROUPS.update(
    {
        "tools_duckdb/duckdb_select": "duckdb-result-fields",
        "tools_duckdb/duckdb_create_insert": "duckdb-result-fields",
        "tools_duckdb/duckdb_error_arc": "duckdb-result-fields",
        "tools_postgres/pg_failure_after_insert": "one-transaction-per-call",
        "tools_http/http_bearer_header": "literal-secret-refused",
        "tools_transfer/transfer_bad_source_error_arc": "transfer-cursor-error-text",
        "tools_case_v2/v2_http_case_on_status": "case-v2-response-in-case",
        "tools_case_v2/v2_case_sink_postgres": "case-v2-sink-args",
        "dsl_keys/transfer_source_type_absent": "transfer-failure-result",
        "dsl_keys/transfer_target_mapping_absent": "transfer-failure-result",
        "dsl_keys/c2_http_args_headers_present": "case-v2-http-args-headers",
        "dsl_keys/c2_postgres_pool_present": "case-v2-pool-without-timeout",
        "dsl_keys/c2_transfer_source_type_absent": "transfer-fails-before-copy",
        "dsl_keys/c2_transfer_target_absent": "transfer-fails-before-copy",
        "dsl_keys/c2_transfer_target_mapping_absent": "transfer-fails-before-copy",
        **{
            f"dsl_keys/c2_then_collect_{key}_{variant}": "case-v2-collect-empty"
            for key in ("strategy", "path", "into")
            for variant in ("absent", "present")
        },
        **{
            f"dsl_keys/c2_sink_{key}_{variant}": "case-v2-sink-summary"
            for key in ("tool", "tool_kind", "tool_text")
            for variant in ("absent", "present")
        },
        # A sink with no `tool` goes to the event log: its render error costs no row on
        # dc55c492, where only the summary differs.
        "dsl_keys/c2_sink_error_tool_absent": "case-v2-sink-summary",
        "dsl_keys/c2_sink_error_tool_present": "case-v2-sink-error-swallowed",
        "tools_case_v2/v2_case_sink_write_fails": "case-v2-sink-error-swallowed",
        "tools_case_v2/v2_case_sink_text_without_auth": "case-v2-sink-error-swallowed",
        "dsl_keys/c2_sink_error_tool_shape_absent": "case-v2-sink-error-swallowed",
        "dsl_keys/c2_sink_error_tool_shape_present": "case-v2-sink-error-swallowed",
        "dsl_keys/c2_auth_spec_tool_other_present": "case-v2-auth-service",
        "dsl_keys/c2_transfer_source_absent": "transfer-fails-before-copy",
        "dsl_keys/c2_transfer_target_table_absent": "transfer-fails-before-copy",
        "dsl_keys/c2_transfer_target_auth_absent": "transfer-fails-before-copy",
    }
)
# Table (b)'s cases (cases/template_names): a name read as NoETL binds it, grouped by the
# behaviour that differs after it.
CASE_GROUPS.update(
    {
        "template_names/loop_and_iter_fields": "loop-iteration-references",
        "template_names/step_result_by_name_dict": "whole-result-render",
        "template_names/step_result_by_name_list": "whole-result-render",
        "template_names/step_result_by_name_scalar": "whole-result-render",
        "template_names/v1_step_result_by_name_dict": "v1-input-spellings",
        "template_names/v1_step_result_by_name_list": "v1-input-spellings",
        "template_names/v1_step_result_by_name_scalar": "v1-input-spellings",
        "template_names/v1_work_workload_context_alias": "v1-with-renders-text",
        "template_names/v2_result_in_case_dict": "case-v2-context",
        "template_names/v2_vars_workload_bare_alias": "unmarked-case-v2",
    }
)
# Table (b)'s generated cases (template_name_rows.yaml's probes), by probe: the case names are
# <probe>_<result kind>, so a probe's group covers each of its kinds that differs.
TEMPLATE_PROBE_GROUPS = {
    "c_event_fields": "template-event-in-input",
    "c_event_keys": "template-event-in-input",
    "c_event_payload": "template-event-in-input",
    "s_event_keys": "template-event-in-input",
    "s_event_payload": "template-event-in-input",
    "c_output_keys": "template-output-in-input",
    "c_output_context": "output-result-store-record",
    "c_output_ref": "output-result-store-record",
    "c_output_own_key": "template-output-view-fields",
    "c_output_data_failed": "template-output-view-fields",
    "c_loop_fields": "template-loop-context-fields",
    "s_loop": "template-loop-context-fields",
    "c_step_by_name": "template-failed-step-name",
    "w_error": "canonical-case-next-not-issued",
    "w_event": "canonical-case-next-not-issued",
    "w_http_status": "canonical-case-next-not-issued",
    "w_output_data": "canonical-case-next-not-issued",
    "w_output_error": "canonical-case-next-not-issued",
    "w_output_ref": "canonical-case-next-not-issued",
    "w_output_status": "canonical-case-next-not-issued",
    "w_render_context": "canonical-case-next-not-issued",
    "s_step_by_name": "case-v2-step-name-in-args",
    "s_error": "case-v2-case-rules-on-failure",
    "s_response": "case-v2-case-rules-on-failure",
    "s_result": "case-v2-case-rules-on-failure",
}
CASE_GROUPS["template_names/b_aliases_dict"] = "v1-branch-not-taken-hangs"
CASE_GROUPS["template_names/b_execution_id_dict"] = "v1-branch-not-taken-hangs"
for _probe in ("i_item", "i_index", "i_batch_parent_work"):
    CASE_GROUPS[f"template_names/{_probe}_dict"] = "v1-iterator-one-job"
# dc55c492 refuses a list or scalar python result outright (the row below), whatever the probe.
for _probe in ("s_step_by_name", "s_response", "s_result"):
    for _kind in ("list", "scalar"):
        CASE_GROUPS[f"template_names/{_probe}_{_kind}"] = "case-v2-non-dict-result"
for _probe, _group in TEMPLATE_PROBE_GROUPS.items():
    for _kind in ("dict", "list", "scalar", "failed"):
        CASE_GROUPS.setdefault(f"template_names/{_probe}_{_kind}", _group)
EXTRA_REASONS.update(
    {
        "template-event-in-input": "`event` in a tool input: NoETL renders a step's input when it issues the command, with `event` = {name: command_creation, step: <the step issued>, payload: {}, timestamp}; noetlc binds the same (profile field input_event_bound), so a case listed here is a regression (docs/semantics.md section 6)",
        "template-output-in-input": "`output` in a tool input: 138c10ed binds its output view {data, error, ref, status} of the command being issued; noetlc binds the same (profile field input_output_view), so a case listed here is a regression (docs/semantics.md section 6)",
        "template-output-view-fields": "an arc guard's `output` after a failed call (138c10ed _build_output_view): with no step result kept for the failed call, NoETL's `output.data` is the worker's result-store record's `context` (a mapping); noetlc has no result store and its `output.data` is none (D944; by design, docs/semantics.md section 1)",
        "template-loop-context-fields": "a loop item's `loop`/`iter`: NoETL renders the item's templates before its counter follows the item (the recorded item read `loop.first` false, `loop.index` 0) and `iter` also holds its `loop_event_id`; the step's recorded result is the last iteration's, noetlc's the aggregate (templates read the aggregate on both); noetlc's counter follows the item (D948; by design, docs/semantics.md section 1)",
        "template-failed-step-name": "a failed step's name in a later input: 138c10ed leaves it undefined (no step result is kept for a failed call); noetlc binds the failed step's error document, which a recovery step reads (D950; by design, docs/semantics.md section 1)",
        "canonical-case-next-not-issued": "a `case` rule with `then.next` in a playbook whose only case-v2 mark is `case` (recorded on the canonical engine, 138c10ed): its worker evaluates the rule (build_eval_context) and reports `case.evaluated`, but no server code handles that event, so no command follows, neither branch runs and the run completes after the step; noetlc reads `case` as case-v2 and takes the branch, as dc55c492 does: a rule that routes nowhere is an engine defect, not copied (D941; by design, docs/semantics.md section 1)",
        "output-result-store-record": "`output.ref`/`output.context` in a canonical arc guard: 138c10ed's output view (_build_output_view) takes them from the worker's result-store record (`reference`, `context`), a mapping after every call, failed or not; noetlc keeps results in XCom, has no such record and binds both to none: the value is NoETL's storage, not the step's data (D944; by design, docs/semantics.md section 1)",
        "case-v2-step-name-in-args": "a step's name in a case-v2 `args` value: dc55c492's value is not the step's result (the comparison is false) and arrives as text ('False'); noetlc binds the result and keeps the type, as the engine does in its other places (D949; by design, docs/semantics.md section 1)",
        "case-v2-case-rules-on-failure": "case-v2 case rules on `error`/`response`/`result`: dc55c492 evaluates a step's rules on more than one of its events (both branches run after a failed call, or one twice) and completes a run whose call failed; noetlc takes the first rule that holds, once, and ends a run whose failed call no rule routes failed: a branch run twice is an engine defect, not copied (D943; by design, docs/semantics.md section 1)",
        "case-v2-non-dict-result": "a case-v2 python step whose result is a list or a scalar: dc55c492's worker cannot report it (POST /api/events answers 422 three times), the call fails and the run ends failed; noetlc keeps the value, as 138c10ed does: a result the engine's event schema refuses is a defect, not copied (D942; by design, docs/semantics.md section 1)",
    }
)
# Table (a)'s cases (cases/dsl_keys): a key absent or present, grouped by the behaviour that
# differs.
CASE_GROUPS.update(
    {
        "dsl_keys/arc_step_absent": "missing-field-refused",
        "dsl_keys/python_code_absent": "missing-field-refused",
        "dsl_keys/c2_python_code_absent": "missing-field-refused",
        "dsl_keys/duckdb_database_absent": "duckdb-result-fields",
        "dsl_keys/duckdb_database_present": "duckdb-result-fields",
        "dsl_keys/c2_duckdb_database_absent": "duckdb-result-fields",
        "dsl_keys/c2_duckdb_database_present": "duckdb-result-fields",
        "dsl_keys/http_headers_present": "literal-secret-refused",
        "dsl_keys/http_timeout_present": "http-error-document",
        "dsl_keys/c2_http_timeout_present": "http-error-document",
        "dsl_keys/v1_http_method_absent": "http-error-document",
        "dsl_keys/step_tool_absent": "noetl-hangs",
        "dsl_keys/v1_next_when_present": "v1-then-else-dropped",
        "dsl_keys/v1_http_params_present": "v1-step-fields-dropped",
        "dsl_keys/v1_http_timeout_present": "v1-step-fields-dropped",
        "dsl_keys/v1_code_b64_present": "v1-step-fields-dropped",
        "dsl_keys/http_url_absent": "missing-field-refused",
        "dsl_keys/c2_http_url_absent": "missing-field-refused",
        "dsl_keys/duckdb_query_absent": "missing-field-refused",
        "dsl_keys/c2_duckdb_query_absent": "missing-field-refused",
        "dsl_keys/duckdb_sql_absent": "missing-field-refused",
        "dsl_keys/duckdb_command_absent": "missing-field-refused",
        "dsl_keys/duckdb_query_present": "duckdb-result-fields",
        "dsl_keys/c2_duckdb_query_present": "duckdb-result-fields",
        "dsl_keys/duckdb_command_present": "duckdb-result-fields",
        "dsl_keys/duckdb_sql_present": "duckdb-result-fields",
        **{
            f"dsl_keys/c2_duckdb_{key}_{variant}": "duckdb-result-fields"
            for key in (
                "tool_database",
                "db_type",
                "auto_secrets",
                "require_cloud_output",
                "credentials",
                "gcs_credential",
            )
            for variant in ("absent", "present")
        },
        **{
            f"dsl_keys/v1_iterator_{key}_{variant}": "v1-iterator-one-job"
            for key in ("where", "limit", "order_by", "mode", "concurrency", "enumerate", "chunk")
            for variant in ("absent", "present")
        },
    }
)
EXTRA_REASONS.update(
    {
        "duckdb-result-fields": "duckdb step result: NoETL (138c10ed) returns {executed_commands, command_N_rows, command_N_sample (row lists), database_path, secrets_created} with its own execution id and a random task_id, and a failure as {id, status, duration, error: <text>, traceback}; noetlc returns the postgres tool's shape (status, rows as named columns, row_count, columns, statement_count) and the structured error (docs/semantics.md section 1)",
        "one-transaction-per-call": "a postgres call whose later statement fails: NoETL ran each statement in autocommit and kept what the earlier ones wrote (the table and its first row); noetlc runs the call's statements in one transaction and rolls all of them back (docs/semantics.md section 1)",
        "case-v2-pool-without-timeout": "a case-v2 postgres tool's `pool` without `timeout`: dc55c492's postgres tool keeps only the pool settings given (validate_pool_config drops the unset ones, models.py:109) and opens its AsyncConnectionPool with timeout=None (pool.py:94, where its comment says 'None = default 10s'), so taking a connection fails (`unsupported operand type(s) for +: 'float' and 'NoneType'`) and the step and the run fail; noetlc runs the call on its own connection, as without `pool` (D940, docs/semantics.md section 1)",
        "case-v2-http-args-headers": "`headers` in a case-v2 http step's `args`: dc55c492's worker hands the step's `args` to the http tool as its overrides (`task_with`), and the tool merges `args.headers` into its `headers` before it has set them, so the call fails (`cannot access local variable 'headers'`) and the run with it; noetlc merges the headers over the tool's and sends them, as both engines do with `args.params` (dsl_keys/c2_http_args_params_present matches) (D939, docs/semantics.md section 1)",
        "case-v2-sink-error-swallowed": "a case-v2 rule's `sink` that fails on dc55c492 (a write the database refuses, a kind its storage executor has no handler for, a `tool` neither text nor a mapping, a template of the sink that does not render): its worker catches the error (v2_worker_nats.py 1195-1210) and records only a sink.error event, or gets a {status: error} summary from the postgres sink and records sink.done, and the step and run complete with nothing written; noetlc fails the step on such a sink, and refuses a postgres sink without `auth` at compile (C503); an undefined name in its data stays text and is written with a TemplateWarning (D953, docs/semantics.md section 1)",
        "case-v2-auth-service": "a case-v2 postgres step whose `auth` mapping names another service (`tool`, `type` or `service`: dc55c492's auth_resolver.py 277-282): dc55c492's postgres tool then takes no connection field from the credential and fails the call ('Postgres connection is not configured'); noetlc connects with the Airflow connection the mapping names (D960, docs/semantics.md section 1)",
        "case-v2-sink-summary": "a case-v2 rule's `sink`: dc55c492's worker reports the sink's summary only in its sink.done event and keeps the call's result as the step's; noetlc writes the same rows and adds the summary to the step's result as `_sink` (D952, docs/semantics.md section 1)",
        "case-v2-collect-empty": "a case-v2 rule's `collect`: dc55c492's engine reads `strategy`/`path`/`into` but looks for the data in the call.done event's `response`/`result`, which its worker never sends, so it collects nothing and the step's result stays the call's; noetlc adds the collected values to the step's result under `into`, as the canonical engine's collect does (D951, docs/semantics.md section 1)",
        "transfer-fails-before-copy": "a case-v2 transfer that fails before it copies a row (no `source` or no `target`; a source with no `tool`/`kind`/`type`; a target without `table` or without `auth`; an http source into postgres without `target.mapping`): both engines fail the step and the run with dc55c492's worker result {error: 'Transfer failed: <text>', status: failed, error_type: ValueError} (profile field transfer_failure_result); the text is each engine's own: NoETL's `'source' configuration is required`, `'target' configuration is required`, `source.tool is required`, `Either target.table or target.query is required`, `target.auth is required` and, without a mapping, PostgreSQL's syntax error on `INSERT INTO t () VALUES ()` (it inserts no columns), noetlc's naming the missing keys and, without a mapping, the column the table lacks (it inserts each record's fields into the columns of the same name) (D938, docs/semantics.md section 1)",
        "transfer-cursor-error-text": "a failed postgres transfer source: the result document is NoETL's, but PostgreSQL's error text quotes the statement it ran: NoETL's plain SELECT, noetlc's server-side cursor (`DECLARE ... CURSOR FOR SELECT ...`, which streams the source in chunks) (docs/semantics.md section 1)",
        "case-v2-response-in-case": "a case-v2 `case` whose `when` reads `response.status_code` after a successful http call: NoETL (dc55c492) binds `response` (and `result`, `this`) in a case `when` to the worker's transport envelope {id, status, data: <http result>}, so `response.status_code` is undefined there (its worker offers the status as a bare `status_code`) and the rule is not taken; noetlc binds `response` to the step's result, the value `{{ step }}` gives downstream, and takes it (docs/semantics.md section 1)",
        "case-v2-sink-args": "a case-v2 `then.sink` written as the corpus seed writes it (`tool: {kind: postgres, table}` + `args`): NoETL (dc55c492) refuses it at run time ('postgres save requires table and mapping data', a sink.error event only), the run completes and nothing is written, and it replaces the step's result with its sink envelope; noetlc writes the row and keeps the http result (docs/semantics.md section 1)",
        "rule-then-needs-do": "a policy rule's `then` without `do`, or a pipeline `jump` without `to`: NoETL (138c10ed) fails the call at run time ('Policy rule then must have do field', 'Jump action missing to target'), takes the step's unconditional arc and ends the run failed; noetlc refuses the playbook at compile time (C514, at the rule): the same refusal, before anything runs (docs/semantics.md section 1)",
        "missing-field-refused": "a tool or arc without the field that gives it something to do: a python tool without `code`, an http tool without `url` or a duckdb tool without a statement fails its call at run time on NoETL (138c10ed, dc55c492), and an arc without `step` is dropped without a word (138c10ed completes the run without it); noetlc refuses the playbook at compile time at the construct (C501, C502, C504, S101) (docs/semantics.md section 1)",
        "http-error-document": "a failed http call's step result: NoETL returns its own error document (138c10ed `{id, status: error, error: 'Request error: '}`, the timeout's text empty; dc55c492 'Request error: timed out'; 58c2a16b a 4xx as `{url, data: <body>, headers, status_code, elapsed}`), noetlc the structured error `{status: error, error: {kind, type, message, code, retryable}}` (or `{id, status: error, data}` for a status error) that names what failed (docs/semantics.md section 1)",
        "v1-step-fields-dropped": "a v1 step key that never reaches the tool: NoETL 58c2a16b's broker copies a fixed list of step fields onto the job (initial.py, transitions.py) without `timeout` (the http plugin's 30 s applies) or `code_b64`/`code_base64` (the python plugin fails: 'No code provided'), and its http plugin takes the step's empty `data` map as the query before it looks at `params` (request.py: `{}` is not None), so `params` is never sent; noetlc applies each key, as the later engines do (D934, docs/semantics.md section 1)",
        "literal-secret-refused": "a literal secret in a header (`Authorization: Bearer ...`): noetlc compile refuses it (X601: secrets come from connections or the secrets tool); NoETL sends it (docs/semantics.md section 1)",
    }
)
# Table (a)'s canonical rows recorded by lane keysc (dsl_key_specs_canonical.py).
CASE_GROUPS.update(
    {
        **{
            f"dsl_keys/duckdb_{key}_{variant}": "duckdb-result-fields"
            for key in (
                "auto_secrets",
                "credentials",
                "database_file",
                "db_type",
                "gcs_credential",
                "require_cloud_output",
            )
            for variant in ("absent", "present")
        },
        **{
            f"dsl_keys/transfer_{key}_absent": "transfer-failure-result"
            for key in ("auth", "source", "table", "target", "url")
        },
        "dsl_keys/pipeline_rule_to_absent": "rule-then-needs-do",
        "dsl_keys/python_args_present": "python-tool-args-replaced",
        "dsl_keys/pipeline_task_name_present": "init-page-no-progress",
        **{
            f"dsl_keys/{name}": "tool-output-block"
            for name in (
                "output_select_absent",
                "output_select_present",
                "output_inline_max_bytes_present",
                "output_store_absent",
                "output_store_kind_present",
                "tool_output_present",
            )
        },
    }
)
EXTRA_REASONS.update(
    {
        "tool-output-block": "a canonical tool's `output:` block: NoETL (138c10ed) hands it to its result store, and without a `store` the step's stored result is only the worker's {command_id}, with `store: {kind: memory}` it cannot be read back (404), and `output.select` is refused at registration; noetlc ignores the block and the result is the tool's value (D935, by design, docs/semantics.md section 1)",
        "init-page-no-progress": "a pipeline `break` at its first task `init_page` with `paginate` and `fetch_page` after it and a `patient_count` in the workload: NoETL (138c10ed)'s task-sequence guard, written for one of its own pagination playbooks, fails the step (TASK_SEQUENCE_NO_PROGRESS); noetlc ends the pipeline as any break (D937, by design, docs/semantics.md section 1)",
        "python-tool-args-replaced": "a canonical python tool's `args`: NoETL (138c10ed)'s worker replaces it with the tool's `input` before the call, so a name only `args` binds is undefined and the call fails; noetlc binds it (D936, by design, docs/semantics.md section 1)",
    }
)

# Table (a)'s v1 rows recorded later (divergence_groups_v1.py).
CASE_GROUPS.update(V1_KEY_GROUPS)
EXTRA_REASONS.update(V1_KEY_REASONS)


# Table (a)'s nested-call rows (dsl_key_specs_nested.py).
CASE_GROUPS.update(
    {
        f"dsl_keys/nested_{key}_{variant}": "canonical-nested-call-result"
        for key in ("return_step", "timeout")
        for variant in ("absent", "present")
    }
)
EXTRA_REASONS["canonical-nested-call-result"] = (
    "a canonical `kind: playbook` call's result: NoETL (138c10ed) does not wait without "
    "`return_step` (the playbook plugin's start record {id, status: success, data: {execution_id, "
    "status: started, commands_generated}, execution_id, duration}); with it the worker polls the "
    "child every 2 s and returns the server's status document {execution_id, current_step, "
    "completed_steps, failed, completed, variables, ...}, or after `timeout` seconds without an "
    "end {status: started, execution_id, path, async: false}; noetlc waits for the child and "
    "returns its named (or last) step's result, as NoETL's playbook reference and its "
    "composition fixture read it (D954, by design, docs/semantics.md section 1)"
)


def group_of(case_id: str, found: dict[str, str]) -> tuple[str, str]:
    if case_id in CASE_GROUPS:
        group = CASE_GROUPS[case_id]
        reasons = {g: r for g, r, _ in GROUP_REASONS} | EXTRA_REASONS
        return group, reasons[group]
    if case_id.startswith("entry_step/"):
        return next((g, r) for g, r, _ in GROUP_REASONS if g == "entry-step")
    if case_id.startswith("ctx/") and "noetl running" not in found.get("status", ""):
        return next((g, r) for g, r, _ in GROUP_REASONS if g == "ctx-contents")
    for group, reason, test in GROUP_REASONS:
        if test(found):
            return group, reason
    return "unclassified", "differs from NoETL's engine; not yet analysed"


def rebuild(
    recorded: dict[str, dict[str, str]], values: dict[str, dict] | None = None
) -> dict[str, dict]:
    """Entries for the recorded cases; a listed case the recording does not hold (a partial run,
    `pytest -k v1/`) keeps its entry as long as the case exists."""
    from tests.differential.runner import load_cases

    old = load_divergences()
    cases = load_cases()
    out: dict[str, dict] = {
        case_id: entry
        for case_id, entry in old.items()
        if case_id not in recorded and case_id in cases
    }
    for case_id in sorted(recorded):
        fields = sorted(recorded[case_id] or {})
        if not fields:
            continue
        previous = old.get(case_id)
        known = {g for g, _, _ in GROUP_REASONS} | set(EXTRA_REASONS)
        pinned = (values or {}).get(case_id) or (previous or {}).get("values")
        if (
            previous
            and sorted(previous["fields"]) == fields
            and previous["group"] in known
            and CASE_GROUPS.get(case_id, previous["group"]) == previous["group"]
        ):
            out[case_id] = dict(previous, values=pinned)
            continue
        group, reason = group_of(case_id, recorded[case_id])
        out[case_id] = {"group": group, "fields": fields, "reason": reason, "values": pinned}
    return out


def main(argv: list[str]) -> int:
    recorded: dict[str, dict[str, str]] = {}
    values: dict[str, dict] = {}
    for doc in yaml.safe_load_all(Path(argv[0]).read_text(encoding="utf-8")):
        for case_id, entry in (doc or {}).items():
            # {differences, values} per case (older recordings: the differences alone)
            if isinstance(entry, dict) and "differences" in entry:
                recorded[case_id] = entry["differences"] or {}
                values[case_id] = entry.get("values") or {}
            else:
                recorded[case_id] = entry or {}
    out = dict(sorted(rebuild(recorded, values).items()))
    DIVERGENCES.write_text(
        "# Cases whose noetlc outcome differs from NoETL's engine today (see README.md).\n"
        "# Generated by record_divergences.py; reasons reviewed by hand.\n"
        + yaml.safe_dump(out, sort_keys=True, width=100),
        encoding="utf-8",
    )
    print(f"{len(out)} divergent cases listed ({len(recorded)} recorded in this run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
