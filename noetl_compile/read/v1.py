"""Reader for the v1 "whitepaper" generation (../seeds/000, corpus/v1).

Steps carry `type` (or a `tool` string) and their tool settings inline; `type: workbook` +
`name`/`task` calls a workbook task; `with`/`args`/`data` bind inputs; `next` is a list of
direct entries (a fan-out), `{when, then}` / `{else}` blocks (first match wins) or `{when, step}`
entries (each one whose `when` holds fires, beside the direct entries: NoETL's v1 broker evaluates
every entry, event/service/transitions.py at 58c2a16b);
loops are `loop: {in, iterator}` routing into body steps closed by `end_loop`, or
`type: iterator` with `collection`/`element`/`task`.
"""

from __future__ import annotations

from typing import Any

from ..ast import Arc, Loop, Playbook, Router, Step, Task
from ..diagnostics import Severity
from ..load import YList, YMap, list_of_one, span_of
from .base import LOOP_MODES, TOOL_SETTING_KEYS, event_of
from .playbook import PlaybookReader

CONTROL_KEYS = {
    "step",
    "desc",
    "type",
    "name",
    "task",
    "tool",
    "with",
    "args",
    "data",
    "input",
    "loop",
    "end_loop",
    "result",
    "next",
    "sink",
    "save",
    "retry",
    "pass",
    "assert",
    "collection",
    "element",
    "mode",
    "iterator",
    "filter",
    "where",
    "order_by",
    "limit",
    "as",
    "resource_path",
}
# Tool settings a v1 step may carry inline: the shared tool vocabulary plus the v1 workbook
# task keys (secrets, transfer, save/storage).
INLINE_TOOL_KEYS = TOOL_SETTING_KEYS | {
    "headers", "params", "timeout", "provider", "project_id", "secret_name", "source",
    "target", "chunk_size", "direction", "transfer_direction", "version", "mapping", "table",
    "key", "storage", "connection",
}  # fmt: skip
TASK_KEYS = {
    "name",
    "type",
    "desc",
    "tool",
    "with",
    "data",
    "input",
    "args",
    "assert",
    "save",
    "sink",
    "retry",
    "loop",
} | INLINE_TOOL_KEYS
# Tools whose step-level `payload` is one of their own settings (the http request body), not
# arguments for the call.
PAYLOAD_IS_SETTING = frozenset({"http"})
LOOP_KEYS = {"in", "iterator", "mode", "filter", "limit", "collection", "element"}
NEXT_ENTRY_KEYS = {"step", "with", "args", "data", "input", "when", "then", "else"}
E = Severity.ERROR
# Step forms of the later generations: the v1 engine drops them, so a step that uses one loses its
# routing or its values without notice.
STEP_FOREIGN = {
    "case": (
        "the v1 engine drops it; route with `next: [{when, then: [{step: ...}]}, {else: ...}]`",
        E,
    ),
    "vars": ("the v1 engine drops it; read the step's result by its name (`{{ step.field }}`)", E),
    "set": ("the v1 engine drops it; pass values with `with` on the next step", E),
}
CANONICAL_ROUTER_ADVICE = (
    "`next: {spec, arcs}` is the canonical router, which the v1 engine does not read; use "
    "`next: [{when: ..., then: [{step: ...}]}, {else: [{step: ...}]}]`"
)


class V1Reader(PlaybookReader):
    dialect = "v1"
    root_keys = PlaybookReader.root_keys | {"environment", "context"}

    def read(self, root: YMap) -> Playbook:
        playbook = super().read(root)
        self.require_entry(playbook, root, "the whitepaper requires a step named `start`")
        return playbook

    def read_workbook_task(self, item: YMap, name: str) -> Task | None:
        label = f"workbook task {name!r}"
        self.check_keys(item, TASK_KEYS, label)
        kind = self.task_kind(item, label)
        if kind is None:
            self.report("S101", self.pos(item), f"{label} needs a `type`")
        return Task(
            span=span_of(item),
            name=name,
            kind=kind,
            kind_span=self.span(item, "type" if "type" in item else "tool"),
            config=item,
        )

    def task_kind(self, holder: YMap, label: str) -> str | None:
        if "type" in holder:
            return self.tool_kind(holder, "type", label)
        tool = holder.get("tool")
        if isinstance(tool, str):  # the Nov 2025 spelling `tool: python`
            return self.tool_kind(holder, "tool", label)
        if isinstance(tool, YMap) and "kind" in tool:
            return self.tool_kind(tool, "kind", label)
        return None

    # -- steps ---------------------------------------------------------------------------------
    def read_step(self, item: YMap, name: str) -> Step:
        step, label = self.open_step(item, name, CONTROL_KEYS | INLINE_TOOL_KEYS, STEP_FOREIGN)
        kind = self.task_kind(item, label)
        if kind == "iterator":
            self.read_iterator_step(item, step, label)
        elif kind == "workbook":
            task_name = self.string(
                item, "name" if "name" in item else "task", f"workbook task of {label}"
            )
            if task_name is None:
                self.report(
                    "S101",
                    self.pos(item, "step"),
                    f"{label} has `type: workbook` but no `name` of a task",
                )
            step.tool = Task(
                span=span_of(item),
                name=task_name,
                kind="workbook",
                kind_span=self.span(item, "type"),
                config=item,
            )
        elif kind not in (None, "end", "router", "start"):
            tool = item["tool"] if isinstance(item.get("tool"), YMap) else item
            if kind == "playbook":
                tool = _call_path(tool)
            step.tool = Task(
                span=span_of(item),
                name=name,
                kind=kind,
                kind_span=self.span(item, "type" if "type" in item else "tool"),
                config=tool,
            )
        step.input = self.step_input(item, label, kind)
        if "loop" in item:
            step.loop = self.read_loop(item, label)
        if "end_loop" in item:
            step.end_loop = self.string(item, "end_loop", f"`end_loop` of {label}")
            step.end_loop_span = self.span(item, "end_loop")
            step.loop_result = item.get("result")
        if "sink" in item or "save" in item:
            step.sink = item.get("sink", item.get("save"))
        step.retry = item.get("retry")
        step.router = self.read_next(item, label) if "next" in item else Router(mode="exclusive")
        return step

    def read_iterator_step(self, item: YMap, step: Step, label: str) -> None:
        """`type: iterator` + `collection` + `element` + `task: {type, ...}` (Oct 2025); `where`
        keeps the items it holds for, `order_by` sorts them by its value (stable) and `limit`
        keeps the first that many, as NoETL's iterator plugin (noetl/plugin/iterator/ at
        58c2a16b) does."""
        for key in ("collection", "element"):
            if key not in item:
                self.report("S108", self.pos(item, "type"), f"the iterator {label} needs `{key}`")
        self.left_empty(item, "collection", "S108", f"`collection` of {label}")
        step.loop = Loop(
            span=span_of(item),
            iterator=self.iterator_name(item, "element", f"`element` of {label}"),
            iterator_span=self.span(item, "element"),
            collection=item.get("collection"),
            filter=item.get("where"),
            order_by=item.get("order_by"),
            limit=item.get("limit"),
            mode=self.choice(
                item,
                "mode",
                LOOP_MODES,
                f"iterator mode of {label}",
                allow_template=False,
            )
            or "sequential",
        )
        task = self.mapping(item, "task", f"`task` of {label}")
        if task is None:
            if "task" not in item:
                self.report("S101", self.pos(item, "type"), f"the iterator {label} needs a `task`")
            return
        self.check_keys(task, TASK_KEYS | {"task", "path"}, f"the task of {label}")
        kind = self.task_kind(task, f"the task of {label}")
        if kind is None and not any(k in task for k in ("type", "tool")):
            # Each item runs this task: without a type there is nothing to run.
            self.report("S101", self.pos(item, "task"), f"the task of {label} needs `type`")
        step.tool = Task(
            span=span_of(task),
            name=step.name,
            kind=kind,
            kind_span=self.span(task, "type"),
            config=task,
        )
        if step.sink is None:
            # The task's own `save` writes each item's result: the step's sink, run per item.
            step.sink = task.get("sink", task.get("save"))

    def step_input(self, item: YMap, label: str, kind: str | None = None) -> Any:
        """A step's inputs as NoETL's v1 worker binds them (58c2a16b noetl/worker/worker.py,
        the task_data merge): every one of `args`, `with`, `payload`, `input` and `data` (`data`
        only without `args`) merged, a key of the earlier one in that order winning (recorded:
        dsl_keys/v1_python_payload_present). An http step's `payload` is its request body
        (the http tool reads it from the step's config), so it binds no argument there: its
        keys (a body's `data`, `headers`...) would otherwise override the request's settings."""
        own_payload = kind in PAYLOAD_IS_SETTING
        found = [
            (key, mapping)
            for key in ("args", "with", "payload", "input", "data")
            if (key != "data" or not item.get("args"))
            and (key != "payload" or not own_payload)
            and (mapping := self.mapping(item, key, f"`{key}` of {label}")) is not None
        ]
        if len(found) <= 1:
            return found[0][1] if found else None
        merged = YMap()
        merged.span = item.value_span(found[0][0])
        merged.key_spans, merged.value_spans = {}, {}
        rank = {name: index for index, (name, _) in enumerate(found)}
        owner: dict[Any, int] = {}
        for name in (k for k in item if k in rank):  # the file's order, for the keys' order
            mapping = dict(found)[name]
            for key, value in mapping.items():
                if owner.get(key, len(found)) < rank[name]:
                    continue  # an earlier key of the order binds it
                owner[key] = rank[name]
                merged[key] = value
                merged.key_spans[key] = mapping.key_spans.get(key)
                merged.value_spans[key] = mapping.value_spans.get(key)
        return merged

    def first_mapping(self, item: YMap, keys: tuple[str, ...], label: str) -> Any:
        for key in keys:
            if key in item and item[key] is not None:
                return self.mapping(item, key, f"`{key}` of {label}")
        return None

    def read_loop(self, item: YMap, label: str) -> Loop | None:
        loop = self.mapping(item, "loop", f"`loop` of {label}")
        if loop is None:
            return None
        self.check_keys(loop, LOOP_KEYS, f"the loop of {label}")
        collection = loop.get("in", loop.get("collection"))
        iterator_key = "iterator" if "iterator" in loop else "element"
        if collection is None and "in" not in loop and "collection" not in loop:
            self.report("S108", self.pos(item, "loop"), f"the loop of {label} needs `in`")
        elif collection is None:
            key = "in" if "in" in loop else "collection"
            self.left_empty(loop, key, "S108", f"`{key}` of the loop of {label}")
        if iterator_key not in loop:
            self.report(
                "S108", self.pos(item, "loop"), f"the loop of {label} needs an `iterator` name"
            )
        has_action = any(item.get(k) is not None for k in ("type", "tool", "task"))
        mode = self.choice(  # the loop operator checks its mode when the DAG is parsed
            loop,
            "mode",
            LOOP_MODES,
            f"loop mode of {label}",
            allow_template=False,
        )
        return Loop(
            span=span_of(loop),
            iterator=self.iterator_name(loop, iterator_key, f"loop iterator of {label}"),
            iterator_span=self.span(loop, iterator_key),
            collection=collection,
            mode=mode or "sequential",
            filter=loop.get("filter"),
            limit=loop.get("limit"),
            body_via_next=not has_action,
        )

    # -- routing -------------------------------------------------------------------------------
    def read_next(self, item: YMap, label: str) -> Router:
        value = item["next"]
        where = f"`next` of {label}"
        router = self.trivial_next(item, where)
        if router is not None:
            return router
        if isinstance(value, YMap) and ("arcs" in value or "spec" in value):
            key = "arcs" if "arcs" in value else "spec"
            self.report(
                "S114", self.key_pos(value, key), f"`{key}` in {where}: {CANONICAL_ROUTER_ADVICE}"
            )
            return Router(mode="exclusive")
        if isinstance(value, YMap):
            value = list_of_one(value, item.value_span("next"))
        if not isinstance(value, YList):
            self.expect(item, "next", (str, list), where)
            return Router(mode="exclusive")
        arcs: list[Arc] = []
        conditional = False  # a `then`/`else` block: first match wins
        for index, entry in enumerate(value):
            entry_where = f"entry {index + 1} of {where}"
            if not isinstance(entry, YMap):
                arc = self.arc_from_name(value, index, entry_where, group=index)
                arcs += [arc] if arc else []
                continue
            self.check_keys(
                entry,
                NEXT_ENTRY_KEYS,
                entry_where,
                # The engine drops `condition`, so the entry would route unconditionally.
                foreign={"condition": ("the v1 engine drops it and reads `when`", E)},
            )
            if "when" in entry or "else" in entry:
                conditional = conditional or "then" in entry or "else" in entry
                arcs += self.read_conditional(entry, entry_where, index)
            else:
                arc = self.arc(
                    entry,
                    entry_where,
                    args=self.first_mapping(entry, ("with", "args", "data", "input"), entry_where),
                    group=index,
                )
                arcs += [arc] if arc else []
        if not conditional:
            for arc in arcs:  # direct entries are a parallel fan-out: one group
                arc.group = 0
        return Router(mode="exclusive" if conditional else "inclusive", arcs=arcs)

    def read_conditional(self, entry: YMap, where: str, group: int) -> list[Arc]:
        is_else = "else" in entry
        when = None if is_else else entry.get("when")
        if when is not None and not isinstance(when, (str, bool)):
            self.report(
                "S102", self.pos(entry, "when"), f"`when` of {where} must be a template string"
            )
        if "step" in entry and "then" not in entry:  # shorthand {when, step}
            arc = self.arc(
                entry,
                where,
                when=when,
                group=group,
                event=event_of(when),
                args=self.first_mapping(entry, ("with", "args", "data"), where),
            )
            return [arc] if arc else []
        key = "else" if is_else else "then"
        targets = entry.get(key)
        if targets is None:
            self.report("S101", self.pos(entry), f"{where} needs `{key}` with the steps to run")
            return []
        if isinstance(targets, (str, YMap)):
            targets = list_of_one(targets, entry.value_span(key))
        if not isinstance(targets, YList):
            self.expect(entry, key, (list,), f"`{key}` of {where}")
            return []
        arcs = []
        for index, target in enumerate(targets):
            target_where = f"target {index + 1} of {where}"
            if isinstance(target, YMap):
                self.check_keys(target, ("step", "with", "args", "data", "input"), target_where)
                arc = self.arc(
                    target,
                    target_where,
                    when=when,
                    group=group,
                    event=event_of(when),
                    origin="else" if is_else else "next",
                    args=self.first_mapping(
                        target, ("with", "args", "data", "input"), target_where
                    ),
                )
            else:
                arc = self.arc_from_name(
                    targets,
                    index,
                    target_where,
                    when=when,
                    group=group,
                    origin="else" if is_else else "next",
                )
            arcs += [arc] if arc else []
        return arcs


def _call_path(config: YMap) -> YMap:
    """A v1 playbook call's config with the child's path under `path`: 58c2a16b's loader
    (plugin/playbook/loader.py get_playbook_path) reads `resource_path` before `path`
    (recorded: dsl_keys/v1_call_resource_path_present). Its `playbook_path` is not read here:
    the broker does not copy it onto the job (dsl_keys/v1_call_playbook_path_present)."""
    if "resource_path" not in config:
        return config
    out = YMap(config)
    out.span = config.span
    out.key_spans = dict(config.key_spans)
    out.value_spans = dict(config.value_spans)
    out["path"] = config["resource_path"]
    for spans in (out.key_spans, out.value_spans):
        if "resource_path" in spans:
            spans["path"] = spans["resource_path"]
    return out
