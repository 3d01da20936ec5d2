"""The routing of NoETL 5's local dialect (`executor.profile: local`, the CLI's own interpreter,
noetl/cli ``playbook_runner.rs``) lowered to the exclusive and inclusive routers the runtime
runs: a step's `case` blocks (``read_local_case``) and a `next` list of `{step, when, args}` and
`{when, then: [...]}` entries (``read_local_next_list``). ``noetl5.Noetl5Reader`` calls these
for a local playbook; ``reader`` is that reader."""

from __future__ import annotations

from typing import Any

from ..ast import Arc, Router, Step
from ..load import YList, YMap, list_of_one
from .base import event_of
from .canonical import CanonicalReader
from .noetl5_schema import LOCAL_CASE_KEYS, LOCAL_NEXT_ENTRY_KEYS, LOCAL_NOT_EXECUTED


def read_local_case(reader: CanonicalReader, item: YMap, step: Step, label: str) -> None:
    """The CLI's `case` blocks (noetl/cli ``playbook_runner.rs``): in order, the first whose
    `when` holds runs its `then` steps (routed exclusive: the first of them whose own `when`
    holds) and the step's `next` is not taken; when none holds, `next` is. That is an
    exclusive router whose case arcs come before the `next` arcs. `then` is `{next: [...]}`
    (or `{next: step}`); a `then` list is read as those steps, which is what it means (the
    CLI 5.3.2 runs nothing for one: docs/noetl5.md).

    A case with `else`: when its `when` does not hold, the CLI runs the first of the `else`
    steps whose own `when` holds, then routes the step's `next` as well, and evaluates no
    later case. Lowered as the exclusive groups ``else_after_next`` builds."""
    cases = reader.sequence(item, "case", f"`case` of {label}")
    if not cases:
        return
    if step.router.mode != "exclusive" and step.router.arcs:
        _not_executed(reader, item, "case", "Case.inclusive", label)
        return
    arcs: list[Arc] = []
    group = 0
    for index, entry in enumerate(cases):
        where = f"case {index + 1} of {label}"
        if not reader.expect(cases, index, (dict,), where):
            continue
        reader.check_keys(entry, LOCAL_CASE_KEYS, where)
        for key in ("rhai", "when_rhai"):
            if key in entry:
                _not_executed(reader, entry, key, "Case.rhai", where)
        if "else" in entry and "when" not in entry:
            _not_executed(reader, entry, "else", "Case.else", where)
        when = entry.get("when")
        if "when" not in entry:
            if not any(k in entry for k in ("rhai", "when_rhai")):
                reader.report("S101", reader.pos(entry), f"{where} needs `when`")
            continue
        if not isinstance(when, (str, bool)):
            reader.report(
                "S102", reader.pos(entry, "when"), f"`when` of {where} must be a template"
            )
            continue
        then = entry.get("then")
        targets: Any = None
        if isinstance(then, YMap):
            reader.check_keys(then, ("next", "pipe"), f"`then` of {where}")
            if "pipe" in then:
                _not_executed(reader, then, "pipe", "Case.pipe", where)
            targets = then.get("next")
            if isinstance(targets, (str, YMap)):
                targets = list_of_one(targets, then.value_span("next"))
        elif isinstance(then, YList):
            targets = then
        if not isinstance(targets, YList):
            reader.report(
                "S101", reader.pos(entry, "then") if "then" in entry else reader.pos(entry),
                f"`then` of {where} needs `next` steps",
            )  # fmt: skip
            continue
        for t_index, target in enumerate(targets):
            t_where = f"target {t_index + 1} of {where}"
            if isinstance(target, YMap):
                reader.check_keys(target, ("step", "when", "args"), t_where)
                inner = target.get("when")
                guard = when if inner is None else f"{{{{ ({_expr(when)}) and ({_expr(inner)}) }}}}"
                arc = reader.arc(
                    target, t_where, when=guard, args=target.get("args"), group=group,
                    origin="arc",
                )  # fmt: skip
            else:
                arc = reader.arc_from_name(
                    targets, t_index, t_where, when=when, group=group, origin="arc"
                )
            if arc is not None:
                arcs.append(arc)
                group += 1
        if "else" in entry:
            else_arcs = _read_case_else(reader, entry, where)
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


def _read_case_else(reader: CanonicalReader, entry: YMap, where: str) -> list[Arc] | None:
    """The `else` steps of a case (the CLI's `Vec<NextStep>`): names or `{step, when,
    args}`, in order."""
    targets = entry["else"]
    if isinstance(targets, (str, YMap)):
        targets = list_of_one(targets, entry.value_span("else"))
    if not isinstance(targets, YList):
        reader.expect(entry, "else", (list,), f"`else` of {where}")
        return None
    arcs: list[Arc] = []
    for index, target in enumerate(targets):
        t_where = f"else target {index + 1} of {where}"
        if isinstance(target, YMap):
            reader.check_keys(target, ("step", "when", "args"), t_where)
            arc = reader.arc(
                target, t_where, when=target.get("when"), args=target.get("args"),
                origin="else",
            )  # fmt: skip
        else:
            arc = reader.arc_from_name(targets, index, t_where, origin="else")
        if arc is not None:
            arcs.append(arc)
    return arcs


def _not_executed(
    reader: CanonicalReader, container: Any, key: str, reason: str, where: str
) -> None:
    reader.report(
        "S116",
        reader.key_pos(container, key),
        f"`{key}` ({where}) is accepted, not executed on Airflow: {LOCAL_NOT_EXECUTED[reason]}",
    )


def read_local_next_list(reader: CanonicalReader, item: YMap, value: YList, where: str) -> Router:
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
            arc = reader.arc_from_name(value, index, entry_where, group=group, origin="arc")
            arcs += [arc] if arc else []
            group += 1
            continue
        reader.check_keys(entry, LOCAL_NEXT_ENTRY_KEYS, entry_where)
        when = entry.get("when")
        if when is not None and not isinstance(when, (str, bool)):
            reader.report(
                "S102",
                reader.pos(entry, "when"),
                f"`when` of {entry_where} must be a template string",
            )
        if "then" not in entry:
            if "args" in entry:
                reader.mapping(entry, "args", f"`args` of {entry_where}")
            arc = reader.arc(
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
            reader.expect(entry, "then", (list,), f"`then` of {entry_where}")
            continue
        for t_index, target in enumerate(targets):
            t_where = f"target {t_index + 1} of {entry_where}"
            if isinstance(target, YMap):
                reader.check_keys(target, ("step", "when", "args"), t_where)
                inner = target.get("when")
                guard = (
                    when
                    if inner is None
                    else (
                        inner if when is None else f"{{{{ ({_expr(when)}) and ({_expr(inner)}) }}}}"
                    )
                )
                arc = reader.arc(
                    target,
                    t_where,
                    when=guard,
                    args=target.get("args"),
                    group=group,
                    origin="next",
                    event=event_of(when),
                )
            else:
                arc = reader.arc_from_name(
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
