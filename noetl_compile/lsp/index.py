"""What the language server knows about one open playbook, built from one run of the checker.

Plain Python (no pygls): the server turns these answers into LSP messages, tests can ask them
directly. Positions here are 0-based (line, column) as LSP counts them; columns are counted in
characters, which equals LSP's UTF-16 units outside the astral planes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..analyze.expressions import scan_template
from ..ast import Playbook, Step
from ..check import FileResult, check_text
from ..check.context import CheckContext, Project
from ..diagnostics import Diagnostic, DiagnosticSink
from ..discover import looks_like_playbook
from ..read.base import TOOL_KINDS

# A name as the readers and templates spell one (step names, workload keys).
_WORD = re.compile(r"[A-Za-z0-9_\-]+")


@dataclass(frozen=True, slots=True)
class Place:
    line: int  # 0-based
    start: int  # 0-based column of the first character
    end: int  # column after the last character


@dataclass(frozen=True, slots=True)
class StepReference:
    place: Place
    target: str
    via: str  # "arc" or "template"
    path: tuple = ()  # the fields read after the step name (templates)


@dataclass
class DocumentIndex:
    """One checked version of a document."""

    text: str
    result: FileResult
    dialect: str | None = None
    definitions: dict[str, Place] = field(default_factory=dict)
    references: list[StepReference] = field(default_factory=list)
    workload_keys: list[str] = field(default_factory=list)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.result.diagnostics

    @property
    def playbook(self) -> Playbook | None:
        return self.result.playbook

    # -- questions -----------------------------------------------------------------------------
    def reference_at(self, line: int, column: int) -> StepReference | None:
        for reference in self.references:
            place = reference.place
            if place.line == line and place.start <= column <= place.end:
                return reference
        return None

    def step_at(self, line: int, column: int) -> str | None:
        """The step a position names: a reference to it, or its own `step:` name."""
        reference = self.reference_at(line, column)
        if reference is not None:
            return reference.target
        for name, place in self.definitions.items():
            if place.line == line and place.start <= column <= place.end:
                return name
        return None

    def definition(self, line: int, column: int) -> Place | None:
        reference = self.reference_at(line, column)
        return self.definitions.get(reference.target) if reference else None

    def kinds(self) -> list[str]:
        return sorted(TOOL_KINDS.get(self.dialect or "canonical", TOOL_KINDS["canonical"]))

    def hover(self, line: int, column: int) -> str | None:
        name = self.step_at(line, column)
        step = self.playbook.step(name) if self.playbook and name else None
        return result_shape(step, self) if step else None


def _place(span, text: str, lines: list[str]) -> Place | None:
    """Where a step name written at ``span`` sits (quotes skipped)."""
    if span is None:
        return None
    line = span.line - 1
    column = span.col - 1 + (1 if getattr(span, "style", None) in ("'", '"') else 0)
    if line >= len(lines):
        return None
    return Place(line, column, column + len(text))


def build_index(text: str, path: str) -> DocumentIndex:
    """Check ``text`` as the file ``path`` and index what the editor asks about."""
    result = check_text(text, path)
    data = result.document.data
    if data is not None and not looks_like_playbook(data):
        # A docker-compose.yml or CI config open in the same editor: not ours to report on.
        result.diagnostics.clear()
        result.playbook = None
    index = DocumentIndex(text=text, result=result)
    playbook = result.playbook
    if playbook is None:
        return index
    index.dialect = playbook.dialect
    lines = text.split("\n")
    if isinstance(playbook.workload, dict):
        index.workload_keys = [str(key) for key in playbook.workload]
    for step in playbook.steps:
        place = _place(step.span, step.name, lines)
        if place is not None:
            index.definitions.setdefault(step.name, place)
    names = set(index.definitions)
    for step in playbook.steps:
        for arc in step.router.arcs:
            place = _place(arc.span, arc.target, lines)
            if place is not None and arc.target in names:
                index.references.append(StepReference(place, arc.target, "arc"))
    context = CheckContext(playbook, result.document, DiagnosticSink(path), Project())
    for site in context.sites:
        scan = scan_template(site.value)
        for reference in scan.references:
            if reference.root not in names:
                continue
            position = context.position_in_string(site.value, reference.offset)
            line, column = position.line - 1, position.col - 1
            found = Place(line, column, column + len(reference.root))
            index.references.append(
                StepReference(found, reference.root, "template", tuple(reference.path))
            )
    return index


def result_shape(step: Step, index: DocumentIndex) -> str:
    """Markdown for a step's hover: what runs and what its result holds, as far as the playbook
    says: the tool kinds, a loop's list of per-item results, the ctx names it sets, and the
    fields the other steps read of it (with their lines)."""
    lines = [f"**step `{step.name}`**" + (f": {step.desc}" if step.desc else "")]
    kinds = [task.kind or "?" for task in step.tasks]
    if step.pipeline is not None:
        lines.append(f"tool pipeline: {' -> '.join(kinds)} (result: the last task's output)")
    elif kinds:
        lines.append(f"tool: `{kinds[0]}`")
    else:
        lines.append("no tool: a router (result: null)")
    if step.loop is not None:
        over = step.loop.collection if isinstance(step.loop.collection, str) else "a list"
        lines.append(
            f"loop over `{over}` as `{step.loop.iterator}` ({step.loop.mode}): the result is a "
            "list with one entry per item"
        )
    writes = [str(k) for k in (step.set or {})] + [str(k) for k in (step.vars or {})]
    if writes:
        lines.append("sets: " + ", ".join(f"`{w}`" for w in writes))
    reads: dict[str, list[int]] = {}
    for reference in index.references:
        if reference.target == step.name and reference.via == "template":
            shown = ".".join(str(p) for p in (step.name, *reference.path))
            reads.setdefault(shown, []).append(reference.place.line + 1)
    if reads:
        lines.append(
            "result fields read in this playbook:\n"
            + "\n".join(
                f"- `{shown}` (line {', '.join(str(n) for n in sorted(set(at))[:5])})"
                for shown, at in sorted(reads.items())
            )
        )
    routes = [arc.target for arc in step.router.arcs]
    if routes:
        lines.append("next: " + ", ".join(f"`{r}`" for r in dict.fromkeys(routes)))
    return "\n\n".join(lines)


def word_before(line_text: str, column: int) -> str:
    """The name being typed at ``column`` (completion filters on it)."""
    start = column
    while start > 0 and _WORD.fullmatch(line_text[start - 1]):
        start -= 1
    return line_text[start:column]


def in_template(line_text: str, column: int) -> bool:
    before = line_text[:column]
    opened = max(before.rfind("{{"), before.rfind("{%"))
    closed = max(before.rfind("}}"), before.rfind("%}"))
    return opened > closed


def completion_context(line_text: str, column: int) -> str:
    """What a completion at ``column`` is for: "kind", "workload", "template" or "step"."""
    before = line_text[:column]
    head = before[: len(before) - len(word_before(line_text, column))]
    if in_template(line_text, column):
        return "workload" if head.endswith("workload.") else "template"
    key = head.strip().removeprefix("- ").rstrip()
    if key.endswith(("kind:", "type:", "tool:")):
        return "kind"
    return "step"
