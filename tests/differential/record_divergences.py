"""Rebuild ``divergences.yaml`` from a recorded run of the differential test.

    NOETLC_DIFF_RECORD=/tmp/diff.yaml pytest tests/differential
    python -m tests.differential.record_divergences /tmp/diff.yaml

Keeps the reason of every case already listed whose fields did not change; a new or changed
entry gets the reason of its group (:data:`GROUP_REASONS`, matched in order on ``area`` and the
differing fields) and must be reviewed before committing. Cases that now match are dropped.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

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
        "NoETL refuses the execution at POST /api/execute (dc55c492: no step named `start`, or an empty entry loop, which crashes it; 138c10ed: the entry loop's `in` names an undefined variable); noetlc runs it",
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
        "a loop item's python call fails: NoETL stops issuing items after the failing one and records its error document {id, status: error, error: <text>} as the loop step's result; noetlc runs every item and pushes no result",
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
    "case_v2/two_branches": "case-v2-next-list",
    "case_v2/case_then_set_ctx": "case-v2-context",
    "case_v2/next_args": "case-v2-context",
    "case_v2/vars_bare_in_args": "case-v2-context",
    "case_v2/vars_in_ctx_probe": "case-v2-context",
    "case_v2/result_from": "case-v2-result-from",
    "case_v2/loop_string_in": "loop-non-list-in",
    "case_v2/case_error_no_route": "case-v2-unmarked-error-next",
    "final_status/recovery_chain_raise": "recovery-runs-to-end",
    "final_status/recovery_chain_status_error": "recovery-runs-to-end",
    "final_status/recovery_chain_zero_div": "recovery-runs-to-end",
    "final_status/error_arc_uses_error_text": "undefined-name-render",
    "ctx/arc_set_writes": "ctx-step-envelope",
    "ctx/set_writes": "ctx-step-envelope",
    "ctx/step_result_in_ctx": "ctx-step-envelope",
    "ctx/ctx_after_loop": "loop-iteration-references",
    "python_results/none": "python-none-result",
    "pipelines/ctx_set_in_pipeline_rule": "pipeline-set-text",
    "pipelines/results_by_task_name": "pipeline-result-fields",
    "policies/break_rule": "pipeline-result-fields",
    "pipelines/status_error_task": "failed-step-result",
    "policies/backoff_exponential_delay": "failed-step-result",
    "policies/backoff_linear_delay": "failed-step-result",
    "policies/backoff_none_delay": "failed-step-result",
    "policies/pipeline_task_retry_counts": "failed-step-result",
    "policies/retry_on_status_error_dict": "failed-step-result",
}
EXTRA_REASONS = {
    "case-v2-unmarked-error-next": "a raised error with a plain `next`: NoETL's case-v2 engine (dc55c492) stops at the failed step; this playbook carries no case-v2 mark, so noetlc reads it as canonical, whose engine (138c10ed) goes on along the arc (final_status/unconditional_next_after_raise); `--dialect case-v2` stops",
    "recovery-runs-to-end": "a step after a recovery step: NoETL marks the execution failed at the error and refuses the later claims (a race), so the step after the recovery step never runs; noetlc runs the recovery chain to its end and ends the run failed (docs/semantics.md section 1)",
    "undefined-name-render": "`{{ error }}` in the step after a failed one, where no `error` is defined: NoETL's engine (StrictUndefined) cannot render it and keeps the text, then its python tool renders that text again with lenient Jinja, where an undefined name is ''; noetlc keeps the template text and reports a TemplateWarning naming the field (docs/semantics.md section 1)",
    "loop-done-race": "a parallel loop: NoETL's aggregate misses iterations that finished together (stats.total 123 of 128, 129 of 130, 136 of 140 items run), may issue the next step twice, and orders results by completion; noetlc counts every iteration once, in collection order, and runs the next step once (docs/semantics.md section 1)",
    "loop-non-list-in": "a string loop `in`: NoETL's case-v2 engine (dc55c492) runs it character by character; this playbook carries no case-v2 mark, so noetlc reads it as canonical, where a string is one item (`--dialect case-v2` runs it per character)",
    "case-v2-next-list": "case-v2 plain `next: [a, b]`: NoETL (dc55c492) runs every listed step; noetlc only the first",
    "case-v2-context": "case-v2 engine context (dc55c492): `ctx` is no name in its render context (the engine keeps `{{ ctx }}` as text and the python tool renders it ''; `{{ ctx.k | default(..) }}` fails and stays text), a `then` with a `next` never applies its `set` (an if/elif chain), a structural `next[].args` is dropped, and a filter expression that renders 'none' becomes None; noetlc's case-v2 context has `ctx`, applies `then.set` and passes `next[].args`",
    "case-v2-result-from": "case-v2 `then.result.from`: NoETL keeps the tool's result; noetlc stores the `from` text itself",
    "failed-step-result": "a step that fails the run: NoETL stores its result (a pipeline's {status: failed, _prev, results, ctx, failed_task, error}); noetlc pushes no XCom for the failed Airflow task",
    "pipeline-set-text": "a pipeline rule's `set`: NoETL's worker renders the value to text ('7'), and its engine's sync of the pipeline's ctx into the execution variables (engine.py: 'Synced ctx variable from task sequence') finds no ctx in the reference-only event, so later steps render `{{ ctx.x }}` as ''; noetlc keeps the value (7), as NoETL's step and arc `set` do, and later steps read it, as the engine intends (docs/semantics.md section 1)",
    "ctx-step-envelope": "`{{ ctx }}` rendered whole: NoETL's `ctx.<step>` is the step's result-store envelope (the result's keys plus ref, _ref, data, status, context, reference); noetlc's is the result itself, the value `{{ step }}` gives (`{{ ctx.<step>.<field> }}` reads the same in both; docs/semantics.md section 1)",
    "pipeline-result-fields": "a field of a pipeline step's result (`{{ step.status }}`, `{{ step.results }}`): NoETL hands templates the result-store envelope, whose `context` flattens the record, so it renders ''; noetlc the field",
}


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


def rebuild(recorded: dict[str, dict[str, str]]) -> dict[str, dict]:
    old = load_divergences()
    out: dict[str, dict] = {}
    for case_id in sorted(recorded):
        fields = sorted(recorded[case_id] or {})
        if not fields:
            continue
        previous = old.get(case_id)
        known = {g for g, _, _ in GROUP_REASONS} | set(EXTRA_REASONS)
        if (
            previous
            and sorted(previous["fields"]) == fields
            and previous["group"] in known
            and CASE_GROUPS.get(case_id, previous["group"]) == previous["group"]
        ):
            out[case_id] = previous
            continue
        group, reason = group_of(case_id, recorded[case_id])
        out[case_id] = {"group": group, "fields": fields, "reason": reason}
    return out


def main(argv: list[str]) -> int:
    recorded: dict[str, dict[str, str]] = {}
    for doc in yaml.safe_load_all(Path(argv[0]).read_text(encoding="utf-8")):
        recorded.update(doc or {})
    out = rebuild(recorded)
    DIVERGENCES.write_text(
        "# Cases whose noetlc outcome differs from NoETL's engine today (see README.md).\n"
        "# Generated by record_divergences.py; reasons reviewed by hand.\n"
        + yaml.safe_dump(out, sort_keys=True, width=100),
        encoding="utf-8",
    )
    print(f"{len(out)} divergent of {len(recorded)} recorded cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
