"""The catalogue of unsafe fixes: `noetlc upgrade --unsafe-fixes` (ruff's model).

An exact rewrite means the same in the canonical generation. An *unsafe* fix is the closest
canonical form of a construct that has no exact one: applied only when asked, and each says
exactly what behaves differently, per aspect of a run (``results``, ``events``, ``steps``,
``final status``). This module is the one place those declarations live; the rewriters name a
kind, the report, the note in the file and the run comparison (tests/test_upgrade_unsafe_runs.py)
all read the kind's declared differences from here.

A difference is ``always`` when every run of the rewritten construct shows it (a postgres step's
result shape), else it shows only under a condition the difference names (a call that fails).
The run comparison holds both ways: a measured difference that no applied fix declares is a bug,
and so is an ``always`` difference that a run of the construct does not show.

Where an engine profile field decides the behaviour, the declaration is built from the field's
own documentation and the two engines' values (``engine_behaviours``/``engine_profiles``), so
the text follows the profiles; where no field covers it, the text cites docs/semantics.md or the
canonical model, as docs/editor.md's table of blockers does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Literal

from ..engine_behaviours import EngineProfile
from ..engine_profiles import profile_of

Aspect = Literal["results", "events", "steps", "final status"]
ASPECTS: tuple[Aspect, ...] = ("results", "events", "steps", "final status")


@dataclass(frozen=True)
class Difference:
    aspect: Aspect
    says: str
    always: bool = False  # shown by every run of the construct (else only when `says` holds)


@dataclass(frozen=True)
class UnsafeKind:
    name: str
    construct: str  # what is rewritten
    rewrite: str  # into what canonical form
    differences: tuple[Difference, ...]
    field: str | None = None  # the engine profile field that decides it, when one does

    def declared(self, dialect: str) -> tuple[Difference, ...]:
        """The differences, the profile field's documentation and values prefixed to the first."""
        if self.field is None:
            return self.differences
        first, *rest = self.differences
        said = f"{profile_fact(self.field, dialect)}; {first.says}"
        return (Difference(first.aspect, said, first.always), *rest)

    def note(self, dialect: str) -> str:
        """The one-line text of the note and the U805 finding."""
        parts = "; ".join(f"{d.aspect}: {d.says}" for d in self.declared(dialect))
        return f"unsafe fix `{self.name}` ({self.rewrite}): {parts}"

    def aspects(self, *, always: bool = False) -> frozenset[str]:
        return frozenset(d.aspect for d in self.differences if d.always or not always)


def _field_doc(name: str) -> str:
    for item in fields(EngineProfile):
        if item.name == name:
            return str(item.metadata["doc"])
    raise KeyError(name)


def profile_fact(name: str, dialect: str) -> str:
    """``doc (dialect: value, canonical: value; source)``, from the profiles themselves."""
    before: EngineProfile = profile_of(dialect)
    after: EngineProfile = profile_of("canonical")
    where = after.sources[name].where if name in after.sources else ""
    return (
        f"{_field_doc(name).rstrip('.')} ({name}: {dialect} {getattr(before, name)}, canonical "
        f"{getattr(after, name)}{'; ' + where if where else ''})"
    )


KINDS: Mapping[str, UnsafeKind] = {
    kind.name: kind
    for kind in (
        UnsafeKind(
            "postgres-result",
            "a case-v2 or v1 `postgres` step",
            "kept as a canonical postgres tool",
            (
                Difference(
                    "results",
                    "the step's result is the last statement's `{status, rows, row_count, "
                    "columns, statement_count}`, no longer `{command_0: ..., command_1: ...}`; "
                    "a read of `<step>.command_0` of a one-statement step is rewritten to "
                    "`<step>`, and any other `command_N` read would render empty (check: T305)",
                    always=True,
                ),
            ),
            field="postgres_result_per_statement",
        ),
        UnsafeKind(
            "retry-policy",
            "a `retry` (case-v2 rule on `call.error`, step or `tool.retry`; v1 step `retry`)",
            "`tool.spec.policy.rules: [{when: output.status == 'error', then: {do: retry, "
            "attempts, backoff, delay}}]`",
            (
                Difference(
                    "results",
                    "the step's result becomes the one-task pipeline's record `{status: ok, "
                    "_prev: <the call's result>, results, ctx}` (the call's own `status` "
                    "shadowed); the original's retry condition (`retry_when`/`stop_when`, the "
                    "rule's guard) becomes 'the call failed', and `max_delay`/`jitter` are not "
                    "kept",
                    always=True,
                ),
                Difference(
                    "events",
                    "a retried call records the pipeline's task events instead of the case "
                    "rule's retry events",
                ),
                Difference(
                    "steps",
                    "when the last try fails, the canonical engine evaluates the step's arcs as "
                    "after a success (failed_call_takes_every_arc), so an unguarded arc is "
                    "taken and the steps after it run, where the original stopped there",
                ),
                Difference(
                    "final status",
                    "a call that fails on every try ends the run failed even when a rule or "
                    "arc routes on, where a case-v2 rule that routed the failure ended it "
                    "completed (docs/semantics.md, A failed call)",
                ),
            ),
            field="pipeline_last_task_promoted",
        ),
        UnsafeKind(
            "failure-arc",
            "a case-v2 rule on `call.error` routing on",
            "an arc guarded by `{{ event.name == 'call.error' }}`",
            (
                Difference(
                    "final status",
                    "a failed call taking this arc ends the run failed, where case-v2 ended it "
                    "completed (docs/semantics.md, A failed call)",
                ),
                Difference(
                    "steps",
                    "after a failed call every arc is evaluated in order, so an earlier arc "
                    "whose guard holds on the failed result is taken instead",
                ),
                Difference(
                    "events",
                    "a failed call's events end the step failed, not handled",
                ),
            ),
            field="failed_call_takes_every_arc",
        ),
        UnsafeKind(
            "call-done-result",
            "a case-v2 `call.done` rule reading `result` (or an HTTP `response`)",
            "the arc's guard or `set` reading the step's result by its name, as at its exit",
            (
                Difference(
                    "results",
                    "NoETL's case-v2 engine (dc55c492) leaves `result` unbound at `call.done`, "
                    "so the original rendered it empty there (noetlc's case-v2 runtime binds it "
                    "as at the exit: the same on Airflow); the ctx value set, and every step "
                    "result computed from it, now hold the step's result",
                ),
                Difference(
                    "steps",
                    "a guard that read the unbound `result` (false on NoETL) now reads the "
                    "result, so its arc may be taken where NoETL's engine did not take it",
                ),
            ),
        ),
        UnsafeKind(
            "loop-body",
            "a v1 loop (`loop` + one body step + `end_loop` with a `result`)",
            "the body step becomes the canonical loop step (the loop's `in`, `iterator`, mode "
            "and passed values as its `loop` and `input`); the `end_loop` step computes its "
            "`result` with a python tool from `<body>.results`",
            (
                Difference(
                    "results",
                    "the loop step routes only and has no result of its own; the body step's "
                    "result is the loop's `{results, stats}` (canonical result bound: the last "
                    "128, U804); the end step's result is what its `result` computed",
                    always=True,
                ),
                Difference(
                    "events",
                    "the loop's events (LoopStarted, its iterations, LoopFinished) are recorded "
                    "on the body step, not the loop step; the end step runs a python tool",
                    always=True,
                ),
                Difference(
                    "steps",
                    "the body step and the end step finish as steps of their own, once each, "
                    "where v1 ran the body per item inside the loop and closed it at the "
                    "`end_loop` step",
                    always=True,
                ),
            ),
        ),
        UnsafeKind(
            "result-action-dropped",
            "a case-v2 rule's `result` action (`result: {from: ...}`)",
            "kept as a YAML comment: the step's result stays its tool's",
            (
                Difference(
                    "results",
                    "the step's result stays its tool's whole result, where the rule replaced "
                    "it with what `from` names (the same when that is the result itself)",
                ),
            ),
            field="case_result_own_action",
        ),
        UnsafeKind(
            "result-as-tool",
            "a v1 `result` mapping on a step without a tool",
            "a python tool whose result is the mapping, each value rendered as one of its args",
            (
                Difference(
                    "results",
                    "each value is rendered as a python tool argument under canonical "
                    "templating, so a read the v1 step answered but canonical does not (measured "
                    "on the corpus: `{{ test_step.test_passed }}` of a `{status, data}` result) "
                    "renders empty, and a value the v1 runtime kept as text may arrive typed",
                ),
                Difference(
                    "events",
                    "the step now runs a tool: its ToolStarted/ToolCompleted events are recorded",
                    always=True,
                ),
            ),
            field="python_input_undefined_blank",
        ),
        UnsafeKind(
            "pass-dropped",
            "a v1 step's `pass` (NoETL 0d51146e's broker skipped the step when it rendered true)",
            "kept as a YAML comment: canonical has no skip (`spec.policy.admit` is never read)",
            (
                Difference(
                    "steps",
                    "a step whose `pass` rendered true was skipped; it runs now, with its "
                    "result and events",
                ),
                Difference("results", "the result of a step that was skipped is now there"),
                Difference("events", "the events of a step that was skipped are now there"),
            ),
        ),
        UnsafeKind(
            "per-iteration-rule",
            "a case-v2 loop step's rules on each item's `step.exit`/`call.done` (guarded by no "
            "more than `response is defined`)",
            "the loop step's arcs, chosen once at the loop's end (per-item sinks removed: "
            "`sink-removed`)",
            (
                Difference(
                    "steps",
                    "the rule's targets are started once, after the last item, where case-v2 "
                    "evaluated the rule after each item",
                ),
                Difference(
                    "events",
                    "the per-item rule evaluations (and what they started) are gone; the arcs "
                    "are evaluated once",
                ),
                Difference(
                    "results",
                    "a target started per item saw that item's result; started once it sees "
                    "the loop's `{results, stats}`",
                ),
            ),
        ),
        UnsafeKind(
            "sink-removed",
            "a `sink` (case-v2 step or rule) or v1 `save`/`sink`",
            "kept as a YAML comment: canonical has no sink (NoETL 138c10ed models.py: no "
            "special sink tool kind); write it as a step of its own by hand",
            (
                Difference(
                    "events",
                    "the sink's own events (SinkStarted, SinkProcessed) are not recorded",
                    always=True,
                ),
                Difference(
                    "results",
                    "nothing is written, so a later step reading what the sink wrote reads "
                    "what was there before; a step whose result is a mapping loses its `_sink` "
                    "entry (what was written, and where)",
                ),
                Difference(
                    "final status",
                    "a sink that failed failed the step; without it the step succeeds",
                ),
            ),
        ),
    )
}


def kind(name: str) -> UnsafeKind:
    return KINDS[name]
