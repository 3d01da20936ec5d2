"""The dialect-free playbook AST that every stage after `read` consumes.

The three DSL generations (v1 "whitepaper", v2 "case", canonical) are normalised into these
models by the readers in ``read/``. Values that stay templated or are passed verbatim to the
runtime (tool config, inputs, set/vars blocks) keep the ``Y*`` types of ``load`` so positions
survive; ``span`` fields hold ``load.Span`` objects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

Dialect = Literal["v1", "case-v2", "canonical"]
DIALECTS: tuple[str, ...] = ("v1", "case-v2", "canonical")
# Dialects whose engine runs a playbook with an arc to a step that does not exist: it logs
# "Target step not found" and goes on as if the arc had not matched (138c10ed
# `_evaluate_next_transitions`; dc55c492 `_process_then_actions` and its structural `next`), so
# the run ends where the step's other arcs lead (final_status/missing_target_step). There R201 is
# a warning and the lowering leaves the arc out; v1 (no engine recorded) keeps it an error.
SKIPS_UNKNOWN_TARGETS: frozenset[str] = frozenset({"canonical", "case-v2"})


# One set of field names per node class, shared by all its instances (see Node.model_post_init).
_FIELD_NAMES: dict[type, set[str]] = {}


class Node(BaseModel):
    # Readers build these from already-checked data; validation stays on to catch reader bugs.
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")
    span: Any = None

    def model_post_init(self, context: Any, /) -> None:
        # pydantic keeps per instance the set of the field names a constructor was given (728
        # bytes for six names, so about a fifth of a large checked playbook's memory), only to
        # answer `model_fields_set` / `exclude_unset`, which nothing here asks. Every node of a
        # class shares the set of all its field names instead: assigning a field adds a name that
        # is already there, so the set never changes.
        cls = type(self)
        names = _FIELD_NAMES.get(cls)
        if names is None:
            names = _FIELD_NAMES[cls] = set(cls.model_fields)
        object.__setattr__(self, "__pydantic_fields_set__", names)


class PolicyRule(Node):
    """One rule of a canonical `spec.policy.rules` list (or a v2 retry policy)."""

    when: Any = None  # template string, YAML bool, or None for an `else` rule
    is_else: bool = False
    action: str | None = None  # continue | retry | break | jump | fail
    attempts: Any = None
    backoff: Any = None
    delay: Any = None
    to: str | None = None
    to_span: Any = None
    set: Any = None  # {"ctx.x": template, "iter.y": template}


class Task(Node):
    """A tool invocation: a step's tool, one item of a pipeline, or a workbook task."""

    name: str | None = None
    kind: str | None = None
    kind_span: Any = None
    config: Any = None  # the tool mapping as written (v1 inline tools: the step mapping)
    rules: list[PolicyRule] = Field(default_factory=list)


class Arc(Node):
    """A routing edge. Arcs of one `group` fire together (v1 `then:` lists, v2 case rules)."""

    target: str
    when: Any = None  # None: unconditional
    set: Any = None
    args: Any = None
    group: int = 0
    origin: Literal["next", "arc", "case", "else", "end_loop"] = "next"
    event: str | None = None  # the event a guard waits for, e.g. "loop.done", "call.error"


class Router(Node):
    mode: Literal["exclusive", "inclusive"] = "inclusive"
    arcs: list[Arc] = Field(default_factory=list)
    on_no_match: str | None = None  # NoETL 5 `next.spec.on_no_match`: complete | quiet


class CaseRule(Node):
    """A v2 `case` rule: `when` plus the `then` actions (next targets become router arcs)."""

    when: Any = None
    then: Any = None  # merged action mapping: next/sink/set/retry/collect/result/...


class Loop(Node):
    iterator: str | None = None
    iterator_span: Any = None
    collection: Any = None  # `in` (template, list, ...)
    cursor: Any = None  # `cursor` mapping (canonical cursor loops)
    mode: str = "sequential"  # sequential | parallel | async | cursor
    max_in_flight: Any = None
    filter: Any = None
    limit: Any = None  # v1: at most this many items, after `filter`/`where` and `order_by`
    order_by: Any = None  # v1 iterator: items sorted by this template's value (stable)
    body_via_next: bool = False  # v1: the loop step routes into body steps closed by `end_loop`


class Step(Node):
    name: str
    desc: str | None = None
    tool: Task | None = None
    pipeline: list[Task] | None = None
    input: Any = None  # canonical `input`, v2 `args`, v1 `with`/`args`/`data`
    loop: Loop | None = None
    router: Router = Field(default_factory=Router)
    case: list[CaseRule] = Field(default_factory=list)
    set: Any = None  # {"ctx.x": template} written after success
    vars: Any = None  # v2 vars extraction
    sink: Any = None
    retry: Any = None
    end_loop: str | None = None
    end_loop_span: Any = None
    loop_result: Any = None  # v1 `result` of an end_loop step
    admit: Any = None
    guard: Any = None  # NoETL 5 `when`: the step runs only when it holds, else its branch ends
    # NoETL 5's server reading of a false `guard` (evaluate_step_when): the step is skipped and
    # its arcs are taken (the local runtime ends the branch instead).
    guard_walks_on: bool = False
    raw: Any = None  # the step mapping as written

    @property
    def tasks(self) -> list[Task]:
        if self.pipeline is not None:
            return self.pipeline
        return [self.tool] if self.tool is not None else []


class Playbook(Node):
    file: str
    dialect: Dialect
    api_version: str | None = None
    name: str | None = None
    catalog_path: str | None = None
    workload: Any = None
    keychain: Any = None
    executor: Any = None
    workbook: dict[str, Task] = Field(default_factory=dict)
    steps: list[Step] = Field(default_factory=list)
    entry: str | None = None  # name of the entry step, when it exists
    # The canonical dialect's generation: None for the April 2026 engine (the corpus), "noetl5"
    # for NoETL 5 (Rust engine and CLI), whose semantics differ (python calling convention,
    # `credential`, task `set` names...); `profile` is `executor.profile` ("local": the CLI's
    # own interpreter, with its dialect: step `vars`, `next` lists with `when`/`then`).
    generation: str | None = None
    profile: str | None = None
    # Whether the engine renders workload values as templates: NoETL 5 hands them on as data
    # (a `{{ }}` there is text), so check does not read them as templates.
    workload_templates: bool = True
    raw: Any = None
    # `metadata.noetlc.fuse`: step fusion for this playbook (None: as `--fuse` says).
    fuse: bool | None = None
    _index: tuple[int, dict[str, Step]] | None = PrivateAttr(default=None)
    _analyses: dict[str, tuple[tuple[int, int], Any]] = PrivateAttr(default_factory=dict)

    def step(self, name: str) -> Step | None:
        # Called once per step by several stages: an index keeps them linear. Rebuilt when the
        # list changes length (readers append while they build it); the first of a name wins.
        index = self._index
        if index is None or index[0] != len(self.steps):
            by_name: dict[str, Step] = {}
            for step in self.steps:
                by_name.setdefault(step.name, step)
            index = self._index = (len(self.steps), by_name)
        return index[1].get(name)

    @property
    def step_names(self) -> list[str]:
        # A copy of a kept list: several stages ask for it, and collecting the names walks every
        # step object of a large playbook (cache misses) where copying a list does not.
        return list(self.analysis("step_names", lambda playbook: [s.name for s in playbook.steps]))

    def analysis(self, key: str, compute: Callable[[Playbook], Any]) -> Any:
        """``compute(self)``, kept under ``key`` until the step list is replaced or changes length
        (readers append steps while they build the playbook). check and compile share one
        playbook, so an analysis both need (the step graph, the template sites, the writes) is
        done once. Callers must not change what they get back."""
        version = (id(self.steps), len(self.steps))
        kept = self._analyses.get(key)
        if kept is None or kept[0] != version:
            kept = self._analyses[key] = (version, compute(self))
        return kept[1]

    @property
    def catalog_key(self) -> str | None:
        """The key NoETL registers this playbook under and nested calls name it by:
        ``metadata.path``, else the root ``path``, else the name (the reader merged those)."""
        for key in (self.catalog_path, self.name):
            if isinstance(key, str) and key.strip("/ "):
                return key
        return None
