"""v1 -> canonical, construct by construct, each with the exact canonical equivalent.

| v1 | canonical | why it is the same |
|---|---|---|
| `apiVersion: noetl.io/v1` | `noetl.io/v2` | the canonical generation's version |
| step `type: K` (or `tool: K`) + inline tool settings | `tool: {kind: K, <settings>}` | the compiler gathers a v1 step's inline settings into the same tool mapping |
| `type: workbook` + `name`/`task: T` | `tool: {kind: workbook, name: T}` | both run workbook task T as written (v1 ignores inline settings on such a step: left, U801) |
| `type: end`/`start`/`router`, no type | no tool (`next: []` when nothing routes on) | a step without a tool produces no result in both |
| step `with`/`args`/`data` | `input` | the step input the runtime renders (payload `input`) |
| `mode` on a step that is not an iterator | `mode` in the tool | v1 hands the whole step to its tool (NoETL 96458eef's snowflake executor: `task_config.get('mode', 'append')`) |
| `next: [a, b]` (direct entries) | `next: {spec: {mode: inclusive}, arcs: [...]}` | v1 fires every direct entry; a canonical list is exclusive |
| `next: [{when: c, then: [t]}, ..., {else: [e]}]` | `next: {spec: {mode: exclusive}, arcs: [{step: t, when: c}, ..., {step: e}]}` | first match wins in both, in the same order |
| `next: [{when: c, step: t}, ...]` (no `then`/`else`) | `next: {spec: {mode: inclusive}, arcs: [{step: t, when: c}, ...]}` | every entry whose `when` holds fires in both (NoETL's v1 broker evaluates each) |
| workbook `{name, type: K, <settings>, with}` | `{name, tool: {kind: K, <settings>, args: <with>}}` | the same tool mapping (a task's `with` is its tool's `args`) |
| `next: [{step: t, with: V}]`, the only way into `t`, `t` binding no input, `V` reading step results and the workload | `next: [{step: t}]` and `input: V` on `t` | the runtime lays passed values over the target's (empty) input; nothing else runs `t`; `V` reads the same in `t` |
| `type: iterator` + `collection`, `element`, `mode` + `task: {type: K, <settings>, with}` | `loop: {in, iterator, spec: {mode}}` + `tool: {kind: K, <settings>, args: <with>}` (`async` -> `parallel`) | the reader makes the same loop and tool of both; exact within the canonical result bound, which U804 states |
| `assert: {expects, returns}` (task or step) | the same lines as a comment | no v1 engine read it (NoETL 0d51146e .. 8cc6b80b) |

Left as written (U801): loops (`loop`, `end_loop`), an iterator's per-item `save`, `save`/`sink`, `retry`,
`pass` (NoETL 0d51146e's broker skips a step whose `pass` renders true; canonical has no skip),
`result`, other values passed along `next` (`with` on an entry), a `then` firing several
steps, a template reading `<step>.result` (a v1 result answers `.result` with itself; a canonical
one does not), root `environment`/`context`, and kinds with no canonical counterpart.
"""

from __future__ import annotations

from typing import Any

from ..analyze.expressions import scan_template
from ..analyze.sites import template_sites
from ..ast import Playbook
from ..read.base import TOOL_KINDS
from ..read.v1 import INLINE_TOOL_KEYS, PAYLOAD_IS_SETTING
from . import v1_loop
from .case_v2 import _one_statement
from .case_v2_unsafe import RETRY_REASON, SINK_REASON
from .edits import Edits, flow, note, render, seq
from .findings import Findings
from .guards import addressable, rebind
from .rewriter import Rewriter
from .v1_unsafe import NO_TOOL, PASS_REASON, V1UnsafeFixes, kind_of

# 58c2a16b's postgres plugin keys its result by statement like dc55c492's (recorded: the
# table-making step of tests/differential/cases/dsl_keys/v1_transfer_*); 138c10ed's does not.
V1_POSTGRES_REASON = (
    "a v1 postgres step's result holds one entry per statement (`command_0`, `command_1`, "
    "...), a canonical one only the last statement's result (`rows`, `row_count`, ...)"
)

ITERATOR_KEYS = ("collection", "element", "mode", "iterator")
ITERATOR_STEP_KEYS = {"step", "desc", "type", "collection", "element", "mode", "task", "next"}
ITERATOR_TASK_KEYS = {"type", "name", "task", "desc", *("with", "args", "data", "input")}
# The v1 side of a loop's bound (U804): NoETL's canonical engine bounds the result (case_v2
# LOOP_BOUND); noetlc's v1 loop kept every result and failed the step on a `collection` that is
# neither a list nor a mapping (airflow_plugin/runtime/loop.py `_as_list`).
V1_LOOP_BOUND = (
    "a canonical loop result keeps only the last 128 results and previews any over 64 KiB "
    "(NoETL's NOETL_LOOP_RESULT_MAX_ITEMS/_BYTES), and takes a `collection` that is not a list "
    "as one item; v1 kept every result whole and failed on a string or a number: the same for a "
    "list of up to 128 items of up to 64 KiB"
)
# NoETL 96458eef plugin/iterator/config.py: `parallel` is `async`, `concurrency` 8 by default.
V1_CONCURRENCY = (
    "NoETL's v1 engine ran `{mode}` items at most 8 at a time (its `concurrency`), a canonical "
    "`parallel` loop runs them all together"
)
INPUT_KEYS = ("with", "args", "data", "input")
LEFT = {
    "loop": "a v1 loop routes into body steps closed by `end_loop`; canonical loops run the step "
    "itself per item",
    "end_loop": "the end of a v1 loop body",
    "save": SINK_REASON,
    "sink": SINK_REASON,
    "retry": RETRY_REASON,
    "pass": PASS_REASON,
    "result": "a v1 loop's per-item result",
    "collection": "a v1 iterator step",
    "element": "a v1 iterator step",
    "mode": "a v1 iterator step",
    "filter": "no canonical equivalent",
    "as": "no canonical equivalent",
    "iterator": "a v1 iterator step",
}
WORKBOOK_KEYS = {"name", "type", "desc", "tool", *INPUT_KEYS} | INLINE_TOOL_KEYS
# Keys no v1 engine reads (NoETL 0d51146e .. 6806656d: `assert` is documentation of a task's
# inputs and outputs): dropping one changes nothing, so it is kept as a comment.
UNREAD = {
    "assert": "`assert` ({label}) was never read by NoETL's v1 engines (documentation only); "
    "kept as a comment",
}

# A step's `name` beside a tool that is not a workbook call: NoETL's v1 worker took it only as
# the task's label (58c2a16b worker.py: `task_name = action_cfg.get("name") or node_id`, the
# node name of its events); no canonical step key holds a label beside `step` and `desc`.
LABEL = (
    "`name` ({label}) only labelled the task in NoETL's v1 events; a canonical step is named by "
    "`step`: kept as a comment"
)


class V1Upgrade(V1UnsafeFixes, Rewriter):
    def __init__(self, playbook: Playbook, doc: Any, edits: Edits, findings: Findings) -> None:
        super().__init__(playbook, doc, edits, findings)
        self.kinds = TOOL_KINDS["canonical"]

    def run(self) -> None:
        doc = self.doc
        for key in ("environment", "context"):
            if key in doc:
                self.inexact(doc, key, f"root `{key}` is not part of the canonical generation")
        if str(doc.get("apiVersion")) == "noetl.io/v1":
            line, _ = doc.lc.value("apiVersion")
            text = self.lines[line]
            self.edits.replace(line, line + 1, [text.replace("noetl.io/v1", "noetl.io/v2", 1)])
        self.result_reads()
        self.workbook()
        self.folds = v1_loop.plan(self)  # without --unsafe-fixes: offered on the loop step
        super().run()

    def result_reads(self) -> None:
        """`{{ s.result }}` of a v1 step answers with the result itself (NoETL's v1 proxy); a
        canonical result has no such fallback."""
        steps = set(self.playbook.step_names)
        for site in template_sites(self.playbook):
            if self.findings.unsafe and site.field.split(".")[0] in ("save", "sink"):
                continue  # the sink is kept as a comment (unsafe fix `sink-removed`)
            scan = scan_template(site.value)
            if any(r.root in steps and r.path[:1] == ("result",) for r in scan.references):
                span = site.value.span
                line, column = span.line - 1, span.col - 1
                message = (
                    f"{site.field} reads `<step>.result`, which a v1 result answers with itself "
                    "and a canonical one does not"
                )
                self.findings.inexact(line, column, message)
                indent = len(self.lines[line]) - len(self.lines[line].lstrip())
                self.edits.replace(line, line, [" " * indent + f"# noetlc upgrade: {message}\n"])

    # -- workbook ------------------------------------------------------------------------------
    def workbook(self) -> None:
        items = self.doc.get("workbook")
        if not hasattr(items, "lc"):
            return
        ends = [items.lc.item(i)[0] for i in range(1, len(items))] + [self._after("workbook")]
        for index, task in enumerate(items):
            if hasattr(task, "lc"):
                self.workbook_task(task, ends[index])

    def _after(self, root_key: str) -> int:
        keys = list(self.doc)
        after = keys.index(root_key) + 1
        return self.doc.lc.key(keys[after])[0] if after < len(keys) else len(self.lines)

    def workbook_task(self, task: Any, end: int) -> None:
        label = f"workbook task {task.get('name')!r}"
        if not self.unread(task, label, end):
            return
        other = [k for k in task if k not in WORKBOOK_KEYS and k not in UNREAD]
        for key in other:
            self.inexact(
                task, key, f"`{key}` of {label}: {LEFT.get(key, 'no canonical equivalent')}"
            )
        if other or "tool" in task:
            if "tool" in task and not other:
                self.inexact(task, "tool", f"`tool` of {label} spelled inside a v1 task")
            return
        kind = task.get("type")
        if str(kind) not in self.kinds:
            self.inexact(task, "type", f"tool kind {kind!r} of {label} has no canonical kind")
            return
        tool = {"kind": kind}
        settings = [k for k in task if k in INLINE_TOOL_KEYS]
        for key in settings:
            tool[key] = task[key]
        bindings = [k for k in INPUT_KEYS if isinstance(task.get(k), dict)]
        if bindings:
            tool["args"] = task[bindings[0]]
        if len([k for k in INPUT_KEYS if k in task]) > 1:
            self.inexact(task, bindings[0], f"{label} binds inputs under several keys")
            return
        keys = ["type", *settings, *[k for k in INPUT_KEYS if k in task]]
        order = sorted(keys, key=lambda k: task.lc.key(k)[0])
        self.replace_keys(task, order, end, "tool", _map(tool))

    # -- steps ---------------------------------------------------------------------------------
    def step(self, item: Any, end: int) -> None:
        name = str(item.get("step"))
        label = f"step {name!r}"
        if not self.unread(item, label, end):
            return
        folded = self.fold(item, name, label, end) if self.folds else set()
        if "*" in folded:
            return
        policy, attempted = self.unsafe_keys(item, label, end)
        attempted |= folded
        iterator = str(item.get("type")) == "iterator"
        # `mode` is a loop setting only on an iterator step; on any other v1 step the reader
        # hands the whole step to the tool (read/v1.py: ``config=item``), so it is a tool
        # setting (a transfer's `mode: append`) and moves into the tool like the others.
        # An iterator's own keys are rewritten by `iterator` below.
        left = [
            k
            for k in item
            if k in LEFT
            and k not in (ITERATOR_KEYS if iterator else ("mode",))
            and k not in attempted
        ]
        for key in left:
            self.inexact(item, key, f"`{key}` of {label}: {LEFT[key]}")
        if policy is not None and (iterator or kind_of(item) in (None, "workbook", *NO_TOOL)):
            self.inexact(item, "retry", f"`retry` of {label}: no tool of its own to retry")
            return
        if iterator:
            if not left and self.iterator(item, label, end) and "next" in item:
                self.next(item, label, end)
            return
        kind_key = (
            "type" if "type" in item else "tool" if isinstance(item.get("tool"), str) else None
        )
        kind = str(item[kind_key]) if kind_key else None
        if isinstance(item.get("tool"), dict):
            self.inexact(item, "tool", f"`tool` mapping of the v1 {label}")
            return
        if left:
            return
        if "payload" in item and kind not in PAYLOAD_IS_SETTING:
            # 58c2a16b binds it as the call's arguments (read/v1.py step_input); a canonical
            # tool would take it as a setting, so the arguments would be lost.
            self.inexact(item, "payload", f"`payload` of {label} binds the call's arguments")
            return
        inputs = [k for k in item if k in INPUT_KEYS]  # in the file's order
        merged = _merged_inputs(item, inputs) if len(inputs) > 1 else None
        if len(inputs) > 1 and merged is None:
            self.inexact(item, inputs[1], f"{label} binds inputs under several keys")
            return
        settings = [k for k in item if k in INLINE_TOOL_KEYS or k == "mode"]
        if (
            kind != "workbook"
            and "name" in item
            and not self.comment_out(item, "name", end, LABEL.format(label=label))
        ):
            self.inexact(item, "name", f"`name` of {label} opens its item's line")
            return
        if kind == "workbook":
            task = item.get("name", item.get("task"))
            if settings:
                self.inexact(
                    item,
                    settings[0],
                    f"tool settings on the workbook call {label}: v1 ignores "
                    "them, a canonical call would apply them",
                )
                return
            keys = [kind_key, *(k for k in ("name", "task") if k in item)]
            self.move(item, keys, end, {"kind": "workbook", "name": task})
        elif kind is not None and kind not in NO_TOOL:
            if kind not in self.kinds:
                self.inexact(item, kind_key, f"tool kind {kind!r} of {label} has no canonical kind")
                return
            tool = {"kind": item[kind_key]}
            for key in settings:
                tool[key] = item[key]
            if kind.strip().lower() == "postgres":
                reason = f"`{kind_key}` of {label}: {V1_POSTGRES_REASON}"
                if not self.unsafe_fix(item, kind_key, "postgres-result", reason):
                    return
                if _one_statement(tool) and addressable(name):
                    # One statement: its `command_0` is the canonical tool's whole result.
                    self.findings.renames.append((f"{name}.command_0", name))
            if policy is not None:
                tool["spec"] = policy
            self.move(item, [kind_key, *settings], end, tool)
        elif kind is not None:
            self.drop(item, kind_key, end, add_next="next" not in item)
        elif "next" not in item:
            self.add_empty_next(item, end)
        if merged is not None:
            self.replace_keys(item, inputs, end, "input", _map(merged))
        elif inputs and inputs[0] != "input":
            self.rename(item, inputs[0], "input")
        if "next" in item:
            self.next(item, label, end)

    def iterator(self, item: Any, label: str, end: int) -> bool:
        """`type: iterator` + `collection` + `element` + `mode` + `task` -> a canonical loop
        step: `loop: {in, iterator, spec: {mode}}` and the task as its `tool`. The reader makes
        the same loop of both (read/v1.py read_iterator_step: the task is the step's tool, its
        `with` the tool's args); the canonical result bound is stated (U804). False when it is
        left (U801 given)."""
        task = item.get("task")
        if not isinstance(task, dict) or not hasattr(task, "lc"):
            self.inexact(item, "task", f"`task` of the iterator {label} is not a mapping")
            return False
        other = [k for k in item if k not in ITERATOR_STEP_KEYS]
        if other:
            self.inexact(item, other[0], f"`{other[0]}` of the iterator {label}")
            return False
        task_label = f"the task of {label}"
        for key in [k for k in task if k in UNREAD]:
            # The task is replaced whole: the unread key goes above it as a comment.
            line, column = task.lc.key(key)
            lines = [note(column, UNREAD[key].format(label=task_label))]
            self.edits.replace(line, line, lines + self.as_comment(key, task[key], column))
        done = True
        for key in task:
            if key in UNREAD:
                continue  # kept as a comment (unread)
            if key in ("save", "sink"):
                # Each item's result is saved: a sink, whatever the loop becomes. The task is
                # replaced whole, so an unsafe fix keeps the sink as a comment above it.
                column = task.lc.key(key)[1]
                kept = self.as_comment(key, task[key], column)
                reason = f"`{key}` of {task_label}: {SINK_REASON}"
                done = self.unsafe_fix(task, key, "sink-removed", reason, kept) and done
            elif key not in ITERATOR_TASK_KEYS and key not in INLINE_TOOL_KEYS:
                why = LEFT.get(key, "no canonical equivalent")
                self.inexact(task, key, f"`{key}` of {task_label}: {why}")
                done = False
        bindings = [k for k in INPUT_KEYS if k in task]
        if len(bindings) > 1:
            self.inexact(task, bindings[1], f"{task_label} binds inputs under several keys")
            done = False
        kind = str(task.get("type"))
        if done and kind == "workbook":
            settings = [k for k in task if k in INLINE_TOOL_KEYS or k == "mode"]
            if settings or bindings:
                self.inexact(
                    task,
                    (settings + bindings)[0],
                    f"`{(settings + bindings)[0]}` of the workbook call of {task_label}",
                )
                done = False
            tool: dict = {"kind": task["type"], "name": task.get("name", task.get("task"))}
        elif done:
            if kind not in self.kinds:
                self.inexact(
                    task, "type", f"tool kind {kind!r} of {task_label} has no canonical kind"
                )
                return False
            tool = {"kind": task["type"]}
            for key in task:
                if key in INLINE_TOOL_KEYS or key == "mode":
                    tool[key] = task[key]
            if bindings and isinstance(task[bindings[0]], dict):
                tool["args"] = task[bindings[0]]
            elif bindings:
                self.inexact(task, bindings[0], f"`{bindings[0]}` of {task_label} is not a mapping")
                done = False
        if not done:
            return False
        mode = str(item.get("mode", "sequential"))
        loop = _map({"in": item["collection"], "iterator": item["element"]})
        if "mode" in item:
            loop["spec"] = flow({"mode": "parallel" if mode == "async" else item["mode"]})
        message = f"iterator of {label}: {V1_LOOP_BOUND}"
        if mode != "sequential":
            message += f"; {V1_CONCURRENCY.format(mode=mode)}"
        self.within_bound(item, "type", message)
        keys = sorted(
            (k for k in ("type", "collection", "element", "mode") if k in item),
            key=lambda k: item.lc.key(k)[0],
        )
        self.replace_keys(item, keys, end, "loop", loop)
        self.replace_keys(item, ["task"], end, "tool", _map(tool))
        return True

    def unread(self, mapping: Any, label: str, end: int) -> bool:
        """Comment out the keys no v1 engine read; False when one cannot be (U801 given)."""
        done = True
        for key in [k for k in mapping if k in UNREAD]:
            if not self.comment_out(mapping, key, end, UNREAD[key].format(label=label)):
                self.inexact(mapping, key, f"`{key}` of {label} opens its item's line")
                done = False
        return done

    def move(self, item: Any, keys: list[str], end: int, tool: dict) -> None:
        order = sorted(keys, key=lambda k: item.lc.key(k)[0])
        self.replace_keys(item, order, end, "tool", _map(tool))

    def drop(self, item: Any, key: str, end: int, *, add_next: bool) -> None:
        start, stop = self.region(item, key, end)
        column = item.lc.key(key)[1]
        self.edits.replace(start, stop, [" " * column + "next: []\n"] if add_next else [])

    def add_empty_next(self, item: Any, end: int) -> None:
        last = list(item)[-1]
        start, stop = self.region(item, last, end)
        while stop > start + 1 and self.lines[stop - 1].strip()[:1] in ("", "#"):
            stop -= 1  # comments after the step belong to what follows
        column = item.lc.key("step")[1]
        line = " " * column + "next: []\n"
        if not self.lines[stop - 1].endswith("\n"):
            line = "\n" + line
        self.edits.replace(stop, stop, [line])

    # -- routing -------------------------------------------------------------------------------
    def next(self, item: Any, label: str, end: int) -> None:
        value = item["next"]
        if value is None or isinstance(value, (str, int, float)):
            return
        entries = value if isinstance(value, list) else [value]
        # `then`/`else` blocks: first match wins; `{when, step}` entries each fire when their
        # `when` holds, beside the direct ones (NoETL's v1 broker, 58c2a16b): inclusive.
        conditional = any(isinstance(e, dict) and ("then" in e or "else" in e) for e in entries)
        arcs: list[Any] = []
        passed = False
        for index, entry in enumerate(entries):
            where = f"entry {index + 1} of `next` of {label}"
            if not isinstance(entry, dict):
                arcs.append(flow({"step": entry}))
                continue
            if any(k in entry for k in INPUT_KEYS):
                moved = self.pass_as_input(entry, where)
                if moved is None:
                    self.inexact(
                        item,
                        "next",
                        f"values passed along {where}: a canonical arc passes none, and they "
                        "cannot move to the target's `input` (its only way in, with no input "
                        "of its own, values read from step results and the workload)",
                    )
                    return
                passed = True
                arcs.append(flow({"step": moved}))
                continue
            if "when" in entry or "else" in entry:
                found = self.conditional(entry, where, item)
                if found is None:
                    self.inexact(item, "next", f"{where} has no exact canonical arc")
                    return
                arcs += found
            else:
                arcs.append(flow({"step": entry["step"]}))
        if not conditional and len(arcs) <= 1 and isinstance(value, list):
            if passed:  # the values moved: the entry routes only
                self.replace_keys(item, ["next"], end, "next", seq(arcs))
            return  # one direct entry: the same in canonical
        mode = "exclusive" if conditional else "inclusive"
        router = {"spec": flow({"mode": mode}), "arcs": seq(arcs)}
        self.replace_keys(item, ["next"], end, "next", _map(router))

    def pass_as_input(self, entry: dict, where: str) -> str | None:
        """Values passed along a direct `next` entry become the target's `input` when that is
        the same: the entry is the target's only way in (so nothing else runs it without them),
        the target binds no input of its own (the runtime lays passed values over it), and the
        values read only step results and the workload, which the target sees as the step
        that routes does. Returns the target, its `input` added; None when not the same."""
        if "when" in entry or "else" in entry or "then" in entry:
            return None
        keys = [k for k in INPUT_KEYS if k in entry]
        values = entry[keys[0]]
        target = str(entry.get("step"))
        step = self.playbook.step(target)
        holder = self.workflow_item(target)
        if len(keys) != 1 or not isinstance(values, dict) or step is None or holder is None:
            return None
        own = [k for k in INPUT_KEYS if k in holder]
        if self.playbook.entry == target or (own and not _forwards(holder, own, values)):
            return None
        if self.ways_in(target) != 1 or (holder.fa.flow_style() if hasattr(holder, "fa") else True):
            return None
        readable = set(self.playbook.step_names) | _ENGINE_NAMES | set(self.playbook.workload)
        for value in _strings(values):
            scan = scan_template(value)
            if scan.error is not None or any(r.root not in readable for r in scan.references):
                return None
        if own:  # its input only forwards the passed values: they replace it
            workflow = self.doc["workflow"]
            index = next(i for i, item in enumerate(workflow) if item is holder)
            self.replace_keys(holder, own, self.step_ends(workflow)[index], "input", _map(values))
            return target
        line, column = holder.lc.key("step")
        block = render("input", values, column)
        self.edits.replace(line + 1, line + 1, block)
        return target

    def conditional(self, entry: dict, where: str, item: Any) -> list | None:
        is_else = "else" in entry
        when = None if is_else else entry.get("when")
        if isinstance(when, str):
            kind = item.get("type", item.get("tool"))
            # A step without a tool leaves the v1 engine's `result` as the step before set it.
            has_tool = kind is not None and str(kind) not in NO_TOOL
            when = self.own_result(when, str(item.get("step")) if has_tool else "")
            if when is None:
                return None
        if "step" in entry and "then" not in entry:
            targets: Any = [entry["step"]]
        else:
            targets = entry.get("else" if is_else else "then")
            targets = targets if isinstance(targets, list) else [targets]
        if len(targets) != 1:
            return None  # several steps at once under one guard
        target = targets[0]
        if isinstance(target, dict):
            extra = set(target) - {"step"}
            if extra and not (extra <= set(INPUT_KEYS) and self.pass_as_input(target, where)):
                return None
            target = target["step"]
        arc = {"step": target}
        if when is not None:
            arc["when"] = when
        return [flow(arc)]

    @staticmethod
    def own_result(when: Any, step: str) -> Any:
        """A v1 condition reads the step's result as `result`; a canonical arc reads it by the
        step's name. None when that cannot be written exactly."""
        scan = scan_template(when)
        own = [r for r in scan.references if r.root == "result"]
        if not own:
            return when
        if not addressable(step) or any(r.path[:1] == ("result",) for r in own):
            return None  # `result.result`: v1's proxy answers it with the result itself
        rebound = rebind(str(when), frozenset({"result"}), step)
        return None if rebound is None else type(when)(rebound) if _keeps_style(when) else rebound


# What every step's templates see alike: the workload (also as ctx) and the execution's ids.
_ENGINE_NAMES = frozenset({"workload", "ctx", "execution_id", "job"})


def _forwards(holder: Any, own: list[str], passed: dict) -> bool:
    """Whether a target's own input binds nothing but the values passed to it: one mapping whose
    every entry is `k: "{{ k }}"` for a passed `k`. The runtime lays passed values over the
    target's input, so such an input says nothing the passed values do not."""
    if len(own) != 1 or not isinstance(holder[own[0]], dict):
        return False
    for key, value in holder[own[0]].items():
        if str(key) not in passed or not isinstance(value, str):
            return False
        scan = scan_template(value)
        refs = scan.references
        if scan.error is not None or len(refs) != 1 or refs[0].root != str(key) or refs[0].path:
            return False
        if value.strip().replace(" ", "") != "{{" + str(key) + "}}":
            return False  # a filter or text around the name changes the value
    return True


def _merged_inputs(item: Any, keys: list[str]) -> dict | None:
    """A v1 step's several input mappings as the one canonical `input`: NoETL's v1 worker binds
    them all (96458eef noetl/worker/worker.py, the task_data merge; read/v1.py step_input does
    the same). Exact only when no key is bound twice, so no precedence decides a value, and
    `data` is not beside `args` (the worker then drops `data`). None otherwise."""
    if "args" in keys and "data" in keys:
        return None
    merged: dict = {}
    for key in keys:
        values = item[key]
        if not isinstance(values, dict) or not values or set(values) & set(merged):
            return None
        merged.update(values)
    return merged


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _keeps_style(value: Any) -> bool:
    # ruamel.yaml's quoted scalar types take their text as the only argument
    return type(value) is not str


def _map(values: dict) -> Any:
    from ruamel.yaml.comments import CommentedMap

    return CommentedMap(values)
