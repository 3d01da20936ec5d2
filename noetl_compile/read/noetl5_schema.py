"""NoETL 5's keys, object by object, as the reader (``noetl5.py``) checks them: the schema's
(noetl/noetl@3badb77a, ``noetl/core/dsl/playbook.schema.json``) and the local dialect's beyond
it, and for each key the reader accepts but the Airflow runtime does not execute, the reason
S116 gives. tests/test_noetl5_dsl.py walks the schema's property paths against ``SCHEMA_READ``
and ``NOT_EXECUTED``; ``schema.py`` builds the editor's JSON Schema from these tables."""

from __future__ import annotations

from .canonical import (
    ARC_KEYS,
    EXECUTOR_KEYS,
    EXECUTOR_SPEC_KEYS,
    LOOP_KEYS,
    LOOP_SPEC_KEYS,
    STEP_KEYS,
)
from .playbook import METADATA_KEYS, PlaybookReader

# Metadata is free-form in NoETL 5's schema (`additionalProperties: true`); these are the keys
# NoETL reads or its playbooks use. Another key is accepted unless it is one typo away from one.
METADATA_KEYS_5 = METADATA_KEYS | {"exposes_as_mcp", "namespace", "annotations", "catalog"}
# The local dialect's step keys beyond the schema's (the CLI's `Step` struct).
LOCAL_STEP_KEYS = {"vars", "when", "case"}
# What NoETL 5's server reads on a step beyond the canonical keys (orchestrate-core/src/
# playbook.rs Step, noetl/server@d9ec700c): the `when` guard and the `args` sent to the worker.
SERVER_STEP_KEYS = {"when", "args"}
# A local `case` block (the CLI's `CaseCondition`): a `when` (or a Rhai condition) and `then`.
LOCAL_CASE_KEYS = ("when", "rhai", "when_rhai", "then", "else")
STEP_SPEC_KEYS = ("policy", "timeout")
STEP_POLICY_KEYS = ("admit", "lifecycle", "failure", "emit")
NEXT_SPEC_KEYS_5 = ("mode", "on_no_match", "policy")
ON_NO_MATCH = ("complete", "quiet")
EXECUTOR_POLICY_KEYS = ("defaults", "results", "limits")
EXECUTOR_REQUIRES_KEYS = ("tools", "features")
FRAME_KEYS = (
    "max_rows",
    "max_seconds",
    "max_bytes",
    "lease_seconds",
    "heartbeat_seconds",
    "row_concurrency",
    "process",
    "verify_ipc",
    "retry_mode",
    "max_attempts",
)
LOOP_POLICY_KEYS = ("exec",)
OUTPUT_KEYS = (
    "store",
    "select",
    "accumulate",
    "inline_max_bytes",
    "preview_max_bytes",
    "scope",
    "as",
)
OUTPUT_STORE_KEYS = ("kind", "driver", "bucket", "prefix", "ttl", "compression", "credential")
STORE_KINDS = ("auto", "memory", "kv", "disk", "object", "s3", "gcs", "db", "duckdb", "eventlog")
# What a store kind of NoETL's result store needs beyond a worker's own memory and disk.
STORE_NEEDS = {
    "kv": "NoETL's NATS JetStream key-value bucket",
    "object": "NoETL's object store (an S3 or GCS bucket and its credential)",
    "s3": "an S3 bucket and its credential, written by NoETL's result store",
    "gcs": "a Google Cloud Storage bucket and its credential, written by NoETL's result store",
    "db": "NoETL's Postgres result table",
    "eventlog": "NoETL's event log (its server's Postgres)",
}
OUTPUT_ACCUMULATE_KEYS = (
    "enabled",
    "strategy",
    "merge_path",
    "manifest_as",
    "on_success",
    "on_error",
    "max_items",
)
OUTPUT_SCOPES = ("step", "execution", "workflow", "permanent")
# A local-dialect `next` list entry.
LOCAL_NEXT_ENTRY_KEYS = ("step", "when", "args", "then")
# Where a value names a scoped variable rather than a plain name (canonical `set`).
SCOPED_PREFIXES = ("ctx.", "iter.", "step.")

# The schema's objects and the key sets this reader checks them against. The schema's
# free-form objects (`additionalProperties: true`: StepSpec, TaskSpec, ToolSpec, metadata) list
# the keys it names; the test fails on a schema property missing here.
SCHEMA_READ: dict[str, frozenset[str]] = {
    "Playbook": frozenset(PlaybookReader.root_keys),
    "Step": frozenset(STEP_KEYS),
    "StepSpec": frozenset(STEP_SPEC_KEYS),
    "StepPolicy": frozenset(STEP_POLICY_KEYS),
    "AdmitPolicy": frozenset(("mode", "rules")),
    "NextRouter": frozenset(("spec", "arcs")),
    "NextSpec": frozenset(NEXT_SPEC_KEYS_5),
    "Arc": frozenset(ARC_KEYS),
    "Loop": frozenset(LOOP_KEYS),
    "LoopSpec": frozenset(LOOP_SPEC_KEYS),
    "LoopPolicy": frozenset(LOOP_POLICY_KEYS),
    "FramePolicy": frozenset(FRAME_KEYS),
    "CursorSpec": frozenset(("kind", "auth", "claim", "options")),
    "Executor": frozenset(EXECUTOR_KEYS),
    "ExecutorSpecFull": frozenset(EXECUTOR_SPEC_KEYS),
    "ExecutorPolicy": frozenset(EXECUTOR_POLICY_KEYS),
    "ExecutorRequires": frozenset(EXECUTOR_REQUIRES_KEYS),
    "ToolSpec": frozenset(("kind", "spec", "output")),
    "TaskSpec": frozenset(("timeout", "policy")),
    "TaskPolicy": frozenset(("mode", "on_unmatched", "rules", "before", "after", "finally")),
    "ToolOutput": frozenset(OUTPUT_KEYS),
    "OutputStore": frozenset(OUTPUT_STORE_KEYS),
    "OutputSelect": frozenset(("path", "as")),
    "OutputAccumulate": frozenset(OUTPUT_ACCUMULATE_KEYS),
    "WorkbookTask": frozenset(("name", "tool")),
}
# Schema keys read but not executed by the Airflow runtime: S116 with the reason, at the key.
NOT_EXECUTED: dict[str, str] = {
    "Executor.requires": "the Airflow runtime does not negotiate capabilities; C515 names the "
    "tool kinds it cannot run",
    "ExecutorSpecFull.no_next_is_error": "the Airflow runtime ends a branch whose arcs do not "
    "match without failing the run, as NoETL 5 does (its CLI reads the key and ignores it, its "
    "server does not read it)",
    "ExecutorSpecFull.policy": "NoETL's global timeouts, result handling and payload limits "
    "are not applied by the Airflow runtime",
    "NextSpec.on_no_match": "NoETL 5's engines do not read it (noetl/server, noetl/cli: a "
    "branch whose arcs do not match ends there); only NoETL's Python engine tells `quiet` "
    "from `complete`, by not completing the workflow at this step. The Airflow runtime ends the "
    "branch and completes the run once no branch is running, which is `complete`",
    "NextSpec.policy": "a placeholder NoETL itself does not act on yet",
    "Arc.spec": "a placeholder NoETL itself does not act on yet",
    "StepPolicy.admit": "no NoETL 5 engine evaluates admission (noetl/server and noetl/cli do "
    "not read it; NoETL's Python engine only validates its shape): the Airflow runtime, like "
    "them, runs every step its routing reaches; guard the arcs that lead here instead",
    "StepPolicy.lifecycle": "use `spec.timeout` (or a tool's timeout) for Airflow",
    "StepPolicy.failure": "the Airflow runtime fails a step on its first unhandled error",
    "StepPolicy.emit": "the event log records its own event set",
    "LoopSpec.frame": "NoETL 5's server reads `max_rows` (as `{{ __frame_max_rows }}` in the "
    "claim) and `row_concurrency` of a cursor loop (its lease and heartbeat fields are "
    "advisory); the Airflow runtime's cursor slots claim one row per claim under their own "
    "lease: frame claims would need the cursor driver to lease a frame of rows. Size the claim "
    "with its own LIMIT and the slots with `max_in_flight`",
    "LoopPolicy.exec": "NoETL 5's server drops `loop.spec.policy` (its loop spec holds mode, "
    "max_in_flight and frame) and its CLI runs no loop remotely; the Airflow lowering places "
    "iterations itself (mapped tasks)",
    "ToolOutput.store": "no NoETL 5 engine acts on `tool.output` (noetl/server passes it on, "
    "noetl/worker and noetl/cli do not read it; only NoETL's retired Python worker stored "
    "results by it): the Airflow runtime keeps results in XCom",
    "ToolOutput.select": "no NoETL 5 engine acts on it (noetl/worker and noetl/cli do not read "
    "`tool.output`; NoETL's retired Python worker extracted the paths into the stored result "
    "reference): the result is whole in XCom, read the path from the step result",
    "ToolOutput.accumulate": "no NoETL 5 engine acts on it (noetl/worker and noetl/cli do not "
    "read `tool.output`); the Airflow runtime does not accumulate results across attempts",
    "ToolOutput.scope": "no NoETL 5 engine acts on it (noetl/worker and noetl/cli do not read "
    "`tool.output`); results live as long as the DAG run's XComs (`execution`)",
    "ToolOutput.as": "no NoETL 5 engine binds the name (noetl/worker and noetl/cli do not read "
    "`tool.output`): read the step result by the step's name, as NoETL 5 does",
    "ToolOutput.inline_max_bytes": "the event log keeps its own preview size",
    "ToolOutput.preview_max_bytes": "the event log keeps its own preview size",
    "Step.when": "a step guard of a cursor loop step is not lowered (the cursor's head "
    "would have to skip its slots); NoETL 5's CLI reads it but runs no loop (its loop config is "
    "unused): guard the arc that leads to the loop step instead",
}
# The local dialect's constructs beyond the schema (the CLI's `case` blocks) that are read and
# reported, not executed on Airflow.
LOCAL_NOT_EXECUTED: dict[str, str] = {
    "Case.rhai": "a Rhai condition needs NoETL's Rhai engine, which the Airflow runtime does "
    "not have: the case never matches here; write the condition as a `when` template",
    "Case.else": "the `else` of a Rhai case is not lowered (the Rhai condition is not "
    "evaluated here); write the condition as a `when` template",
    "Case.pipe": "the CLI skips `pipe` blocks too (they need NoETL's distributed runtime)",
    "Case.inclusive": "the `case` blocks of a step routed `inclusive` are not lowered (the CLI "
    "runs the first matching case instead of `next`); route it `exclusive` or move the case "
    "into `next`",
}
