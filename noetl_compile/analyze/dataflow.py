"""Who writes and who reads execution variables (`ctx.*`) — the raw material of reaching
definitions for the flow checks and for lowering (what each task must pull)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..ast import Playbook
from ..diagnostics import Position
from ..load import YMap
from .expressions import scan_template
from .sites import TemplateSite, template_sites

# `set` keys address scopes with a prefix; the engine writes the bare name for all of them.
_SCOPES = ("ctx.", "step.", "iter.")


@dataclass(frozen=True, slots=True)
class CtxWrite:
    name: str
    step: str | None
    position: Position
    pipeline_local: bool = False  # `iter.*` set by a pipeline policy stays inside that run


@dataclass(frozen=True, slots=True)
class CtxRead:
    name: str
    step: str | None
    value: Any  # the templated YStr
    offset: int
    guarded: bool


def _set_keys(block: Any) -> list[tuple[str, Position, str]]:
    """(variable, position, scope prefix) of each key of a `set` mapping."""
    if not isinstance(block, YMap):
        return []
    found = []
    for key in block:
        text = str(key)
        scope = next((p for p in _SCOPES if text.startswith(p)), "")
        found.append((text[len(scope) :].split(".", 1)[0], block.key_span(key).position, scope))
    return found


def _case_set_keys(block: Any) -> list[tuple[str, Position, str]]:
    """The ctx writes of a case-v2 `then.set`: `{ctx: {name: value}}` or a flat mapping.

    Its other forms (a list of `{name, value}`, `vars.x`, `{vars: {...}}`) write `vars`, as the
    runtime does; ``vars_writes`` counts those.
    """
    if isinstance(block, YMap) and isinstance(block.get("ctx"), YMap):
        return [(str(k), block["ctx"].key_span(k).position, "ctx.") for k in block["ctx"]]
    return [entry for entry in _set_keys(block) if entry[0] != "vars"]


def vars_writes(playbook: Playbook) -> dict[str, set[str]]:
    """step name -> names of case-v2 `vars` it writes (step `vars`, case `set`/`vars`)."""
    return playbook.analysis("vars_writes", _vars_writes)


def _vars_writes(playbook: Playbook) -> dict[str, set[str]]:
    writes: dict[str, set[str]] = {}
    for step in playbook.steps:
        names = writes.setdefault(step.name, set())
        if isinstance(step.vars, Mapping):
            names |= {str(k) for k in step.vars}
        for rule in step.case:
            then = rule.then if isinstance(rule.then, Mapping) else {}
            block = then.get("set")
            if isinstance(block, Mapping):
                if isinstance(block.get("vars"), Mapping):
                    names |= {str(k) for k in block["vars"]}
                names |= {str(k)[5:] for k in block if str(k).startswith("vars.")}
            elif isinstance(block, list):
                names |= {str(e["name"]) for e in block if isinstance(e, Mapping) and "name" in e}
            if isinstance(then.get("vars"), Mapping):
                names |= {str(k) for k in then["vars"]}
    return {k: v for k, v in writes.items() if v}


def ctx_writes(playbook: Playbook) -> dict[str, list[CtxWrite]]:
    """ctx variable -> where it is written (computed once per playbook)."""
    return playbook.analysis("ctx_writes", _ctx_writes)


def _ctx_writes(playbook: Playbook) -> dict[str, list[CtxWrite]]:
    writes: dict[str, list[CtxWrite]] = {}

    def add(
        step: str | None, entries: list[tuple[str, Position, str]], in_pipeline: bool = False
    ) -> None:
        for name, position, scope in entries:
            writes.setdefault(name, []).append(
                CtxWrite(name, step, position, pipeline_local=in_pipeline and scope == "iter.")
            )

    for step in playbook.steps:
        add(step.name, _set_keys(step.set))
        for arc in step.router.arcs:
            add(step.name, _set_keys(arc.set))
        for task in step.tasks:
            for rule in task.rules:
                add(step.name, _set_keys(rule.set), in_pipeline=True)
        for rule in step.case:
            if isinstance(rule.then, YMap):
                add(step.name, _case_set_keys(rule.then.get("set")))
    return writes


def ctx_reads(playbook: Playbook, sites: list[TemplateSite] | None = None) -> list[CtxRead]:
    reads = []
    for site in template_sites(playbook) if sites is None else sites:
        for ref in scan_template(site.value).references:
            if ref.root == "ctx" and ref.path and isinstance(ref.path[0], str):
                reads.append(CtxRead(ref.path[0], site.step, site.value, ref.offset, ref.guarded))
    return reads
