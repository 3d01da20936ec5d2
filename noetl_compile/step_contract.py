"""The step contract's wire shape: the JSON a DAG file holds for a step, as the lowering types it.

The compiler builds payloads of these shapes (``lower.payload``) and leaves out every key that
holds only its default (``STEP_DEFAULTS``), so a DAG file shows what the playbook says. What a
payload means is the typed :class:`~.step_model.Step`; each operator decodes its payload into
one once, when the DAG file is parsed (``step_model.decode_step``), and the runtime trusts it.
The key tables live in ``step_model``; they are re-exported here for the lowering.

The runtime imports this module: it stays standard-library only and imports nothing of the
compiler's stages (like ``dag_ids``).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from .step_model import (
    ARC_KEYS,
    DIALECTS,
    EXTENSION_KEYS,
    LOOP_MODES,
    PAYLOAD_KEYS,
    READS_KEYS,
    ROUTING_MODES,
    STEP_DEFAULTS,
)

__all__ = [
    "ARC_KEYS",
    "DIALECTS",
    "EXTENSION_KEYS",
    "LOOP_MODES",
    "PAYLOAD_KEYS",
    "READS_KEYS",
    "ROUTING_MODES",
    "STEP_DEFAULTS",
    "Arc",
    "CaseRule",
    "ContractPayload",
    "LoopSpec",
    "Reads",
    "RegionPayload",
    "Routing",
    "StepPayload",
    "ToolMapping",
]

Dialect = Literal["v1", "case-v2", "canonical"]
RoutingMode = Literal["exclusive", "inclusive"]
LoopMode = Literal["sequential", "parallel", "async", "cursor"]


class ToolMapping(TypedDict, total=False):
    """One tool call: ``kind`` plus the kind's own settings (``code``, ``url``, ``command``...);
    ``workbook``: the workbook task it was resolved from; ``name``: its label in a pipeline."""

    kind: str
    name: str
    workbook: str


class Arc(TypedDict, total=False):
    """A routing target. Absent ``when``: unguarded; absent ``task_id``: the step name
    (``None``: the target has no task in this DAG); ``group``: v1 ``then: [a, b]`` arcs that
    fire together."""

    step: str
    task_id: str | None
    when: Any
    set: dict[str, Any]
    args: dict[str, Any]
    spec: dict[str, Any]
    group: int


class Routing(TypedDict, total=False):
    mode: RoutingMode
    arcs: list[Arc]


class CaseRule(TypedDict, total=False):
    """A case-v2 rule; ``then.next`` targets carry the Airflow task id they route to."""

    when: Any
    then: Any


# The functional form: ``in`` is a Python keyword. ``in`` (or ``cursor``), the iterator name,
# the mode, and what the lowering adds for a v1 loop body (``body``, ``end``).
LoopSpec = TypedDict(
    "LoopSpec",
    {
        "iterator": str,
        "mode": LoopMode,
        "in": Any,
        "cursor": dict[str, Any],
        "max_in_flight": Any,
        "filter": Any,
        "limit": Any,
        "order_by": Any,
        "body": dict[str, Any],
        "end": dict[str, Any],
    },
    total=False,
)


class ContractPayload(TypedDict, total=False):
    """The keys every runtime knows (``step`` is required; the rest default, ``STEP_DEFAULTS``)."""

    step: str
    dialect: Dialect
    desc: str
    input: dict[str, Any]
    tool: ToolMapping | None
    pipeline: list[ToolMapping] | None
    set: dict[str, Any] | list[Any]
    vars: dict[str, Any]
    case: list[CaseRule]
    routing: Routing


class StepPayload(ContractPayload, total=False):
    """A step payload as the lowering emits it: the contract plus its extensions, features the
    contract does not name yet (documented in docs/lowering.md): step-level ``sink``/``retry``
    blocks (run by runtime.step), ``loop`` (runtime.loop and the loop operators), ``playbook``
    (the resolved child of a step-level nested call), ``generation`` (``noetl5``: the
    playbook's NoETL 5 semantics), ``guard`` (a NoETL 5 step `when`: false skips the step and
    ends its branch), ``guard_walks_on`` (true: NoETL 5's server reading of a false ``guard``,
    ``evaluate_step_when``: the step is skipped and its arcs are taken, the walk goes on)."""

    sink: dict[str, Any]
    retry: dict[str, Any]
    loop: LoopSpec
    playbook: dict[str, Any]
    generation: str
    guard: Any
    guard_walks_on: bool


class RegionPayload(TypedDict):
    """One task that interprets a routing cycle: its member steps, the steps it starts at, and
    the task ids outside it that its steps route to."""

    region: str
    dialect: Dialect
    entry: list[str]
    steps: dict[str, StepPayload]
    exits: list[str]


class Reads(TypedDict, total=False):
    """Which upstream XComs a task pulls: ``results``/``region_results``: step -> task id;
    ``ctx``/``vars``: name -> task ids (the last that ran and wrote it wins); ``args``: tasks
    that may route into the step with ``args``."""

    results: dict[str, str]
    region_results: dict[str, str]
    ctx: dict[str, list[str]]
    vars: dict[str, list[str]]
    args: list[str]


# The key tables are the step model's (one source); the TypedDicts above spell the same keys
# for the lowering's type checks (tests/test_payload_defaults.py holds the two equal).
