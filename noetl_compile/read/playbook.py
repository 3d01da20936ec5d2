"""Reading the parts every generation shares: the root, metadata, workload, workbook, workflow."""

from __future__ import annotations

from typing import Any, ClassVar

from ..ast import Playbook, Step, Task
from ..diagnostics import Severity
from ..load import YMap, span_of
from .base import Reader

ROOT_KEYS = {
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "path",
    "description",
    "workload",
    "workbook",
    "workflow",
    "keychain",
    "executor",
}
METADATA_KEYS = {
    "name",
    "path",
    "description",
    "labels",
    "version",
    "tags",
    "owner",
    "author",
    "noetlc",
}
# `metadata.noetlc`: how noetlc compiles this playbook (NoETL's engines ignore metadata keys).
# `fuse: true|false` turns step fusion on or off for it (lower/fuse.py), whatever `--fuse` says.
NOETLC_OPTION_KEYS = {"fuse"}


class PlaybookReader(Reader):
    """Template for a dialect reader: subclasses implement ``read_step`` and ``read_workbook_task``."""

    root_keys = ROOT_KEYS
    root_foreign: ClassVar[dict[str, tuple[str, Severity]]] = {}

    def read(self, root: YMap) -> Playbook:
        self.check_keys(root, self.root_keys, "the playbook root", foreign=self.root_foreign)
        api_version = self.string(root, "apiVersion", "`apiVersion`")
        kind = self.string(root, "kind", "`kind`")
        if kind is not None and kind != "Playbook":
            self.report("S113", self.pos(root, "kind"), f"`kind` must be 'Playbook', not {kind!r}")
        name, catalog_path = self.read_identity(root)
        workload = root.get("workload")
        if workload is not None:
            self.expect(root, "workload", (dict,), "`workload`")
        playbook = Playbook(
            span=span_of(root),
            file=self.document.path,
            dialect=self.dialect,
            api_version=api_version,
            name=name,
            catalog_path=catalog_path,
            workload=workload if isinstance(workload, dict) else None,
            keychain=root.get("keychain"),
            executor=self.read_executor(root),
            workbook=self.read_workbook(root),
            raw=root,
            fuse=self.read_noetlc_options(root).get("fuse"),
        )
        playbook.steps = self.read_workflow(root)
        playbook.entry = self.entry_step(playbook)
        return playbook

    # -- identity ------------------------------------------------------------------------------
    def read_identity(self, root: YMap) -> tuple[str | None, str | None]:
        metadata = self.mapping(root, "metadata", "`metadata`")
        if metadata is not None:
            self.check_keys(metadata, METADATA_KEYS, "`metadata`")
            name = self.string(metadata, "name", "`metadata.name`")
            path = self.string(metadata, "path", "`metadata.path`")
        else:
            name = path = None
        name = name or self.string(root, "name", "`name`")
        path = path or self.string(root, "path", "`path`")
        if name is None and path is None:
            self.report(
                "S101", self.pos(root), "the playbook needs `metadata.name` (or a root `name`)"
            )
        return name, path

    def read_noetlc_options(self, root: YMap) -> dict[str, Any]:
        """``metadata.noetlc``: the compiler's options for this playbook; an unknown key is S103
        with the closest option, a value of the wrong type S102 (and the option is not set)."""
        metadata = root.get("metadata")
        if not isinstance(metadata, dict):
            return {}
        options = self.mapping(metadata, "noetlc", "`metadata.noetlc`")
        if options is None:
            return {}
        self.check_keys(options, NOETLC_OPTION_KEYS, "`metadata.noetlc`")
        found: dict[str, Any] = {}
        if "fuse" in options and self.expect(options, "fuse", (bool,), "`metadata.noetlc.fuse`"):
            found["fuse"] = options["fuse"]
        return found

    def read_executor(self, root: YMap) -> Any:
        return root.get("executor")

    # -- workbook ------------------------------------------------------------------------------
    def read_workbook(self, root: YMap) -> dict[str, Task]:
        tasks: dict[str, Task] = {}
        items = self.sequence(root, "workbook", "`workbook`")
        for index, item in enumerate(items or []):
            if not isinstance(item, YMap):
                self.expect(items, index, (dict,), f"workbook entry {index + 1}")
                continue
            name = self.string(item, "name", f"workbook entry {index + 1} `name`", required=True)
            task = self.read_workbook_task(item, name or f"entry {index + 1}")
            if name is None or task is None:
                continue
            if name in tasks:
                self.report(
                    "S106", self.pos(item, "name"), f"duplicate workbook task name {name!r}"
                )
            tasks[name] = task
        return tasks

    def read_workbook_task(self, item: YMap, name: str) -> Task | None:
        raise NotImplementedError

    # -- workflow ------------------------------------------------------------------------------
    def read_workflow(self, root: YMap) -> list[Step]:
        if "workflow" not in root:
            self.report("S101", self.pos(root), "the playbook needs a `workflow` list of steps")
            return []
        items = self.sequence(root, "workflow", "`workflow`")
        if items is None:
            if root["workflow"] is None:
                self.report("S104", self.pos(root, "workflow"), "the workflow is empty")
            return []
        if not items:
            self.report("S104", self.pos(root, "workflow"), "the workflow is empty")
        steps: list[Step] = []
        seen: dict[str, Step] = {}
        for index, item in enumerate(items):
            if not isinstance(item, YMap):
                self.expect(items, index, (dict,), f"workflow item {index + 1}")
                continue
            if "step" not in item:
                self.report(
                    "S101", self.pos(items, index), f"workflow item {index + 1} needs a `step` name"
                )
                continue
            name = self.string(item, "step", "`step`")
            if item["step"] is None or (name is not None and not name.strip()):
                # `step:` with nothing after it would drop the step without a word, and a blank
                # name is no task id Airflow accepts.
                self.report(
                    "S101",
                    self.key_pos(item, "step") if item["step"] is None else self.pos(item, "step"),
                    f"workflow item {index + 1} needs a `step` name: it is empty",
                )
                continue
            if name is None:
                continue
            step = self.read_step(item, name)
            if name in seen:
                first = seen[name].span
                self.report(
                    "S106",
                    self.pos(item, "step"),
                    f"duplicate step name {name!r} (first defined on line {first.line})",
                )
                continue
            seen[name] = step
            steps.append(step)
        return steps

    def read_step(self, item: YMap, name: str) -> Step:
        raise NotImplementedError

    def step_span(self, item: YMap):
        return self.span(item, "step")

    def open_step(
        self,
        item: YMap,
        name: str,
        known: set[str],
        foreign: dict,
        reported_elsewhere: frozenset[str] = frozenset(),
    ) -> tuple[Step, str]:
        """Check a step's keys against its dialect and start its AST node."""
        label = f"step {name!r}"
        self.check_keys(item, known, label, foreign=foreign, reported_elsewhere=reported_elsewhere)
        desc = item.get("desc")
        step = Step(
            span=self.step_span(item),
            name=name,
            raw=item,
            desc=desc if isinstance(desc, str) else None,
        )
        return step, label

    def entry_step(self, playbook: Playbook) -> str | None:
        """`start` by convention (the spec); subclasses widen it where their engine did."""
        return "start" if playbook.step("start") else None

    def require_entry(self, playbook: Playbook, root: YMap, alternatives: str) -> None:
        if playbook.steps and playbook.entry is None:
            available = ", ".join(playbook.step_names[:8])
            self.report(
                "S105",
                self.pos(root, "workflow"),
                f"no entry step: {alternatives} (steps: {available})",
            )
