"""Reader for the canonical generation: `next: {spec, arcs}`, tool pipelines, policy rules, `set`.

What this reader accepts follows the engine of that generation (reference/noetl_dsl.md §1c and
§3): its pydantic models are the gate for "runs or not", so keys the models reject are errors
and keys they silently drop are warnings.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..ast import Arc, Loop, Playbook, Router, Step, Task
from ..diagnostics import Severity
from ..load import YList, YMap, span_of
from .base import (
    CANONICAL_LOOP_MODES,
    EXECUTOR_PROFILES,
    LOOP_EXEC,
    ROUTER_MODES,
    TOOL_SETTING_KEYS,
    event_of,
    is_template,
)
from .playbook import PlaybookReader

STEP_KEYS = {"step", "desc", "spec", "input", "loop", "tool", "next", "set"}
E = Severity.ERROR
STEP_FOREIGN = {
    "args": ("the engine rejects it; use `input`", E),
    "set_ctx": ("the engine rejects it; use `set: {ctx.name: ...}`", E),
    "set_iter": ("the engine rejects it; use `set: {iter.name: ...}`", E),
    "result": ("the engine rejects it; derive values with `set`", E),
    "outcome": ("the engine rejects it; use `tool.spec.policy.rules`", E),
    # Forms of the other generations the engine drops (its parser rejects them): errors too,
    # since a step that silently loses its routing, tool or sink is not the playbook written.
    "when": ("the engine drops it; use `spec.policy.admit.rules`", E),
    "case": ("the engine drops it; use `next.arcs` guards and `tool.spec.policy.rules`", E),
    "type": ("the engine drops it; use `tool: {kind: ...}`", E),
    "vars": ("the engine drops it; use `set: {ctx.name: ...}`", E),
    "sink": ("the engine drops it; add a pipeline task that writes the result", E),
    "retry": ("the engine drops it; use `tool.spec.policy.rules` with `do: retry`", E),
}
# A `next` entry or mapping holding these is the v1 routing form, which this engine never routes.
V1_ROUTING_KEYS = ("then", "else")
V1_ROUTING_ADVICE = (
    "`when`/`then`/`else` blocks in `next` are the v1 routing form, which the canonical engine "
    "never routes; use `next: {arcs: [{step: ..., when: ...}]}` (an arc without `when` is the else)"
)
TOOL_KEYS_COMMON = {"kind", "name", "spec", "output", "input"}
ARC_KEYS = {"step", "when", "set", "spec"}
LOOP_KEYS = {"in", "cursor", "iterator", "spec"}
LOOP_SPEC_KEYS = {"mode", "max_in_flight", "policy", "frame"}
EXECUTOR_KEYS = {"profile", "version", "requires", "spec"}
EXECUTOR_SPEC_KEYS = ("entry_step", "final_step", "no_next_is_error", "policy")


class CanonicalReader(PlaybookReader):
    dialect = "canonical"
    # What a step, its spec and its `next.spec` may hold; the NoETL 5 reader widens them.
    step_keys: ClassVar[set[str]] = STEP_KEYS
    step_foreign: ClassVar[dict[str, tuple[str, Severity]]] = STEP_FOREIGN
    step_spec_foreign: ClassVar[dict[str, tuple[str, Severity]]] = {
        "next_mode": ("use `next.spec.mode`", E)
    }
    next_spec_keys: ClassVar[tuple[str, ...]] = ("mode", "policy")
    arc_keys: ClassVar[set[str]] = ARC_KEYS
    arc_foreign: ClassVar[dict[str, tuple[str, Severity]]] = {
        "expr": ("use `when`", E),
        # `{step, args}` is the v2 form: the engine drops `args`, so the values never arrive
        "args": ("the engine drops it (it reads step, when and set); pass values with `set`", E),
    }
    # A step with neither tool nor `next` is S107 here; NoETL 5 reads it as a terminal step.
    tool_required = True
    root_keys = PlaybookReader.root_keys | {"tracing"}
    root_foreign: ClassVar[dict[str, tuple[str, Severity]]] = {
        "vars": ("the engine rejects a root `vars`; use `set: {ctx...}` on steps", E)
    }

    def read(self, root: YMap) -> Playbook:
        playbook = super().read(root)
        named = self._named_entry(playbook)
        if playbook.steps and named is None and playbook.step("start") is None:
            # The specification requires `start`; this generation's engine falls back to the
            # first step, so the playbook runs: S115 is a warning, not a rejection (S105).
            self.report(
                "S115",
                self.pos(root, "workflow"),
                f"no step named `start` and no `executor.spec.entry_step`: the engine starts "
                f"at the first step {playbook.steps[0].name!r}; name the entry explicitly",
            )
        elif (
            self.generation_starts_at_first_step
            and named is None
            and playbook.steps
            and playbook.steps[0].name != "start"
            and playbook.step("start") is not None
        ):
            # NoETL's engine (138c10ed, start_execution) starts at executor.spec.entry_step,
            # else workflow[0]: `start` is only a fallback it never reaches.
            self.report(
                "S115",
                self.pos(root, "workflow"),
                f"the engine starts at the first step {playbook.steps[0].name!r}, not at "
                f"`start`; move `start` first or name it in `executor.spec.entry_step`",
            )
        return playbook

    # NoETL 5's reader (read/noetl5.py) keeps its own entry rule.
    generation_starts_at_first_step = True

    @staticmethod
    def _named_entry(playbook: Playbook) -> str | None:
        executor = playbook.executor if isinstance(playbook.executor, YMap) else {}
        spec = executor.get("spec") if isinstance(executor.get("spec"), YMap) else {}
        entry = spec.get("entry_step")
        return entry if isinstance(entry, str) and playbook.step(entry) else None

    def entry_step(self, playbook: Playbook) -> str | None:
        entry = self._named_entry(playbook)
        if entry is not None:
            return entry
        # The engine starts at workflow[0] when no entry is named (reference §3.1; 138c10ed's
        # start_execution: executor.spec.entry_step, else workflow[0]), `start` or not.
        if not self.generation_starts_at_first_step and playbook.step("start"):
            return "start"
        return playbook.steps[0].name if playbook.steps else None

    def read_executor(self, root: YMap) -> Any:
        """The `executor` block; the one reader of both generations (NoETL 5 adds what its
        schema added through ``read_executor_extra``)."""
        executor = self.mapping(root, "executor", "`executor`")
        if executor is None:
            return None
        self.check_keys(executor, EXECUTOR_KEYS, "`executor`")
        self.choice(executor, "profile", EXECUTOR_PROFILES, "`executor.profile`")
        spec = self.mapping(executor, "spec", "`executor.spec`")
        if spec is not None:
            self.check_keys(spec, EXECUTOR_SPEC_KEYS, "`executor.spec`")
            if "no_next_is_error" in spec:
                self.expect(spec, "no_next_is_error", (bool,), "`executor.spec.no_next_is_error`")
        self.read_executor_extra(executor, spec)
        return executor

    def read_executor_extra(self, executor: YMap, spec: YMap | None) -> None:
        """What a later generation reads beyond the keys both know (nothing here)."""

    def read_workbook_task(self, item: YMap, name: str) -> Task | None:
        self.check_keys(item, ("name", "tool", "desc"), f"workbook task {name!r}")
        tool = self.mapping(item, "tool", f"`tool` of workbook task {name!r}")
        if tool is None:
            self.report("S101", self.pos(item), f"workbook task {name!r} needs a `tool`")
            return None
        if "kind" not in tool:
            self.report(
                "S101", self.pos(item, "tool"), f"the tool of workbook task {name!r} needs `kind`"
            )  # still defined: a step calling it is no R202
        return self.read_task(tool, f"workbook task {name!r}", name=name)

    # -- steps ---------------------------------------------------------------------------------
    def read_step(self, item: YMap, name: str) -> Step:
        step, label = self.open_step(
            item, name, self.step_keys, self.step_foreign, TOOL_SETTING_KEYS
        )
        if "tool" in item:
            self.read_step_tool(item, step, label)
        if "input" in item:
            step.input = self.mapping(item, "input", f"`input` of {label}")
        if "set" in item:
            step.set = self.mapping(item, "set", f"`set` of {label}")
        if "loop" in item:
            step.loop = self.read_loop(item, label)
        if "spec" in item:
            step.admit = self.read_step_spec(item, label)
        step.router = self.read_next(item, label) if "next" in item else Router(mode="exclusive")
        if (
            self.tool_required
            and step.tool is None
            and step.pipeline is None
            and "next" not in item
        ):
            self.report(
                "S107",
                self.pos(item, "step"),
                f"{label} has no `tool` and no `next` (use `tool: {{kind: noop}}` for a pure router)",
            )
        return step

    def read_step_tool(self, item: YMap, step: Step, label: str) -> None:
        tool = item["tool"]
        if isinstance(tool, YList):
            if not tool:
                self.report("S102", self.pos(item, "tool"), f"the pipeline of {label} is empty")
                return
            tasks, names = [], set()
            for index, raw in enumerate(tool):
                entry, named = self.pipeline_entry(raw)
                if not isinstance(entry, YMap) or "kind" not in entry:
                    found = (
                        ", ".join(map(str, entry))
                        if isinstance(entry, YMap)
                        else type(entry).__name__
                    )
                    self.report(
                        "S102",
                        self.pos(tool, index),
                        f"pipeline task {index + 1} of {label} must be a mapping with `kind` "
                        f"(found: {found})",
                    )
                    continue
                task = self.read_task(entry, f"task {index + 1} of {label}", name=named)
                task.name = task.name or f"task_{index}"
                if task.name in names:
                    self.report(
                        "S106",
                        self.pos(entry, "name"),
                        f"duplicate task name {task.name!r} in the pipeline of {label}",
                    )
                names.add(task.name)
                tasks.append(task)
            step.pipeline = tasks
        elif self.expect(item, "tool", (dict, list), f"`tool` of {label}"):
            if "kind" not in tool:
                self.report("S101", self.pos(item, "tool"), f"the tool of {label} needs `kind`")
                return
            step.tool = self.read_task(tool, f"the tool of {label}")

    def pipeline_entry(self, entry: Any) -> tuple[Any, str | None]:
        """A pipeline item's task mapping and the name its form gives it (None: its `name`)."""
        return entry, None

    def read_task(self, tool: YMap, label: str, *, name: str | None = None) -> Task:
        if "eval" in tool:
            self.report(
                "S114",
                self.key_pos(tool, "eval"),
                f"`eval` in {label} is not part of the canonical dialect: use `spec.policy.rules`",
            )
        kind = self.tool_kind(tool, "kind", label)
        task_name = self.string(tool, "name", f"`name` of {label}") or name
        return Task(
            span=span_of(tool),
            name=task_name,
            kind=kind,
            kind_span=self.span(tool, "kind"),
            config=tool,
            rules=self.policy_rules(tool, label),
        )

    def read_step_spec(self, item: YMap, label: str) -> Any:
        spec = self.mapping(item, "spec", f"`spec` of {label}")
        if spec is None:
            return None
        self.check_keys(
            spec,
            ("policy", "timeout"),
            f"the spec of {label}",
            foreign=self.step_spec_foreign,
        )
        policy = self.mapping(spec, "policy", f"`spec.policy` of {label}")
        if policy is None:
            return None
        self.check_keys(policy, ("admit", "lifecycle", "failure", "emit"), f"the policy of {label}")
        admit = self.mapping(policy, "admit", f"`spec.policy.admit` of {label}")
        if admit is not None:
            self.check_keys(admit, ("mode", "rules"), f"the admit policy of {label}")
            self.choice(admit, "mode", ROUTER_MODES, f"admit `mode` of {label}")
        return admit

    # -- loops ---------------------------------------------------------------------------------
    def read_loop(self, item: YMap, label: str) -> Loop | None:
        loop = self.mapping(item, "loop", f"`loop` of {label}")
        if loop is None:
            return None
        # `loop.mode` is the v2 form; the canonical engine drops it (the loop runs sequentially).
        foreign = {"mode": ("the engine drops it; use `loop.spec.mode`", E)}
        self.check_keys(
            loop,
            LOOP_KEYS,
            f"the loop of {label}",
            foreign=foreign if self.dialect == "canonical" else None,
        )
        spec = self.mapping(loop, "spec", f"`loop.spec` of {label}") or {}
        if spec:
            self.check_keys(spec, LOOP_SPEC_KEYS, f"the loop spec of {label}")
        mode = self.choice(  # the loop operator checks its mode when the DAG is parsed
            spec,
            "mode",
            CANONICAL_LOOP_MODES,
            f"loop mode of {label}",
            allow_template=False,
        )
        has_in, has_cursor = "in" in loop, "cursor" in loop
        if has_in and has_cursor:
            self.report(
                "S109", self.pos(item, "loop"), f"the loop of {label} has both `in` and `cursor`"
            )
        elif not has_in and not has_cursor:
            self.report(
                "S108", self.pos(item, "loop"), f"the loop of {label} needs `in` (or `cursor`)"
            )
        else:
            self.left_empty(loop, "in", "S108", f"`in` of the loop of {label}")
        if has_cursor and mode != "cursor":
            self.report(
                "S109",
                self.pos(spec, "mode") if "mode" in spec else self.pos(loop, "cursor"),
                f"a cursor loop needs `spec.mode: cursor` ({label})",
            )
        if mode == "cursor" and not has_cursor:
            self.report(
                "S109", self.pos(spec, "mode"), f"`spec.mode: cursor` needs `loop.cursor` ({label})"
            )
        if "iterator" not in loop:
            self.report(
                "S108", self.pos(item, "loop"), f"the loop of {label} needs an `iterator` name"
            )
        iterator = self.iterator_name(loop, "iterator", f"loop `iterator` of {label}")
        max_in_flight = spec.get("max_in_flight")
        if (
            max_in_flight is not None
            and not is_template(max_in_flight)
            and self.expect(spec, "max_in_flight", (int,), f"`max_in_flight` of {label}")
            and max_in_flight < 1
        ):
            self.report(
                "S112",
                self.pos(spec, "max_in_flight"),
                f"`max_in_flight` of {label} must be at least 1",
            )
        policy = self.mapping(spec, "policy", f"loop policy of {label}") if spec else None
        if policy:
            self.choice(policy, "exec", LOOP_EXEC, f"loop `policy.exec` of {label}")
        cursor = self.mapping(loop, "cursor", f"`loop.cursor` of {label}") if has_cursor else None
        return Loop(
            span=span_of(loop),
            iterator=iterator,
            iterator_span=self.span(loop, "iterator"),
            collection=loop.get("in"),
            cursor=cursor,
            mode=mode or "sequential",
            max_in_flight=max_in_flight,
        )

    # -- routing -------------------------------------------------------------------------------
    def read_next(self, item: YMap, label: str) -> Router:
        value = item["next"]
        where = f"`next` of {label}"
        router = self.trivial_next(item, where)
        if router is not None:
            return router
        if isinstance(value, YList):
            return self.read_next_list(item, value, where)
        if isinstance(value, YMap):
            if self.borrowed_v1_routing(value, where):
                return Router(mode="exclusive")
            if "arcs" not in value and "step" in value:  # a single `{step, when}`
                arc = self.read_arc(value, where, 0)
                return Router(mode="exclusive", arcs=[arc] if arc else [])
            self.check_keys(value, ("spec", "arcs"), where)
            spec = self.mapping(value, "spec", f"`next.spec` of {label}") or {}
            if spec:
                self.check_keys(spec, self.next_spec_keys, f"`next.spec` of {label}")
            mode = self.choice(
                spec,
                "mode",
                ROUTER_MODES,
                f"`next.spec.mode` of {label}",
                allow_template=False,
            )
            if "arcs" not in value:
                self.report("S101", self.pos(item, "next"), f"{where} needs an `arcs` list")
                return Router(mode=mode or "exclusive")
            arcs = self.sequence(value, "arcs", f"`next.arcs` of {label}")
            return Router(
                span=span_of(value),
                mode=mode or "exclusive",
                arcs=self.read_arcs(arcs or [], where),
                on_no_match=self.read_next_spec_extra(spec, label),
            )
        self.expect(item, "next", (str, list, dict), where)
        return Router(mode="exclusive")

    def read_next_list(self, item: YMap, value: YList, where: str) -> Router:
        """`next: [...]`: a list of arcs (first match wins)."""
        return Router(mode="exclusive", arcs=self.read_arcs(value, where))

    def read_next_spec_extra(self, spec: Any, label: str) -> str | None:
        """Keys of `next.spec` beyond `mode` (none in this generation)."""
        return None

    def borrowed_v1_routing(self, entry: YMap, where: str) -> bool:
        """S114 for a v1 `when`/`then`/`else` block; such an entry gives no arc at all."""
        key = next((k for k in V1_ROUTING_KEYS if k in entry), None)
        if key is None:
            return False
        self.report(
            "S114",
            self.key_pos(entry, key),
            f"`{key}` in {where}: {V1_ROUTING_ADVICE}",
            severity=E,
        )
        return True

    def read_arcs(self, items: YList, where: str) -> list[Arc]:
        arcs = []
        for index, entry in enumerate(items):
            if isinstance(entry, YMap) and self.borrowed_v1_routing(entry, where):
                continue
            if isinstance(entry, YMap):
                arc = self.read_arc(entry, f"arc {index + 1} of {where}", index)
            else:
                arc = self.arc_from_name(
                    items, index, f"arc {index + 1} of {where}", group=index, origin="arc"
                )
            if arc:
                arcs.append(arc)
        return arcs

    def read_arc(self, entry: YMap, where: str, index: int) -> Arc | None:
        self.check_keys(entry, self.arc_keys, where, foreign=self.arc_foreign)
        when = entry.get("when")
        if when is not None and not isinstance(when, (str, bool)):
            self.report(
                "S102", self.pos(entry, "when"), f"`when` of {where} must be a template string"
            )
        if "set" in entry:
            self.mapping(entry, "set", f"`set` of {where}")
        args = None
        if "args" in entry and "args" in self.arc_keys:
            args = self.mapping(entry, "args", f"`args` of {where}")
        return self.arc(
            entry,
            where,
            when=when,
            set=entry.get("set"),
            args=args,
            group=index,
            origin="arc",
            event=event_of(when),
        )
