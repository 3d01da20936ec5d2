"""case-v2 `vars` -> canonical ctx.

NoETL's case-v2 engine (dc55c492) renders templates with ``"vars": self.variables``: the `vars`
namespace is the execution's variable store, the one canonical writes with `set: {ctx.NAME}`
and reads as `ctx.NAME`. A step's `vars` block is rendered at the step's exit with the step's
result as `result` (and `response`), after its case rules chose where to go; a case rule's `set`
(`[{name, value}]`, `{vars: {...}}`, `{ctx: {...}}`) is applied when the rule fires, before its
targets start. The canonical forms: the step's `set` (applied after the tool succeeds, before the
arcs are chosen) and the arc's `set` (applied when the arc is taken, before its target starts).

The rename is exact only when nothing else can tell the two stores apart, which ``plan`` checks
over the whole playbook: every `vars.NAME` read names a written variable; no written name is a
workload key, a step, a name the engine binds, another ctx variable or a step's input; nothing
reads a written name as `ctx.NAME`, `workload.NAME` or bare (each read the workload before); and
no case rule of the step that writes `vars` reads them (its rules ran before the block, a
canonical router after its `set`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..analyze.dataflow import ctx_writes, vars_writes
from ..analyze.expressions import scan_template
from ..analyze.sites import template_sites
from ..ast import Playbook
from .guards import rebind, taken_names

CTX_PREFIX = "ctx."


def plan(playbook: Playbook) -> tuple[frozenset[str], str | None]:
    """(the names written to `vars`, why they cannot become ctx variables or None)."""
    written = frozenset(n for names in vars_writes(playbook).values() for n in names)
    if not written:
        return written, None
    inputs = {str(k) for s in playbook.steps if isinstance(s.input, Mapping) for k in s.input}
    iterators = {s.loop.iterator for s in playbook.steps if s.loop and s.loop.iterator}
    taken = (
        set(playbook.workload if isinstance(playbook.workload, Mapping) else ())
        | set(playbook.step_names)
        | set(ctx_writes(playbook))
        | inputs
        | iterators
        | taken_names()
    )
    clash = sorted(written & taken)
    if clash:
        return written, (
            f"`vars` {', '.join(clash)} also name{'s' if len(clash) == 1 else ''} a workload key, "
            "a step, an input or a ctx variable, which the canonical ctx store would mix"
        )
    writers = {step for step, names in vars_writes(playbook).items() if names}
    for site in template_sites(playbook):
        for ref in scan_template(site.value).references:
            if ref.root == "vars" and (not ref.path or str(ref.path[0]) not in written):
                name = f"vars.{ref.path[0]}" if ref.path else "vars"
                return written, f"{site.field} reads `{name}`, which no step writes"
            if ref.root in written or (
                ref.root in ("ctx", "workload") and ref.path and str(ref.path[0]) in written
            ):
                return written, (
                    f"{site.field} reads `{ref.root}` of a name written to `vars`: "
                    "in the canonical ctx store it would read the written value"
                )
            if ref.root == "vars" and site.step in writers and ".case[" in f".{site.field}":
                return written, (
                    f"{site.field} of a step that writes `vars` reads them: its rules ran "
                    "before the block, a canonical router runs after the step's `set`"
                )
    return written, None


def ctx_set(block: Any) -> dict[str, Any] | None:
    """A case `set` (or a step's `vars`) as canonical `set` keys; None for a form whose
    meaning is not a plain variable write."""
    if isinstance(block, list):
        out = {}
        for entry in block:
            if not isinstance(entry, Mapping) or set(entry) != {"name", "value"}:
                return None
            out[CTX_PREFIX + str(entry["name"])] = entry["value"]
        return out
    if not isinstance(block, Mapping):
        return None
    out = {}
    for key, value in block.items():
        key = str(key)
        if key in ("ctx", "vars") and isinstance(value, Mapping):
            out.update({CTX_PREFIX + str(k): v for k, v in value.items()})
        elif key.startswith(("ctx.", "vars.")):
            out[CTX_PREFIX + key.split(".", 1)[1]] = value
        else:
            return None
    return out


def rename_reads(text: str, path: str) -> tuple[str, int | None]:
    """``text`` with every `vars.NAME` read in a template written `ctx.NAME`, line by line on
    Jinja's tokens; (text, 0-based line) of a line that cannot be re-tokenised exactly."""
    from ..check import check_text

    playbook = check_text(text, path).playbook
    if playbook is None:
        return text, 0
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    todo: set[int] = set()
    for site in template_sites(playbook):
        if any(r.root == "vars" for r in scan_template(site.value).references):
            span = site.value.span
            first = span.line - 1
            last = first + text.count("\n", span.start, span.end)
            todo.update(range(first, last + 1))
    for index in sorted(todo):
        renamed = rebind(lines[index], frozenset({"vars"}), "ctx")
        if renamed is None:
            return text, index
        lines[index] = renamed
    return "".join(lines), None


def foreign_roots(value: Any, known: set[str]) -> set[str]:
    """Roots read by the templates in ``value`` that are not in ``known``."""
    out: set[str] = set()
    for text in _strings(value):
        scan = scan_template(text)
        if scan.error is not None:
            out.add("a template")
        out |= {r.root for r in scan.references if r.root not in known}
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
