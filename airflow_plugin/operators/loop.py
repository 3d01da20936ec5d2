"""Loop operators: ``loop.in`` over a collection, lowered as a task group.

    head (render ``in``, chunk it)  ->  body.partial(...).expand(chunk=head.output)  ->  tail

* ``NoetlLoopHeadOperator`` renders the collection and returns at most ``[core] max_map_length``
  chunks ``{"offset": i, "items": [...]}``: one item per chunk up to that limit, larger
  collections get several items per chunk, so any size maps (design brief §3);
* ``NoetlLoopBodyOperator`` (mapped) runs the step once per item of its chunk;
* ``NoetlLoopTailOperator`` collects the body results in index order into the loop step's
  result (``results``, ``stats``), applies ``loop.done`` routing and skips the targets not taken;
  it also closes cursor loops (``operators.cursor``);
* ``NoetlSequentialLoopOperator`` iterates inside one task when a sequential loop writes ctx,
  so each iteration sees the writes of the previous ones.

Every constructor validates its payload (a malformed payload is a DAG import error that names
the step). This version builds the constructors and the task shapes; the execution of loop
iterations is not built yet and says so instead of pretending to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseOperator

__all__ = [
    "NoetlLoopBodyOperator",
    "NoetlLoopHeadOperator",
    "NoetlLoopTailOperator",
    "NoetlSequentialLoopOperator",
    "validate_reads",
    "validate_step_payload",
]

LOOP_MODES = ("sequential", "parallel", "async", "cursor")
# Keys of a step payload that the step contract (runtime.payload) does not define: the
# lowering adds them, and the operators of this package consume them.
EXTENSION_KEYS = ("loop", "sink", "retry", "playbook")


def not_built(operator: object, what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{type(operator).__name__}: the runtime of this operator ({what}) is not built yet in this "
        "version of noetlc; the DAG compiles and loads, but this task cannot run"
    )


def validate_reads(reads: Any, where: str) -> None:
    """``{"results": {step: task_id}, "ctx": {var: [task_id]}, "vars": {...}, "region_results"?}``."""
    problems = []
    if not isinstance(reads, Mapping):
        raise ValueError(f"{where}: `reads` must be a dict, got {type(reads).__name__}")  # noqa: TRY004
    for key in ("results", "region_results"):
        table = reads.get(key, {})
        if not isinstance(table, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in table.items()
        ):
            problems.append(f"`reads.{key}` must map step names to task ids")
    for key in ("ctx", "vars"):
        table = reads.get(key, {})
        if not isinstance(table, Mapping) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(t, str) for t in v)
            for k, v in table.items()
        ):
            problems.append(f"`reads.{key}` must map names to lists of task ids")
    unknown = sorted(set(reads) - {"results", "region_results", "ctx", "vars"})
    if unknown:
        problems.append(f"`reads` has unknown key(s) {', '.join(map(str, unknown))}")
    if problems:
        raise ValueError(f"{where}: " + "; ".join(problems))


def validate_step_payload(payload: Any, *, extensions: tuple[str, ...] = EXTENSION_KEYS) -> None:
    """The step contract (``runtime.payload.validate_payload``) plus the extension keys."""
    from ..runtime.payload import validate_payload

    if not isinstance(payload, Mapping):
        raise ValueError(f"NoETL step payload must be a dict, got {type(payload).__name__}")  # noqa: TRY004
    validate_payload({k: v for k, v in payload.items() if k not in extensions})
    unknown = sorted(k for k in payload if k in EXTENSION_KEYS and k not in extensions)
    if unknown:
        raise ValueError(
            f"step {payload.get('step')!r}: key(s) {', '.join(unknown)} are not valid here"
        )


def validate_loop(payload: Any, *, cursor: bool = False) -> Mapping[str, Any]:
    validate_step_payload(payload)
    step = payload.get("step")
    loop = payload.get("loop")
    if not isinstance(loop, Mapping):
        raise ValueError(f"step {step!r}: a loop operator needs a `loop` object in its payload")  # noqa: TRY004
    problems = []
    if not isinstance(loop.get("iterator"), str) or not loop["iterator"]:
        problems.append("`loop.iterator` must be a non-empty string")
    if loop.get("mode") not in LOOP_MODES:
        problems.append(
            f"`loop.mode` must be one of {', '.join(LOOP_MODES)}, got {loop.get('mode')!r}"
        )
    if cursor:
        spec = loop.get("cursor")
        if loop.get("mode") != "cursor" or not isinstance(spec, Mapping):
            problems.append("a cursor loop needs `loop.mode: cursor` and a `loop.cursor` object")
        elif not isinstance(spec.get("kind"), str) or not isinstance(spec.get("claim"), str):
            problems.append("`loop.cursor` needs a string `kind` and a string `claim`")
    else:
        if "in" not in loop:
            problems.append("`loop.in` (the collection) is required")
        if loop.get("mode") == "cursor":
            problems.append("a cursor loop is lowered with operators.cursor, not operators.loop")
    limit = loop.get("max_in_flight")
    if (
        limit is not None
        and not isinstance(limit, str)
        and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1)
    ):
        problems.append("`loop.max_in_flight` must be a positive integer or a template")
    body = loop.get("body")
    if body is not None:
        if (
            not isinstance(body, Mapping)
            or not isinstance(body.get("steps"), Mapping)
            or not body["steps"]
        ):
            problems.append("`loop.body` must hold the body `steps` of a v1 loop")
        else:
            for payload_ in body["steps"].values():
                validate_step_payload(payload_)
    end = loop.get("end")
    if end is not None:
        validate_step_payload({k: v for k, v in end.items() if k != "result"})
    if problems:
        raise ValueError(f"invalid loop payload for step {step!r}: " + "; ".join(problems))
    return loop


class _CompiledStepOperator(BaseOperator):
    """Base: carries a compiled payload that Airflow's Jinja never renders."""

    template_fields = ()
    ui_color = "#e8f0fe"

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.payload = payload
        self.reads = reads


class NoetlLoopHeadOperator(_CompiledStepOperator):
    """Renders ``loop.in`` and returns the chunks the body is mapped over."""

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        validate_loop(payload)
        validate_reads(reads, f"loop head of step {payload.get('step')!r}")
        super().__init__(payload=payload, reads=reads, **kwargs)

    def execute(self, context: Any) -> Any:
        raise not_built(self, "rendering and chunking the loop collection")


class NoetlLoopBodyOperator(_CompiledStepOperator):
    """One mapped instance: runs the loop step for each item of ``chunk``."""

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:  # the mapped operator is built from partial()
        payload = kwargs.get("payload")
        validate_loop(payload)
        validate_reads(kwargs.get("reads"), f"loop body of step {payload.get('step')!r}")
        return super().partial(**kwargs)

    def __init__(
        self, *, payload: dict[str, Any], reads: dict[str, Any], chunk: Any = None, **kwargs: Any
    ) -> None:
        validate_loop(payload)
        validate_reads(reads, f"loop body of step {payload.get('step')!r}")
        super().__init__(payload=payload, reads=reads, **kwargs)
        self.chunk = chunk

    def execute(self, context: Any) -> Any:
        raise not_built(self, "running loop iterations")


class NoetlLoopTailOperator(_CompiledStepOperator):
    """Collects the iterations into the loop step's result and routes (``loop.done``)."""

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        loop = payload.get("loop") if isinstance(payload, Mapping) else None
        validate_loop(payload, cursor=isinstance(loop, Mapping) and loop.get("mode") == "cursor")
        validate_reads(reads, f"loop tail of step {payload.get('step')!r}")
        super().__init__(payload=payload, reads=reads, **kwargs)

    def execute(self, context: Any) -> Any:
        raise not_built(self, "collecting loop results and loop.done routing")


class NoetlSequentialLoopOperator(_CompiledStepOperator):
    """A sequential loop whose iterations write ctx: all iterations inside this one task."""

    def __init__(self, *, payload: dict[str, Any], reads: dict[str, Any], **kwargs: Any) -> None:
        loop = validate_loop(payload)
        if loop.get("mode") != "sequential":
            raise ValueError(
                f"step {payload.get('step')!r}: NoetlSequentialLoopOperator needs a sequential loop"
            )
        validate_reads(reads, f"sequential loop of step {payload.get('step')!r}")
        super().__init__(payload=payload, reads=reads, **kwargs)

    def execute(self, context: Any) -> Any:
        raise not_built(self, "iterating a sequential loop in one task")
