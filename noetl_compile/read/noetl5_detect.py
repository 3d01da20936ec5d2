"""What makes a document NoETL 5: its explicit markers, and the constructs only NoETL 5 reads.

The generations share apiVersion and shape, so a canonical-shaped file is read as NoETL 5 when it
holds something the April 2026 engine (138c10ed) did not read, and as that engine otherwise (the
corpus keeps its meaning). The first mark found decides (an explicit marker first); where a
construct decided, ``read_document`` says so (S119, at the construct) unless `--dialect` forced
the reading. Each construct, and where NoETL 5 reads it
(noetl/server@d9ec700c unless named):

- a key only NoETL 5's tool of its kind reads (``tool_catalogue.NOETL5_ONLY_FIELDS``, from
  ``noetl5_tools.py``: postgres `params`, http `timeout_seconds`, playbook `return_result`...);
- python `code` that returns at its top level, by NoETL 5's own rule (an unindented `return`
  before any unindented def/class, ``python_surface.has_top_level_return``): NoETL 5's worker
  then runs the code as a function body, the April engine as a module (a syntax error there);
- a step-level `when` (`orchestrate-core/src/playbook.rs` Step.when, evaluated by
  ``evaluate_step_when``) and step-level `args` (Step.args, sent to the worker with the command);
- a pipeline task in the label form `- fetch: {kind: http, ...}` (playbook.rs, the nested shape
  of a pipeline item);
- `spec.next_mode` on a step, and `args` on a `next` list target `{step, when, args}` (playbook.rs
  StepSpec.next_mode and NextSpec::Targets, routed by evaluator.rs evaluate_next_transitions;
  the April engine rejected the one and dropped the other).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..python_surface import has_top_level_return
from ..tool_catalogue import NOETL5_ONLY_FIELDS
from .base import NOETL5_KINDS
from .noetl5_schema import SCOPED_PREFIXES


class Mark(NamedTuple):
    reason: str  # what was found, as a sentence fragment
    container: Any  # the mapping holding it (its position is the diagnostic's)
    key: Any  # the key in ``container`` (None: the container itself)
    # A marker the file declares (a NoETL 5 kind, `executor.profile: local`...) goes unremarked;
    # a construct is said (S119), since the reading it decides can surprise.
    construct: bool = False


def noetl5_mark(root: Any, *, without_args: bool = False) -> Mark | None:
    """The first NoETL 5 marker of a document, else the first construct only NoETL 5 reads.

    ``without_args``: step `args` and `next` target `args` do not count (the file reads as
    case-v2 by them, whose engine reads them too)."""
    if not isinstance(root, dict):
        return None
    explicit = _explicit(root)
    if explicit:
        return explicit
    found = _construct(root, without_args)
    return found._replace(construct=True) if found else None


def _steps(root: dict) -> list[dict]:
    steps = root.get("workflow") if isinstance(root.get("workflow"), list) else []
    return [step for step in steps if isinstance(step, dict)]


def _tools(root: dict) -> list[dict]:
    """Every tool mapping of the steps (pipeline tasks included) and the workbook."""
    found: list[Any] = []
    for step in _steps(root):
        tool = step.get("tool")
        found += tool if isinstance(tool, list) else [tool]
    workbook = root.get("workbook") if isinstance(root.get("workbook"), list) else []
    found += [task.get("tool") for task in workbook if isinstance(task, dict)]
    tools = []
    for tool in found:
        inner = label_form(tool)
        tools.append(inner[1] if inner else tool)
    return [tool for tool in tools if isinstance(tool, dict)]


def label_form(entry: Any) -> tuple[str, dict] | None:
    """``(label, task)`` of a pipeline item written `- label: {kind: ..., ...}`, else None."""
    if isinstance(entry, dict) and len(entry) == 1 and "kind" not in entry:
        ((label, task),) = entry.items()
        if isinstance(label, str) and isinstance(task, dict) and "kind" in task:
            return label, task
    return None


def _explicit(root: dict) -> Mark | None:
    executor = root.get("executor")
    if isinstance(executor, dict) and executor.get("profile") == "local":
        return Mark("`executor.profile: local`", executor, "profile")
    metadata = root.get("metadata")
    if isinstance(metadata, dict) and "exposes_as_mcp" in metadata:
        return Mark("`metadata.exposes_as_mcp`", metadata, "exposes_as_mcp")
    for step in _steps(root):
        nxt = step.get("next")
        spec = nxt.get("spec") if isinstance(nxt, dict) else None
        if isinstance(spec, dict) and "on_no_match" in spec:
            return Mark("`next.spec.on_no_match`", spec, "on_no_match")
        tool = step.get("tool")
        for task in tool if isinstance(tool, list) else ():
            values = task.get("set") if isinstance(task, dict) else None
            if isinstance(values, dict):
                for key in values:
                    if isinstance(key, str) and not key.startswith(SCOPED_PREFIXES):
                        return Mark("a pipeline task's `set` of a plain name", values, key)
    for tool in _tools(root):
        kind = tool.get("kind")
        if isinstance(kind, str) and kind in NOETL5_KINDS:
            return Mark(f"tool kind {kind!r}", tool, "kind")
        path = tool.get("path") if kind == "playbook" else None
        if isinstance(path, str) and path.startswith(("./", "../")):
            # A catalog path never starts so: NoETL 5 reads it as a file beside the caller.
            return Mark("a nested playbook called by file path", tool, "path")
    return None


def _construct(root: dict, without_args: bool = False) -> Mark | None:
    for step in _steps(root):
        name = step.get("step")
        if "when" in step:
            return Mark(f"a step-level `when` (step {name!r})", step, "when")
        if "args" in step and not without_args:
            return Mark(f"step-level `args` (step {name!r})", step, "args")
        spec = step.get("spec")
        if isinstance(spec, dict) and "next_mode" in spec:
            return Mark(f"`spec.next_mode` (step {name!r})", spec, "next_mode")
        nxt = step.get("next")
        for entry in nxt if isinstance(nxt, list) else ():
            if isinstance(entry, dict) and "step" in entry and "args" in entry and not without_args:
                return Mark(f"`args` on a `next` list target (step {name!r})", entry, "args")
        tool = step.get("tool")
        for index, entry in enumerate(tool if isinstance(tool, list) else ()):
            found = label_form(entry)
            if found:
                return Mark(
                    f"the pipeline label form `- {found[0]}: {{kind: ...}}` (step {name!r})",
                    tool,
                    index,
                )
    for tool in _tools(root):
        kind = tool.get("kind")
        if not isinstance(kind, str):
            continue  # a kind of another shape is the reader's S102
        for key in tool:
            if key in NOETL5_ONLY_FIELDS.get(kind, ()):
                return Mark(f"`{key}` in a {kind} tool", tool, key)
        code = tool.get("code") if kind == "python" else None
        if isinstance(code, str) and has_top_level_return(code):
            return Mark(
                "python `code` that returns at its top level (NoETL 5 runs it as a function body)",
                tool,
                "code",
            )
    return None


__all__ = ["Mark", "label_form", "noetl5_mark"]
