"""Reader for NoETL 5, the current generation of the canonical dialect, and its local dialect.

NoETL 5 (a Rust engine and CLI, PyPI `noetl` 5.x) keeps the canonical shape (`next: {spec,
arcs}`, tool pipelines, `set`) and adds keys to it; its JSON Schema at noetl/noetl@3badb77a
(`noetl/core/dsl/playbook.schema.json`, 2026-07-27) is the authority. Its semantics differ from
the April 2026 engine's in places (python code runs wrapped in a function taking `input_data`
and `args`, `credential` names the credential, a pipeline task's `set` binds plain names), so a
file is read as NoETL 5 only when it says so or uses a construct only NoETL 5 reads
(``noetl5_detect.py``: a step `when` or `args`, a top-level `return` in python code, a pipeline's
label form, a key only a NoETL 5 tool reads), or `--dialect noetl5` forces it; the corpus of the
April engine keeps its own meaning.

`executor.profile: local` selects the CLI's own interpreter (`noetl run FILE -r local`), whose
dialect also reads step `vars` (values of the step result, read as `vars.NAME`), a step `when`
guard, `next` as a list of `{step, when, args}` and `{when, then: [...]}` entries routed by
`spec.next_mode`, and starts at the first step when no entry is named.

Every key of the schema is either read with its meaning or reported S116 ("accepted, not executed
on Airflow") with the reason; ``SCHEMA_READ`` and ``NOT_EXECUTED`` (``noetl5_schema.py``, with
every key table) say which, and tests/test_noetl5_dsl.py walks the schema's property paths
against them. The local dialect's routing (`case` blocks, `next` lists) is ``noetl5_local.py``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..ast import Arc, Loop, Playbook, Router, Step, Task
from ..diagnostics import Severity
from ..load import YList, YMap, span_of
from .base import did_you_mean, edit_distance
from .canonical import ARC_KEYS, STEP_FOREIGN, STEP_KEYS, CanonicalReader
from .noetl5_detect import label_form, noetl5_mark
from .noetl5_local import read_local_case, read_local_next_list
from .noetl5_schema import (
    EXECUTOR_POLICY_KEYS,
    EXECUTOR_REQUIRES_KEYS,
    FRAME_KEYS,
    LOCAL_STEP_KEYS,
    LOOP_POLICY_KEYS,
    METADATA_KEYS_5,
    NEXT_SPEC_KEYS_5,
    NOT_EXECUTED,
    ON_NO_MATCH,
    OUTPUT_ACCUMULATE_KEYS,
    OUTPUT_KEYS,
    OUTPUT_SCOPES,
    OUTPUT_STORE_KEYS,
    SCHEMA_READ,
    SCOPED_PREFIXES,
    SERVER_STEP_KEYS,
    STEP_POLICY_KEYS,
    STEP_SPEC_KEYS,
    STORE_KINDS,
    STORE_NEEDS,
)
from .playbook import PlaybookReader

E, W = Severity.ERROR, Severity.WARNING


def noetl5_marker(root: Any) -> str | None:
    """What makes a document NoETL 5 (an explicit marker, or a construct only NoETL 5 reads:
    ``noetl5_detect.py``), or None."""
    mark = noetl5_mark(root)
    return mark.reason if mark else None


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
    step_keys: ClassVar[set[str]] = STEP_KEYS | SERVER_STEP_KEYS
    step_foreign: ClassVar[dict[str, tuple[str, Severity]]] = {
        k: v for k, v in STEP_FOREIGN.items() if k not in SERVER_STEP_KEYS
    }
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
        playbook.workload_templates = False
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

    def _step_args_beside_tool_args(self, item: YMap, args: YMap, label: str) -> None:
        """S125: NoETL 5's worker hands the step's `args` to a tool only when the tool declares
        none (noetl/worker command.rs:612); noetlc lays them over the tool's, so the two engines
        run such a step with different values. Only keys both sides bind can differ in meaning,
        but the worker drops every step key, so any pair is reported."""
        tool = item.get("tool")
        own = tool.get("args") if isinstance(tool, YMap) else None
        if not isinstance(own, YMap) or not own or not args:
            return
        self.report(
            "S125",
            self.key_pos(item, "args"),
            f"{label} has `args` beside its tool's own `args`: NoETL 5 drops the step's "
            f"({', '.join(map(str, args))}) and runs the tool's, noetlc lays the step's over "
            f"the tool's (docs/semantics.md, 'Step `args` beside a tool's own `args` on NoETL "
            f"5'); move the values into the tool's `args` so both engines run the same",
        )

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
        local = self.profile == "local"
        if "when" in item:
            guard = item["when"]
            if not isinstance(guard, (str, bool)):
                self.report("S102", self.pos(item, "when"), f"`when` of {label} must be a template")
            elif step.loop is not None and step.loop.cursor is not None:
                # A cursor loop's head claims no guard: not lowered for it.
                self.not_executed(item, "when", "Step.when", label)
            else:
                step.guard = guard  # a loop's head evaluates it before the loop starts
                # The server (evaluator.rs evaluate_step_when, orchestrator.rs): a false guard
                # skips the step and its arcs are taken; the CLI ends the branch.
                step.guard_walks_on = not local
        if "args" in item and not local:
            # Step.args: sent to the worker with the command (handlers/execute.rs), where the
            # step's tool reads them as its `args` when it declares none; read as step input.
            args = self.mapping(item, "args", f"`args` of {label}")
            if args is not None and step.input is not None:
                self.report(
                    "S103",
                    self.key_pos(item, "args"),
                    f"{label} has both `args` and `input`: the step's input is its `input`, "
                    f"these `args` are not read; keep one",
                )
            elif args is not None:
                step.input = args
                self._step_args_beside_tool_args(item, args, label)
        spec, nxt = item.get("spec"), item.get("next")
        mode = spec.get("next_mode") if isinstance(spec, YMap) else None
        own = nxt.get("spec") if isinstance(nxt, YMap) else None
        routed_by_own_mode = isinstance(own, YMap) and "mode" in own
        if not local and mode in ("exclusive", "inclusive") and isinstance(nxt, YMap):
            # The server's router takes the step's next_mode where it names no mode.
            step.router.mode = step.router.mode if routed_by_own_mode else mode
        if local:
            if "vars" in item:
                step.vars = self.mapping(item, "vars", f"`vars` of {label}")
            if "case" in item:
                read_local_case(self, item, step, label)
        return step

    def pipeline_entry(self, entry: Any) -> tuple[Any, str | None]:
        """NoETL 5's label form `- fetch: {kind: http, ...}` (playbook.rs, the nested shape of
        a pipeline item): the task, named by its label."""
        found = label_form(entry)
        if not found or not isinstance(found[1], YMap) or "name" in found[1]:
            return (found[1], found[0]) if found else (entry, None)
        label, task = found
        # The task as the flat form writes it (`name` first), positions kept: the lowering and
        # the runtime name a pipeline task by its `name`.
        named = YMap({"name": label, **task})
        named.span = task.span
        named.key_spans = {"name": entry.key_spans.get(label), **task.key_spans}
        named.value_spans = {"name": entry.key_spans.get(label), **task.value_spans}
        return named, label

    def read_step_spec(self, item: YMap, label: str) -> Any:
        spec = self.mapping(item, "spec", f"`spec` of {label}")
        if spec is None:
            return None
        # Both runtimes route by `next_mode`: the CLI a `next` list, the server (evaluator.rs
        # evaluate_next_transitions) a `next` list and a router without its own `spec.mode`.
        self.free_form_keys(spec, STEP_SPEC_KEYS + ("next_mode",), f"the spec of {label}")
        if "next_mode" in spec:  # StepSpec is open
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
        if loop is not None and isinstance(loop.cursor, YMap) and "kind" not in loop.cursor:
            loop.cursor = _cursor_with_kind(loop.cursor)
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
        if self.profile != "local" and value and all(isinstance(e, str) for e in value):
            # The server's `next: [a, b]` is NextSpec::List (playbook.rs:583; a name is no
            # `{step}` target, so the Targets variant before it does not match): every step
            # named is taken, unconditionally, whatever `spec.next_mode` says
            # (evaluator.rs:199). Read as exclusive, all but the first branch would be dropped.
            arcs = [
                self.arc_from_name(value, i, f"entry {i + 1} of {where}", origin="arc")
                for i in range(len(value))
            ]
            return Router(span=span_of(value), mode="inclusive", arcs=[a for a in arcs if a])
        if self.profile != "local" and any(isinstance(e, YMap) and "then" in e for e in value):
            # The server's list holds `{step, when, args}` targets only (playbook.rs NextSpec).
            return super().read_next_list(item, value, where)
        # Both runtimes: `{step, when, args}` targets routed by `spec.next_mode` (the server's
        # NextSpec::Targets, evaluator.rs evaluate_next_transitions; the CLI's list).
        return read_local_next_list(self, item, value, where)


__all__ = ["NOT_EXECUTED", "SCHEMA_READ", "SCOPED_PREFIXES", "Noetl5Reader", "noetl5_marker"]


def _cursor_with_kind(cursor: YMap) -> YMap:
    """A cursor claim without `kind` runs on postgres in NoETL 5 (noetl/server d9ec700c
    orchestrate-core/src/playbook.rs:444, serde's `default_cursor_kind`): the same mapping with
    that driver named, so C512 and the runtime see what NoETL 5 runs. A copy: the document read
    stays as written (its positions answer for the added key too)."""
    named = YMap(cursor)
    named.span, named.key_spans, named.value_spans = (
        cursor.span,
        cursor.key_spans,
        cursor.value_spans,
    )
    named["kind"] = "postgres"
    return named
