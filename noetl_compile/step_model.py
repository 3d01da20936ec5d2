"""The typed step: what a compiled step payload means.

The compiler writes a step as JSON in the DAG file (its wire shape: ``step_contract``); each
operator decodes it ONCE, in its constructor, into a :class:`Step` (``step_decode``: a loop, a
region and a ``reads`` table have their own decode there too). Nothing else in the plugin
validates a payload: the runtime is handed a :class:`Step` and trusts it. A malformed payload is
a DAG import error (:class:`PayloadError`, a ``ValueError``) that names the step and, for each
problem, the field's path (``routing.arcs[1].task_id``).

Plain classes with ``__slots__``, read-only fields (``Final`` to a type checker, a
``FrozenInstanceError`` at run time) and a keyword-only ``__init__`` written out, not pydantic
models and not ``@dataclass``: the runtime imports this module when a DAG file is parsed, and
the plugin takes only standard-library leaves of the compiler (tests/test_layout.py), so the DAG
import stays free of a model library's start-up; and ``@dataclass`` builds each class's methods
by compiling generated source when the module loads (``slots=True`` then builds the class a
second time): about 2 ms on every DAG parse that is not pre-imported, against nothing for
methods that are part of the module's own bytecode. The decode is one pass of ``isinstance``
checks whose messages the project words itself (path first, then what is wrong). Templates stay
``Any``: a value the runtime renders is JSON whose shape only the template decides. Nothing
compares two steps (no ``__eq__`` but a ``Step``'s, a mapping's).

Standard library only (and ``engine_profiles``, also a leaf, when a run asks a step's profile):
the runtime imports it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import FrozenInstanceError
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from .engine_behaviours import EngineProfile

__all__ = [
    "ARC_KEYS",
    "DIALECTS",
    "EXTENSION_KEYS",
    "FUSED_LOOP_KEYS",
    "LOOP_MODES",
    "PAYLOAD_KEYS",
    "READS_KEYS",
    "REGION_KEYS",
    "ROUTING_MODES",
    "STEP_DEFAULTS",
    "Arc",
    "CaseRule",
    "Loop",
    "PayloadError",
    "Reads",
    "Region",
    "Routing",
    "Step",
    "Tool",
    "normalise_case_next",
]

DIALECTS: tuple[str, ...] = ("v1", "case-v2", "canonical")
ROUTING_MODES: tuple[str, ...] = ("exclusive", "inclusive")
LOOP_MODES: tuple[str, ...] = ("sequential", "parallel", "async", "cursor")

# The keys every runtime knows (``step`` is required; the rest default, ``STEP_DEFAULTS``).
PAYLOAD_KEYS: frozenset[str] = frozenset(
    ("step", "dialect", "desc", "input", "tool", "pipeline", "set", "vars", "case", "routing")
)
# Features the contract does not name yet (docs/lowering.md): step-level ``sink``/``retry``,
# ``loop``, ``playbook`` (a step-level nested call's resolved child), ``generation`` (``noetl5``),
# ``guard`` (NoETL 5's step `when`) and ``guard_walks_on`` (its server's reading of a false guard).
EXTENSION_KEYS: frozenset[str] = frozenset(
    ("sink", "retry", "loop", "playbook", "generation", "guard", "guard_walks_on")
)
ARC_KEYS: frozenset[str] = frozenset(("step", "task_id", "when", "set", "args", "spec", "group"))
READS_KEYS: tuple[str, ...] = ("results", "region_results", "ctx", "vars", "args")
REGION_KEYS: frozenset[str] = frozenset(("region", "dialect", "entry", "steps", "exits"))
# What a fused loop's payload adds to its loop step's (lower/fuse.py ``loop_folds``): ``lead``,
# the step payloads its head runs first; ``trail``, the region payload its tail runs after.
FUSED_LOOP_KEYS: frozenset[str] = frozenset(("lead", "trail"))
LOOP_KEYS: frozenset[str] = frozenset(
    (
        "iterator",
        "mode",
        "in",
        "cursor",
        "max_in_flight",
        "filter",
        "limit",
        "order_by",
        "body",
        "end",
    )
)

# What an absent key means. Read-only: both sides hand out fresh copies of the containers.
STEP_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "input": {},
        "tool": None,
        "pipeline": None,
        "set": {},
        "vars": {},
        "case": [],
        "routing": {"mode": "exclusive", "arcs": []},
    }
)


class PayloadError(ValueError):
    """A payload the runtime cannot run. ``problems``: ``(path, message)`` pairs, the path being
    the field's place in the payload (``routing.arcs[0].step``; ``""`` for the whole)."""

    def __init__(self, what: str, problems: list[tuple[str, str]]) -> None:
        self.problems = tuple(problems)
        self.path = problems[0][0] if problems else ""
        text = "; ".join(f"`{path}` {message}" if path else message for path, message in problems)
        super().__init__(f"{what}: {text}")


class _WriteOnce:
    """Each field is set once, by ``__init__``; setting or deleting it again raises, as a frozen
    dataclass would (``Final`` tells a type checker the same). ``__repr__`` shows the fields but
    the raw payload."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, name):
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __repr__(self) -> str:
        # The annotations, in the order the class declares its fields.
        fields = type(self).__annotations__
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in fields if name not in _UNSHOWN
        )
        return f"{type(self).__name__}({shown})"


_UNSHOWN = frozenset(("payload", "mapping"))


class Tool(_WriteOnce):
    """One tool call: ``kind`` plus the kind's own settings (``code``, ``url``...: ``settings``
    is the whole mapping as the runtime renders it); ``name``: its label in a pipeline;
    ``workbook``: the workbook task it was resolved from."""

    __slots__ = ("kind", "name", "settings", "workbook")
    kind: Final[str]
    name: Final[str | None]
    workbook: Final[str | None]
    settings: Final[Mapping[str, Any]]

    def __init__(
        self, *, kind: str, name: str | None, workbook: str | None, settings: Mapping[str, Any]
    ) -> None:
        self.kind = kind
        self.name = name
        self.workbook = workbook
        self.settings = settings


class Arc(_WriteOnce):
    """A routing target. ``guarded`` false: no ``when``, the arc always matches; ``task_id``:
    the Airflow task it routes to (``None``: the target has no task in this DAG); ``group``:
    v1 ``then: [a, b]`` arcs that fire together."""

    __slots__ = ("args", "group", "guarded", "set", "spec", "step", "task_id", "when")
    step: Final[str]
    task_id: Final[str | None]
    guarded: Final[bool]
    when: Final[Any]
    set: Final[Mapping[str, Any] | None]
    args: Final[Mapping[str, Any] | None]
    spec: Final[Mapping[str, Any] | None]
    group: Final[int | None]

    def __init__(
        self,
        *,
        step: str,
        task_id: str | None,
        guarded: bool,
        when: Any,
        set: Mapping[str, Any] | None,
        args: Mapping[str, Any] | None,
        spec: Mapping[str, Any] | None,
        group: int | None,
    ) -> None:
        self.step = step
        self.task_id = task_id
        self.guarded = guarded
        self.when = when
        self.set = set
        self.args = args
        self.spec = spec
        self.group = group


class Routing(_WriteOnce):
    __slots__ = ("arcs", "mode")
    mode: Final[Literal["exclusive", "inclusive"]]
    arcs: Final[tuple[Arc, ...]]

    def __init__(self, *, mode: Literal["exclusive", "inclusive"], arcs: tuple[Arc, ...]) -> None:
        self.mode = mode
        self.arcs = arcs


class CaseRule(_WriteOnce):
    """A case-v2 rule; ``then.next`` targets carry the Airflow task id they route to."""

    __slots__ = ("guarded", "then", "when")
    guarded: Final[bool]
    when: Final[Any]
    then: Final[Any]

    def __init__(self, *, guarded: bool, when: Any, then: Any) -> None:
        self.guarded = guarded
        self.when = when
        self.then = then


class Loop(_WriteOnce):
    """``loop``: the iterator name, the mode, the collection (``has_in``/``collection``) or the
    cursor, the bound on iterations in flight, and a v1 loop body's steps and end step."""

    __slots__ = (
        "body",
        "collection",
        "cursor",
        "end",
        "has_in",
        "iterator",
        "max_in_flight",
        "mode",
    )
    iterator: Final[str]
    # None: not said (a step runner iterates in order; the loop operators require a mode).
    mode: Final[Literal["sequential", "parallel", "async", "cursor"] | None]
    has_in: Final[bool]
    collection: Final[Any]
    cursor: Final[Mapping[str, Any] | None]
    max_in_flight: Final[int | str | None]
    body: Final[Mapping[str, Step] | None]
    end: Final[Step | None]

    def __init__(
        self,
        *,
        iterator: str,
        mode: Literal["sequential", "parallel", "async", "cursor"] | None,
        has_in: bool,
        collection: Any,
        cursor: Mapping[str, Any] | None,
        max_in_flight: int | str | None,
        body: Mapping[str, Step] | None,
        end: Step | None,
    ) -> None:
        self.iterator = iterator
        self.mode = mode
        self.has_in = has_in
        self.collection = collection
        self.cursor = cursor
        self.max_in_flight = max_in_flight
        self.body = body
        self.end = end


class Step(_WriteOnce, Mapping[str, Any]):
    """One compiled step. ``profile``: the engine whose semantics it follows (``generation``,
    else ``dialect``). ``payload``: the payload as the DAG file holds it (the
    runtime renders its templates from there; ``payload.with_defaults`` fills absent keys).

    A step is also a read-only mapping of its payload, so the runtime's functions that render
    a payload's templates take the decoded step as they took the payload, and nothing below
    the operator decodes it again."""

    __slots__ = (
        "case",
        "dialect",
        "generation",
        "guard",
        "guard_walks_on",
        "loop",
        "name",
        "payload",
        "pipeline",
        "routing",
        "tool",
    )
    name: Final[str]
    dialect: Final[str]
    generation: Final[str | None]
    tool: Final[Tool | None]
    pipeline: Final[tuple[Tool, ...] | None]
    case: Final[tuple[CaseRule, ...]]
    routing: Final[Routing]
    loop: Final[Loop | None]
    guard: Final[Any]
    guard_walks_on: Final[bool]
    payload: Final[Mapping[str, Any]]

    def __init__(
        self,
        *,
        name: str,
        dialect: str,
        generation: str | None,
        tool: Tool | None,
        pipeline: tuple[Tool, ...] | None,
        case: tuple[CaseRule, ...],
        routing: Routing,
        loop: Loop | None,
        guard: Any,
        guard_walks_on: bool,
        payload: Mapping[str, Any],
    ) -> None:
        self.name = name
        self.dialect = dialect
        self.generation = generation
        self.tool = tool
        self.pipeline = pipeline
        self.case = case
        self.routing = routing
        self.loop = loop
        self.guard = guard
        self.guard_walks_on = guard_walks_on
        self.payload = payload

    @property
    def profile(self) -> EngineProfile:
        """The engine whose semantics the step follows (``engine_profiles.profile_for``: its
        ``generation``, else its ``dialect``). Looked up when a run asks, so a DAG file's parse
        does not load the profiles."""
        from .engine_profiles import profile_for

        return profile_for(self.payload)

    def __getitem__(self, key: str) -> Any:
        return self.payload[key]

    # Immutable, so a copy is the step itself: Airflow deep-copies operators (a DAG's partial
    # subset), and the engine profile's read-only tables cannot be deep-copied.
    def __copy__(self) -> Step:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Step:
        return self

    def __iter__(self) -> Iterator[str]:
        return iter(self.payload)

    def __len__(self) -> int:
        return len(self.payload)


class Reads(_WriteOnce):
    """Which upstream XComs a task pulls: ``results``/``region_results``: step -> task id;
    ``ctx``/``vars``: name -> task ids (the last that ran and wrote it wins); ``args``: tasks
    that may route into the step with ``args`` (``None``: the direct upstream tasks)."""

    __slots__ = ("args", "ctx", "mapping", "region_results", "results", "vars")
    results: Final[Mapping[str, str]]
    region_results: Final[Mapping[str, str]]
    ctx: Final[Mapping[str, tuple[str, ...]]]
    vars: Final[Mapping[str, tuple[str, ...]]]
    args: Final[tuple[str, ...] | None]
    mapping: Final[Mapping[str, Any]]

    def __init__(
        self,
        *,
        results: Mapping[str, str],
        region_results: Mapping[str, str],
        ctx: Mapping[str, tuple[str, ...]],
        vars: Mapping[str, tuple[str, ...]],
        args: tuple[str, ...] | None,
        mapping: Mapping[str, Any],
    ) -> None:
        self.results = results
        self.region_results = region_results
        self.ctx = ctx
        self.vars = vars
        self.args = args
        self.mapping = mapping


class Region(_WriteOnce):
    """One task that interprets a routing cycle: its member steps, the steps it starts at, and
    the task ids outside it that its steps route to."""

    __slots__ = ("dialect", "entry", "exits", "name", "payload", "steps")
    name: Final[str]
    dialect: Final[str]
    entry: Final[tuple[str, ...]]
    steps: Final[Mapping[str, Step]]
    exits: Final[tuple[str, ...]]
    payload: Final[Mapping[str, Any]]

    def __init__(
        self,
        *,
        name: str,
        dialect: str,
        entry: tuple[str, ...],
        steps: Mapping[str, Step],
        exits: tuple[str, ...],
        payload: Mapping[str, Any],
    ) -> None:
        self.name = name
        self.dialect = dialect
        self.entry = entry
        self.steps = steps
        self.exits = exits
        self.payload = payload

    def __copy__(self) -> Region:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Region:
        return self


def normalise_case_next(value: Any) -> list[dict[str, Any]]:
    """``then.next`` as a list of ``{step, args?, task_id?}``.

    case-v2 playbooks write it as a step name, one ``{step, args}`` dict, or a list of either.
    """
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    targets: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            targets.append({"step": item})
        elif isinstance(item, Mapping) and isinstance(item.get("step"), str):
            target: dict[str, Any] = {"step": item["step"]}
            args = item.get("args", item.get("with"))
            if isinstance(args, Mapping):
                target["args"] = dict(args)
            if "task_id" in item:
                target["task_id"] = item["task_id"]
            targets.append(target)
        else:
            raise ValueError(f"case next entry must be a step name or {{step, args}}, got {item!r}")  # noqa: TRY004
    return targets
