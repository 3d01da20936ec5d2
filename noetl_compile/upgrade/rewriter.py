"""What every generation's rewriter shares: positions in the round-trip document, the walk over
the workflow, and the edits (a rename on its line, a block replaced, a U801 note)."""

from __future__ import annotations

from typing import Any

from ..analyze.names import name_table
from ..ast import Playbook
from .edits import Edits, comment_lines, note, render
from .findings import Findings
from .unsafe import kind as unsafe_kind

# Names an arc guard sees as a case rule does: workload, ctx and step results (`event`,
# `response`, `result`, `error`, `vars` and `args` are bound differently for a case rule).
# `spec` (unless a workload key, a step or a variable takes the name) is bound in neither: a
# playbook's root `spec` reaches no template (NoETL dc55c492's get_render_context and 138c10ed's
# arc context hold no `spec`; nor does noetlc's), so a guard reading it fails alike in both.
_SAME_IN_ARCS = ("workload", "ctx", "execution_id", "job", "spec")


class Rewriter:
    """Walks the workflow of the round-trip document and edits the original text."""

    def __init__(self, playbook: Playbook, doc: Any, edits: Edits, findings: Findings) -> None:
        self.playbook = playbook
        self.doc = doc
        self.edits = edits
        self.findings = findings
        self.lines = edits.lines
        names = name_table(playbook)
        self.arc_names = set(names.steps) | set(names.workload) | set(names.bound)
        self.arc_names |= set(_SAME_IN_ARCS)
        self.current_step: str | None = None  # the step being rewritten (None: the workbook)

    # -- positions -----------------------------------------------------------------------------
    def key_line(self, mapping: Any, key: str) -> tuple[int, int]:
        return mapping.lc.key(key)

    def region(self, mapping: Any, key: str, end: int) -> tuple[int, int]:
        """Lines of ``key`` and its value: up to the next key of ``mapping`` (or ``end``), less
        the blank lines and the comments indented no deeper than the key before it (a comment
        above the next step belongs to that step; a deeper `#` line may be block-scalar text)."""
        keys = list(mapping)
        start, column = mapping.lc.key(key)
        position = keys.index(key)
        stop = mapping.lc.key(keys[position + 1])[0] if position + 1 < len(keys) else end
        while stop > start + 1:
            line = self.lines[stop - 1]
            text = line.strip()
            if text and not (text.startswith("#") and len(line) - len(line.lstrip()) <= column):
                break
            stop -= 1
        return start, stop

    def step_ends(self, workflow: Any) -> list[int]:
        starts = [workflow.lc.item(i)[0] for i in range(len(workflow))]
        root_keys = list(self.doc)
        after = root_keys.index("workflow") + 1
        end = self.doc.lc.key(root_keys[after])[0] if after < len(root_keys) else len(self.lines)
        # The line of a step's first key is its start; the next step starts one line sooner
        # than its key when the dash stands alone, so stop at the dash's line.
        return [*(s for s in starts[1:]), end]

    def workflow_item(self, name: str) -> Any:
        """The round-trip mapping of step ``name`` (None when there is none)."""
        for item in self.doc.get("workflow") or []:
            if hasattr(item, "lc") and str(item.get("step")) == name:
                return item
        return None

    def ways_in(self, target: str) -> int:
        """How many arcs of the playbook (case rules' targets among them) lead to ``target``."""
        return sum(
            arc.target == target for other in self.playbook.steps for arc in other.router.arcs
        )

    # -- the walk ------------------------------------------------------------------------------
    def run(self) -> None:
        workflow = self.doc.get("workflow")
        if not hasattr(workflow, "lc"):
            return
        ends = self.step_ends(workflow)
        for index, item in enumerate(workflow):
            if hasattr(item, "lc"):
                self.current_step = str(item.get("step"))
                self.step(item, ends[index])

    # -- edits ---------------------------------------------------------------------------------
    def inexact(self, mapping: Any, key: str, message: str) -> None:
        line, column = mapping.lc.key(key)
        self.findings.inexact(line, column, message)
        self.edits.replace(line, line, [note(column, message)])

    def unsafe_fix(
        self, mapping: Any, key: str, name: str, reason: str, kept: list[str] | None = None
    ) -> bool:
        """An unsafe fix of kind ``name`` at ``key``: with ``--unsafe-fixes`` a U805 warning and
        a note above ``key`` say what behaves differently (the catalogue's text, ``unsafe.py``)
        and True is returned for the caller to rewrite (``kept``: lines written under the
        note, the construct kept as a comment where its block is replaced whole); without, the construct is left (U801,
        ``reason``) naming the fix that is available, and False is returned."""
        line, column = mapping.lc.key(key)
        # The note at the line's own indent: a key inside a flow mapping (`tool: {kind: ..}`)
        # sits deeper than its line, and a deeper comment after a block scalar is its text.
        text = self.lines[line]
        column = min(column, len(text) - len(text.lstrip()))
        fix = unsafe_kind(name)
        if not self.findings.unsafe:
            self.findings.available.append((name, line, self.current_step))
            self.inexact(mapping, key, f"{reason} (unsafe fix `{name}` available: --unsafe-fixes)")
            return False
        message = fix.note(self.playbook.dialect or "")
        if any(n == name and s == self.current_step for n, _, s in self.findings.applied):
            # One fix per kind and step: its note says it already; only what is kept goes in.
            self.edits.replace(line, line, list(kept or []))
            return True
        self.findings.applied.append((name, line, self.current_step))
        self.findings.add("U805", line, column, message)
        self.edits.replace(line, line, [note(column, message), *(kept or [])])
        return True

    @staticmethod
    def as_comment(key: str, value: Any, column: int) -> list[str]:
        """``key: value`` as comment lines, for ``unsafe_fix``'s ``kept``: a key inside a block
        that is replaced whole (the zero-width insert moves above it, ``Edits.apply``)."""
        block = render(key, value, column)
        return [" " * column + "# " + text[column:] for text in block if text.strip()]

    def tool_spec(self, item: Any, end: int, spec: Any, label: str) -> bool:
        """Add ``spec`` (a retry policy) to the step's block-style tool mapping, after its last
        key; False (U801 given) when the tool is not such a mapping or has a `spec` already."""
        tool = item.get("tool")
        flow_style = getattr(getattr(tool, "fa", None), "flow_style", lambda: True)()
        if not hasattr(tool, "lc") or not tool or flow_style or "spec" in tool:
            self.inexact(item, "tool", f"the tool of {label} cannot take a `spec.policy`")
            return False
        column = tool.lc.key(next(iter(tool)))[1]
        stop = self.region(item, "tool", end)[1]
        self.edits.replace(stop, stop, render("spec", spec, column))
        return True

    def within_bound(self, mapping: Any, key: str, message: str) -> None:
        """A rewrite that is exact only under a condition the upgrade cannot see (a collection's
        size): once the whole upgrade is complete, a note above ``key`` and a U804 warning state
        the condition (``Findings.settle``); beside a U801 the file is not written anyway."""
        line, column = mapping.lc.key(key)
        self.findings.bounded.append((line, column, message))

    def comment_out(self, mapping: Any, key: str, end: int, message: str | None) -> bool:
        """Keep ``key`` and its value as YAML comments under a note: for a key the old
        generation's engines never read, whose absence therefore means the same. False (nothing
        edited) when the key opens its item's `- ` line, whose dash the next key would need."""
        start, stop = self.region(mapping, key, end)
        column = mapping.lc.key(key)[1]
        if self.lines[start][:column].strip():
            return False
        lines = [note(column, message)] if message is not None else []  # None: noted already
        for line in self.lines[start:stop]:
            text = line.rstrip("\n")
            indent = min(column, len(text) - len(text.lstrip()))
            lines.append(" " * indent + "# " + text[indent:] + "\n" if text.strip() else "\n")
        self.edits.replace(start, stop, lines)
        return True

    def rename(self, mapping: Any, old: str, new: str) -> None:
        line, column = mapping.lc.key(old)
        text = self.lines[line]
        assert text[column : column + len(old)] == old, (text, column, old)
        self.edits.replace(line, line + 1, [text[:column] + new + text[column + len(old) :]])

    def replace_keys(self, item: Any, keys: list[str], end: int, key: str, value: Any) -> None:
        """Put ``key: value`` where the first of ``keys`` was, dropping the others; comments
        written inside the replaced lines are kept above the new block."""
        if getattr(item, "fa", None) is not None and item.fa.flow_style():
            self.inexact(
                item, keys[0], "a step written in flow style (`{...}`): rewrite it by hand"
            )
            return
        regions = sorted(self.region(item, k, end) for k in keys)
        column = item.lc.key(keys[0])[1]
        kept: list[str] = []
        for start, stop in regions:
            kept += comment_lines(self.lines[start + 1 : stop])
            first = self.lines[start]
            kept += comment_lines([first])
        kept = [" " * column + line.lstrip() for line in kept]  # at the new block's indent
        first_start, first_stop = regions[0]
        block = render(key, value, column)
        prefix = self.lines[first_start][:column]
        if prefix.strip():  # the block starts on the item's `- ` line: keep the dash there
            block[0] = prefix + block[0][column:]
        self.edits.replace(first_start, first_stop, kept + block)
        for start, stop in regions[1:]:
            self.edits.replace(start, stop, [])
