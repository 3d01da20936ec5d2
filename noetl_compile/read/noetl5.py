"""Reader for NoETL 5, the current generation of the canonical dialect, and its local dialect.

NoETL 5 (a Rust engine and CLI, PyPI `noetl` 5.x) keeps the canonical shape (`next: {spec,
arcs}`, tool pipelines, `set`) and adds keys to it; its JSON Schema at noetl/noetl@3badb77a
(`noetl/core/dsl/playbook.schema.json`, 2026-07-27) is the authority. Its semantics differ from
the April 2026 engine's in places (python code runs wrapped in a function taking `input_data`
and `args`, `credential` names the credential, a pipeline task's `set` binds plain names), so a
file is read as NoETL 5 only when it says so (``noetl5_marker``) or `--dialect noetl5` forces
it; the corpus of the April engine keeps its own meaning.

`executor.profile: local` selects the CLI's own interpreter (`noetl run FILE -r local`), whose
dialect also reads step `vars` (values of the step result, read as `vars.NAME`), a step `when`
guard, `next` as a list of `{step, when, args}` and `{when, then: [...]}` entries routed by
`spec.next_mode`, and starts at the first step when no entry is named.

Every key of the schema is either read with its meaning or reported S116 ("accepted, not executed
on Airflow") with the reason; ``SCHEMA_READ`` and ``NOT_EXECUTED`` say which, and
tests/test_noetl5_dsl.py walks the schema's property paths against them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..ast import Arc, Loop, Playbook, Router, Step, Task
from ..diagnostics import Severity
from ..load import YList, YMap, list_of_one
from .base import NOETL5_KINDS, did_you_mean, edit_distance, event_of
from .canonical import (
    ARC_KEYS,
    EXECUTOR_KEYS,
    EXECUTOR_SPEC_KEYS,
    LOOP_KEYS,
    LOOP_SPEC_KEYS,
    STEP_FOREIGN,
    STEP_KEYS,
    CanonicalReader,
)
from .playbook import METADATA_KEYS, PlaybookReader

E, W = Severity.ERROR, Severity.WARNING

# Metadata is free-form in NoETL 5's schema (`additionalProperties: true`); these are the keys
# NoETL reads or its playbooks use. Another key is accepted unless it is one typo away from one.
METADATA_KEYS_5 = METADATA_KEYS | {"exposes_as_mcp", "namespace", "annotations", "catalog"}
# The local dialect's step keys beyond the schema's (the CLI's `Step` struct).
LOCAL_STEP_KEYS = {"vars", "when", "case"}
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
    "Step.when": "a local-dialect guard of a cursor loop step is not lowered (the cursor's head "
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


def noetl5_marker(root: Any) -> str | None:
    """What makes a document NoETL 5 (a key or value the April 2026 engine did not have), or
    None. Only explicit markers: the generations share apiVersion and shape."""
    if not isinstance(root, dict):
        return None
    executor = root.get("executor")
    if isinstance(executor, dict) and executor.get("profile") == "local":
        return "`executor.profile: local`"
    metadata = root.get("metadata")
    if isinstance(metadata, dict) and "exposes_as_mcp" in metadata:
        return "`metadata.exposes_as_mcp`"
    steps = root.get("workflow") if isinstance(root.get("workflow"), list) else []
    tools: list[Any] = []
    for step in steps:
        if not isinstance(step, dict):
            continue
        nxt = step.get("next")
        spec = nxt.get("spec") if isinstance(nxt, dict) else None
        if isinstance(spec, dict) and "on_no_match" in spec:
            return "`next.spec.on_no_match`"
        tool = step.get("tool")
        tools += tool if isinstance(tool, list) else [tool]
        if isinstance(tool, list):
            for task in tool:
                values = task.get("set") if isinstance(task, dict) else None
                if isinstance(values, dict) and any(
                    isinstance(k, str) and not k.startswith(SCOPED_PREFIXES) for k in values
                ):
                    return "a pipeline task's `set` of a plain name"
    workbook = root.get("workbook") if isinstance(root.get("workbook"), list) else []
    tools += [task.get("tool") for task in workbook if isinstance(task, dict)]
    for tool in tools:
        kind = tool.get("kind") if isinstance(tool, dict) else None
        if isinstance(kind, str) and kind in NOETL5_KINDS:
            return f"tool kind {tool['kind']!r}"
        path = tool.get("path") if kind == "playbook" else None
        if isinstance(path, str) and path.startswith(("./", "../")):
            # A catalog path never starts so: NoETL 5 reads it as a file beside the caller.
            return "a nested playbook called by file path"
    return None


def route_to_final_step(playbook: Playbook, final: str) -> None:
    """`executor.spec.final_step` as NoETL 5's local runtime runs it (noetl/cli
    ``playbook_runner.rs``): once the workflow has finished without an error, the final step runs,
    then its own `next`. On Airflow every step outside the final step's own branch routes to it
    where its branch ends: a step without arcs gets an arc to it, an exclusive router one more
    unconditional arc after its own (taken when none of them matches). An arc never handles a
    failure, so after an error the final step does not run, as under the CLI. The final step's
    task joins these arcs: it runs once, after the last of them."""
    after = {final}
    pending = [final]
    while pending:  # the final step's own branch: no arc back into it
        step = playbook.step(pending.pop())
        for arc in step.router.arcs if step is not None else ():
            if arc.target not in after:
                after.add(arc.target)
                pending.append(arc.target)
    for step in playbook.steps:
        if step.name in after:
            continue
        arcs = step.router.arcs
        if not arcs:
            arcs.append(Arc(target=final, origin="arc", span=step.span))
        elif step.router.mode == "exclusive":
            group = max(arc.group for arc in arcs) + 1
            arcs.append(Arc(target=final, origin="arc", group=group, span=step.span))


class Noetl5Reader(CanonicalReader):
    generation = "noetl5"
    step_keys: ClassVar[set[str]] = STEP_KEYS
    step_foreign: ClassVar[dict[str, tuple[str, Severity]]] = STEP_FOREIGN
    next_spec_keys: ClassVar[tuple[str, ...]] = NEXT_SPEC_KEYS_5
    # NoETL 5's schema requires only `step`: a step without a tool is a terminal or a router.
    tool_required = False
    profile: str | None = None

    def read(self, root: YMap) -> Playbook:
        executor = root.get("executor")
        profile = executor.get("profile") if isinstance(executor, YMap) else None
        self.profile = profile if isinstance(profile, str) else None
        if self.profile == "local":
            # The CLI's interpreter: its Step struct reads `vars` and a `when` guard, and a
            # `next` list is routed by `spec.next_mode`.
            self.step_keys = STEP_KEYS | LOCAL_STEP_KEYS
            self.step_foreign = {k: v for k, v in STEP_FOREIGN.items() if k not in LOCAL_STEP_KEYS}
            self.step_spec_foreign = {}
            # The CLI applies an arc's `args` (as `args.NAME`) before running the target.
            self.arc_keys = ARC_KEYS | {"args"}
            self.arc_foreign = {"expr": CanonicalReader.arc_foreign["expr"]}
        playbook = PlaybookReader.read(self, root)
        playbook.generation = self.generation
        playbook.profile = self.profile
        final = self._final_step(playbook)
        if final is not None:
            route_to_final_step(playbook, final)
        if playbook.steps and self._named_entry(playbook) is None and not playbook.step("start"):
            first = playbook.steps[0].name
            if self.profile != "local":
                # NoETL 5's server refuses such a workflow (the CLI starts at the first step).
                self.report(
                    "S115",
                    self.pos(root, "workflow"),
                    f"no step named `start` and no `executor.spec.entry_step`: NoETL 5's server "
                    f"refuses the workflow (only its local runtime starts at the first step "
                    f"{first!r}); name the entry step",
                    severity=E,
                )
        return playbook

    # The entry rule of NoETL 5's server is not recorded: `start`, else the first step.
    generation_starts_at_first_step = False

    @staticmethod
    def _final_step(playbook: Playbook) -> str | None:
        executor = playbook.executor if isinstance(playbook.executor, YMap) else {}
        spec = executor.get("spec") if isinstance(executor.get("spec"), YMap) else {}
        final = spec.get("final_step")
        return final if isinstance(final, str) and playbook.step(final) else None

    def entry_step(self, playbook: Playbook) -> str | None:
        entry = self._named_entry(playbook)
        if entry is not None:
            return entry
        if self.profile == "local":  # the CLI starts at the first step, `start` or not
            return playbook.steps[0].name if playbook.steps else None
        return super().entry_step(playbook)

    def not_executed(self, container: Any, key: str, schema_key: str, where: str) -> None:
        self.report(
            "S116",
            self.key_pos(container, key),
            f"`{key}` ({where}) is accepted, not executed on Airflow: {NOT_EXECUTED[schema_key]}",
        )

    def free_form_keys(self, mapping: YMap, known: Any, where: str) -> None:
        """A schema object open to any key: only a key one typo away from a known one is
        reported (S103, with the suggestion)."""
        for key in mapping:
            if key in known or not isinstance(key, str):
                continue
            if any(edit_distance(key, k, 2) <= 1 + (len(key) > 6) for k in known):
                self.report(
                    "S103",
                    self.key_pos(mapping, key),
                    f"unknown key {key!r} in {where}" + did_you_mean(key, known),
                )

    # -- root ----------------------------------------------------------------------------------
    def read_identity(self, root: YMap) -> tuple[str | None, str | None]:
        metadata = self.mapping(root, "metadata", "`metadata`")
        if metadata is None:
            return super().read_identity(root)
        self.free_form_keys(metadata, METADATA_KEYS_5, "`metadata`")
        name = self.string(metadata, "name", "`metadata.name`")
        path = self.string(metadata, "path", "`metadata.path`")
        if "exposes_as_mcp" in metadata:
            self.expect(metadata, "exposes_as_mcp", (bool,), "`metadata.exposes_as_mcp`")
        if name is None and path is None:
            return super().read_identity(root)
        return name, path

    def read_executor_extra(self, executor: YMap, spec: YMap | None) -> None:
        requires = self.mapping(executor, "requires", "`executor.requires`")
        if requires is not None:
            self.check_keys(requires, EXECUTOR_REQUIRES_KEYS, "`executor.requires`")
            for key in EXECUTOR_REQUIRES_KEYS:
                if key in requires:
                    self.expect(requires, key, (list,), f"`executor.requires.{key}`")
            self.not_executed(executor, "requires", "Executor.requires", "`executor`")
        if spec is None:
            return
        if spec.get("no_next_is_error") is True:
            self.not_executed(
                spec, "no_next_is_error", "ExecutorSpecFull.no_next_is_error", "`executor.spec`"
            )
        policy = self.mapping(spec, "policy", "`executor.spec.policy`")
        if policy is not None:
            self.check_keys(policy, EXECUTOR_POLICY_KEYS, "`executor.spec.policy`")
            self.not_executed(spec, "policy", "ExecutorSpecFull.policy", "`executor.spec`")

    # -- steps ---------------------------------------------------------------------------------
    def read_step(self, item: YMap, name: str) -> Step:
        step = super().read_step(item, name)
        label = f"step {name!r}"
        if self.profile == "local":
            if "vars" in item:
                step.vars = self.mapping(item, "vars", f"`vars` of {label}")
            if "when" in item:
                guard = item["when"]
                if not isinstance(guard, (str, bool)):
                    self.report(
                        "S102", self.pos(item, "when"), f"`when` of {label} must be a template"
                    )
                elif step.loop is not None and step.loop.cursor is not None:
                    # A cursor loop's head claims no guard: not lowered for it.
                    self.not_executed(item, "when", "Step.when", label)
                else:
                    step.guard = guard  # a loop's head evaluates it before the loop starts
            if "case" in item:
                self.read_local_case(item, step, label)
        return step

    def read_local_case(self, item: YMap, step: Step, label: str) -> None:
        """The CLI's `case` blocks (noetl/cli ``playbook_runner.rs``): in order, the first whose
        `when` holds runs its `then` steps (routed exclusive: the first of them whose own `when`
        holds) and the step's `next` is not taken; when none holds, `next` is. That is an
        exclusive router whose case arcs come before the `next` arcs. `then` is `{next: [...]}`
        (or `{next: step}`); a `then` list is read as those steps, which is what it means (the
        CLI 5.3.2 runs nothing for one: docs/noetl5.md).

        A case with `else`: when its `when` does not hold, the CLI runs the first of the `else`
        steps whose own `when` holds, then routes the step's `next` as well, and evaluates no
        later case. Lowered as the exclusive groups ``else_after_next`` builds."""
        cases = self.sequence(item, "case", f"`case` of {label}")
        if not cases:
            return
        if step.router.mode != "exclusive" and step.router.arcs:
            self.report_not_executed(item, "case", "Case.inclusive", label)
            return
        arcs: list[Arc] = []
        group = 0
        for index, entry in enumerate(cases):
            where = f"case {index + 1} of {label}"
            if not self.expect(cases, index, (dict,), where):
                continue
            self.check_keys(entry, LOCAL_CASE_KEYS, where)
            for key in ("rhai", "when_rhai"):
                if key in entry:
                    self.report_not_executed(entry, key, "Case.rhai", where)
            if "else" in entry and "when" not in entry:
                self.report_not_executed(entry, "else", "Case.else", where)
            when = entry.get("when")
            if "when" not in entry:
                if not any(k in entry for k in ("rhai", "when_rhai")):
                    self.report("S101", self.pos(entry), f"{where} needs `when`")
                continue
            if not isinstance(when, (str, bool)):
                self.report(
                    "S102", self.pos(entry, "when"), f"`when` of {where} must be a template"
                )
                continue
            then = entry.get("then")
            targets: Any = None
            if isinstance(then, YMap):
                self.check_keys(then, ("next", "pipe"), f"`then` of {where}")
                if "pipe" in then:
                    self.report_not_executed(then, "pipe", "Case.pipe", where)
                targets = then.get("next")
                if isinstance(targets, (str, YMap)):
                    targets = list_of_one(targets, then.value_span("next"))
            elif isinstance(then, YList):
                targets = then
            if not isinstance(targets, YList):
                self.report(
                    "S101", self.pos(entry, "then") if "then" in entry else self.pos(entry),
                    f"`then` of {where} needs `next` steps",
                )  # fmt: skip
                continue
            for t_index, target in enumerate(targets):
                t_where = f"target {t_index + 1} of {where}"
                if isinstance(target, YMap):
                    self.check_keys(target, ("step", "when", "args"), t_where)
                    inner = target.get("when")
                    guard = (
                        when if inner is None else f"{{{{ ({_expr(when)}) and ({_expr(inner)}) }}}}"
                    )
                    arc = self.arc(
                        target, t_where, when=guard, args=target.get("args"), group=group,
                        origin="arc",
                    )  # fmt: skip
                else:
                    arc = self.arc_from_name(
                        targets, t_index, t_where, when=when, group=group, origin="arc"
                    )
                if arc is not None:
                    arcs.append(arc)
                    group += 1
            if "else" in entry:
                else_arcs = self.read_case_else(entry, where)
                if else_arcs is not None:
                    # The CLI evaluates no case after one with `else`.
                    step.router.arcs = arcs + else_after_next(else_arcs, step.router.arcs, group)
                    step.router.mode = "exclusive"
                    return
        if not arcs:
            return
        for arc in step.router.arcs:  # `next` is taken only when no case matched
            arc.group += group
        step.router.arcs[:0] = arcs
        step.router.mode = "exclusive"

    def read_case_else(self, entry: YMap, where: str) -> list[Arc] | None:
        """The `else` steps of a case (the CLI's `Vec<NextStep>`): names or `{step, when,
        args}`, in order."""
        targets = entry["else"]
        if isinstance(targets, (str, YMap)):
            targets = list_of_one(targets, entry.value_span("else"))
        if not isinstance(targets, YList):
            self.expect(entry, "else", (list,), f"`else` of {where}")
            return None
        arcs: list[Arc] = []
        for index, target in enumerate(targets):
            t_where = f"else target {index + 1} of {where}"
            if isinstance(target, YMap):
                self.check_keys(target, ("step", "when", "args"), t_where)
                arc = self.arc(
                    target, t_where, when=target.get("when"), args=target.get("args"),
                    origin="else",
                )  # fmt: skip
            else:
                arc = self.arc_from_name(targets, index, t_where, origin="else")
            if arc is not None:
                arcs.append(arc)
        return arcs

    def report_not_executed(self, container: Any, key: str, reason: str, where: str) -> None:
        self.report(
            "S116",
            self.key_pos(container, key),
            f"`{key}` ({where}) is accepted, not executed on Airflow: {LOCAL_NOT_EXECUTED[reason]}",
        )

    def read_step_spec(self, item: YMap, label: str) -> Any:
        spec = self.mapping(item, "spec", f"`spec` of {label}")
        if spec is None:
            return None
        local = self.profile == "local"
        known = STEP_SPEC_KEYS + (("next_mode",) if local else ())
        if "next_mode" in spec and not local:
            # Only the local runtime routes a `next` list by it; the server drops it.
            advice, severity = CanonicalReader.step_spec_foreign["next_mode"]
            self.report(
                "S114",
                self.key_pos(spec, "next_mode"),
                f"`next_mode` is read only by NoETL's local runtime (`executor.profile: local`) "
                f"(the spec of {label}): {advice}",
                severity=severity,
            )
        self.free_form_keys(
            spec, known + ("next_mode",), f"the spec of {label}"
        )  # StepSpec is open
        if "next_mode" in spec and local:
            self.choice(
                spec, "next_mode", ("exclusive", "inclusive"), f"`spec.next_mode` of {label}"
            )
        policy = self.mapping(spec, "policy", f"`spec.policy` of {label}")
        if policy is None:
            return None
        self.check_keys(policy, STEP_POLICY_KEYS, f"the policy of {label}")
        for key in STEP_POLICY_KEYS:
            if key in policy:
                self.not_executed(policy, key, f"StepPolicy.{key}", f"`spec.policy` of {label}")
        admit = self.mapping(policy, "admit", f"`spec.policy.admit` of {label}")
        if admit is not None:
            self.check_keys(admit, ("mode", "rules"), f"the admit policy of {label}")
            self.choice(admit, "mode", ("exclusive", "inclusive"), f"admit `mode` of {label}")
        return admit

    def read_task(self, tool: YMap, label: str, *, name: str | None = None) -> Task:
        task = super().read_task(tool, label, name=name)
        output = tool.get("output")
        if "output" in tool and self.expect(tool, "output", (dict,), f"`output` of {label}"):
            self.read_output(output, label)
        return task

    def read_output(self, output: YMap, label: str) -> None:
        where = f"`output` of {label}"
        self.check_keys(output, OUTPUT_KEYS, where)
        for key in output:
            if key in OUTPUT_KEYS:
                self.not_executed(output, key, f"ToolOutput.{key}", where)
        store = self.mapping(output, "store", f"`output.store` of {label}")
        if store is not None:
            self.check_keys(store, OUTPUT_STORE_KEYS, f"`output.store` of {label}")
            kind = self.choice(store, "kind", STORE_KINDS, f"`output.store.kind` of {label}")
            if kind in STORE_NEEDS:
                self.report(
                    "S116",
                    self.pos(store, "kind"),
                    f"`output.store.kind: {kind}` of {label} needs {STORE_NEEDS[kind]}, which "
                    f"the Airflow runtime does not write to: the result stays in XCom (and no "
                    f"NoETL 5 engine writes it there either: noetl/worker and noetl/cli do not "
                    f"read `tool.output`)",
                )
            self.choice(
                store,
                "compression",
                ("none", "gzip", "lz4"),
                f"`output.store.compression` of {label}",
            )
        self.choice(output, "scope", OUTPUT_SCOPES, f"`output.scope` of {label}")
        if "as" in output:
            self.iterator_name(output, "as", f"`output.as` of {label}")
        selects = self.sequence(output, "select", f"`output.select` of {label}")
        for index, entry in enumerate(selects or []):
            entry_where = f"entry {index + 1} of `output.select` of {label}"
            if not self.expect(selects, index, (dict,), entry_where):
                continue
            self.check_keys(entry, ("path", "as"), entry_where)
            for key in ("path", "as"):
                if key not in entry:
                    self.report("S101", self.pos(selects, index), f"{entry_where} needs `{key}`")
            if "as" in entry:
                self.iterator_name(entry, "as", f"`as` of {entry_where}")
        accumulate = self.mapping(output, "accumulate", f"`output.accumulate` of {label}")
        if accumulate is not None:
            self.check_keys(accumulate, OUTPUT_ACCUMULATE_KEYS, f"`output.accumulate` of {label}")
            self.choice(
                accumulate,
                "strategy",
                ("append", "replace", "merge", "concat"),
                f"`output.accumulate.strategy` of {label}",
            )

    # -- loops ---------------------------------------------------------------------------------
    def read_loop(self, item: YMap, label: str) -> Loop | None:
        loop = super().read_loop(item, label)
        raw = item.get("loop")
        spec = raw.get("spec") if isinstance(raw, YMap) else None
        if not isinstance(spec, YMap):
            return loop
        frame = self.mapping(spec, "frame", f"`loop.spec.frame` of {label}")
        if frame is not None:
            self.check_keys(frame, FRAME_KEYS, f"the frame policy of {label}")
            self.choice(frame, "process", ("row", "frame"), f"`frame.process` of {label}")
            self.choice(frame, "retry_mode", ("whole_frame",), f"`frame.retry_mode` of {label}")
            self.not_executed(spec, "frame", "LoopSpec.frame", f"the loop of {label}")
        policy = spec.get("policy")
        if isinstance(policy, YMap):
            self.check_keys(policy, LOOP_POLICY_KEYS, f"the loop policy of {label}")
            if "exec" in policy:
                self.not_executed(policy, "exec", "LoopPolicy.exec", f"the loop policy of {label}")
        return loop

    # -- routing -------------------------------------------------------------------------------
    def read_next_spec_extra(self, spec: Any, label: str) -> str | None:
        if not isinstance(spec, YMap):
            return None
        if "policy" in spec:
            self.not_executed(spec, "policy", "NextSpec.policy", f"`next.spec` of {label}")
        if "on_no_match" not in spec:
            return None
        value = self.choice(spec, "on_no_match", ON_NO_MATCH, f"`next.spec.on_no_match` of {label}")
        if value == "quiet":  # `complete` is what the runtime does: read with its meaning
            self.not_executed(
                spec, "on_no_match", "NextSpec.on_no_match", f"`next.spec` of {label}"
            )
        return value

    def read_arc(self, entry: YMap, where: str, index: int) -> Arc | None:
        arc = super().read_arc(entry, where, index)
        if "spec" in entry:
            self.not_executed(entry, "spec", "Arc.spec", where)
        return arc

    def read_next_list(self, item: YMap, value: YList, where: str) -> Router:
        if self.profile != "local":
            return super().read_next_list(item, value, where)
        # The CLI's list form: `{step, when, args}` arcs and `{when, then: [...]}` blocks, in
        # order; `spec.next_mode` (default exclusive) decides whether the first match or every
        # match runs. A `then` list is routed with the same mode, so under `exclusive` only its
        # first entry runs: each of its entries is a group of its own, in order.
        spec = item.get("spec") if isinstance(item.get("spec"), YMap) else {}
        mode = (
            spec.get("next_mode")
            if spec.get("next_mode") in ("exclusive", "inclusive")
            else "exclusive"
        )
        arcs: list[Arc] = []
        group = 0
        for index, entry in enumerate(value):
            entry_where = f"entry {index + 1} of {where}"
            if not isinstance(entry, YMap):
                arc = self.arc_from_name(value, index, entry_where, group=group, origin="arc")
                arcs += [arc] if arc else []
                group += 1
                continue
            self.check_keys(entry, LOCAL_NEXT_ENTRY_KEYS, entry_where)
            when = entry.get("when")
            if when is not None and not isinstance(when, (str, bool)):
                self.report(
                    "S102",
                    self.pos(entry, "when"),
                    f"`when` of {entry_where} must be a template string",
                )
            if "then" not in entry:
                if "args" in entry:
                    self.mapping(entry, "args", f"`args` of {entry_where}")
                arc = self.arc(
                    entry,
                    entry_where,
                    when=when,
                    args=entry.get("args"),
                    group=group,
                    origin="arc",
                    event=event_of(when),
                )
                arcs += [arc] if arc else []
                group += 1
                continue
            targets = entry["then"]
            if isinstance(targets, (str, YMap)):
                targets = list_of_one(targets, entry.value_span("then"))
            if not isinstance(targets, YList):
                self.expect(entry, "then", (list,), f"`then` of {entry_where}")
                continue
            for t_index, target in enumerate(targets):
                t_where = f"target {t_index + 1} of {entry_where}"
                if isinstance(target, YMap):
                    self.check_keys(target, ("step", "when", "args"), t_where)
                    inner = target.get("when")
                    guard = (
                        when
                        if inner is None
                        else (
                            inner
                            if when is None
                            else f"{{{{ ({_expr(when)}) and ({_expr(inner)}) }}}}"
                        )
                    )
                    arc = self.arc(
                        target,
                        t_where,
                        when=guard,
                        args=target.get("args"),
                        group=group,
                        origin="next",
                        event=event_of(when),
                    )
                else:
                    arc = self.arc_from_name(
                        targets, t_index, t_where, when=when, group=group, origin="next"
                    )
                arcs += [arc] if arc else []
                if mode == "exclusive":
                    group += 1
            group += 1
        return Router(mode=mode, arcs=arcs)


def _both(first: Any, second: Any) -> Any:
    """The guard that holds when both do (None: unconditional)."""
    if first is None:
        return second
    if second is None:
        return first
    return f"{{{{ ({_expr(first)}) and ({_expr(second)}) }}}}"


def else_after_next(else_arcs: list[Arc], next_arcs: list[Arc], group: int) -> list[Arc]:
    """A case's `else` as the CLI runs it once its `when` fails: the first `else` step whose
    guard holds, and also the step's `next` routed exclusively. In the runtime's exclusive
    routing the first arc whose guard holds wins and the later arcs of its group fire with it,
    so each (else step, next arc) pair is a group guarded by both, in order; then each else
    step alone (no `next` arc matched); then each `next` arc alone (no else step matched)."""
    arcs: list[Arc] = []
    for taken in else_arcs:
        for also in next_arcs:
            guard = _both(taken.when, also.when)
            arcs.append(taken.model_copy(update={"when": guard, "group": group}))
            arcs.append(also.model_copy(update={"when": guard, "group": group}))
            group += 1
        arcs.append(taken.model_copy(update={"group": group}))
        group += 1
    for also in next_arcs:
        arcs.append(also.model_copy(update={"group": group}))
        group += 1
    return arcs


def _expr(guard: Any) -> str:
    """The expression of a guard: `{{ a }}` -> `a`; a bare expression as written."""
    text = str(guard).strip()
    if text.startswith("{{") and text.endswith("}}") and text.count("{{") == 1:
        return text[2:-2].strip()
    return text


__all__ = ["NOT_EXECUTED", "SCHEMA_READ", "SCOPED_PREFIXES", "Noetl5Reader", "noetl5_marker"]
