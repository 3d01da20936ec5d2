"""The unsafe fix of a v1 loop body (unsafe.py, `loop-body`).

A v1 loop step routes each item into body steps closed by an `end_loop` step, which derives its
`result` from `<loop>_results` (each iteration's results by body step). A canonical loop runs one
step per item ("Loop is a step modifier", NoETL 138c10ed models.py). The closest form of a body
of one step, keeping every step name:

| v1 | canonical |
|---|---|
| loop step `L`: `loop: {in, iterator, mode}`, `next: [{step: B, with: V}]` | `L` routes on: `next: [{step: B}]` |
| body step `B` (only way in from `L`, no input of its own), `next: [E]` | `B` takes the loop (`loop: {in, iterator, spec: {mode}}`) and `input: V` |
| `E`: `end_loop: L`, `result: {k: "{{ L_results \\| map(attribute='B') ... }}"}` | `E` computes `k` with a python tool from `B.results` |

Anything else (several body steps, another read of `L_results`, an input of `B`'s own) is left
(U801).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .edits import flow, render, seq


@dataclass
class LoopBody:
    loop: str  # L
    body: str  # B
    end: str  # E
    passed: Any  # the values passed along L's `next` (None: none)
    loop_value: Any  # the canonical `loop` mapping of B
    result: dict  # E's result with the `L_results | map(attribute='B')` reads rewritten


def _results_of(loop: str, body: str) -> re.Pattern[str]:
    # `L_results | map(attribute='B')`: literal names, fixed separators; linear.
    return re.compile(
        re.escape(loop)
        + r"_results\s*\|\s*map\(\s*attribute\s*=\s*(['\"])"
        + re.escape(body)
        + r"\1\s*\)"
    )


def plan(rewriter: Any) -> dict[str, LoopBody]:
    """The loop bodies of one step each that can be folded, by loop step name."""
    doc_steps = {
        str(i.get("step")): i for i in rewriter.doc.get("workflow") or [] if hasattr(i, "lc")
    }
    out: dict[str, LoopBody] = {}
    for name, item in doc_steps.items():
        loop = item.get("loop")
        entries = item.get("next")
        if not isinstance(loop, dict) or not {"in", "iterator"} <= set(loop):
            continue
        if set(loop) - {"in", "iterator", "mode"} or set(item) - {"step", "desc", "loop", "next"}:
            continue
        if not isinstance(entries, list) or len(entries) != 1:
            continue
        entry = entries[0]
        body = str(entry.get("step") if isinstance(entry, dict) else entry)
        passed = entry.get("with") if isinstance(entry, dict) else None
        if isinstance(entry, dict) and set(entry) - {"step", "with"}:
            continue
        holder = doc_steps.get(body)
        if holder is None or rewriter.ways_in(body) != 1:
            continue
        if any(k in holder for k in ("with", "args", "data", "input", "loop", "end_loop")):
            continue
        following = holder.get("next")
        if not isinstance(following, list) or len(following) != 1:
            continue
        closing = following[0]
        end = str(closing.get("step") if isinstance(closing, dict) else closing)
        closer = doc_steps.get(end)
        if closer is None or str(closer.get("end_loop")) != name:
            continue
        if set(closer) - {"step", "desc", "end_loop", "result", "next"}:
            continue
        result = closer.get("result") or {}
        if not isinstance(result, dict) or not all(str(k).isidentifier() for k in result):
            continue
        pattern = _results_of(name, body)
        rewritten = {}
        for key, value in result.items():
            text = pattern.sub(f"{body}.results", value) if isinstance(value, str) else value
            rewritten[key] = text
        word = f"{name}_results"
        inside = sum(str(v).count(word) for v in result.values())
        if rewriter.edits.text.count(word) != inside or any(
            word in str(v) for v in rewritten.values()
        ):
            continue  # another read of the per-iteration results, here or elsewhere
        mode = str(loop.get("mode", "sequential"))
        value = {"in": loop["in"], "iterator": loop["iterator"]}
        if "mode" in loop:
            value["spec"] = flow({"mode": "parallel" if mode == "async" else loop["mode"]})
        out[name] = LoopBody(name, body, end, passed, value, rewritten)
    return out


def loop_step(rewriter: Any, item: Any, fold: LoopBody, end: int) -> None:
    """`L`: the loop goes to its body step; `L` routes on to it, passing nothing."""
    rewriter.replace_keys(item, ["loop", "next"], end, "next", seq([flow({"step": fold.body})]))


def body_step(rewriter: Any, item: Any, fold: LoopBody) -> None:
    """`B`: the loop and the passed values, below its `step` line."""
    from ruamel.yaml.comments import CommentedMap

    line, column = item.lc.key("step")
    block = render("loop", CommentedMap(fold.loop_value), column)
    if fold.passed:
        block += render("input", fold.passed, column)
    rewriter.edits.replace(line + 1, line + 1, block)


def end_step(rewriter: Any, item: Any, fold: LoopBody, end: int) -> None:
    """`E`: `end_loop` dropped, `result` computed by a python tool from the loop's results."""
    rewriter.replace_keys(item, ["end_loop", "result"], end, "tool", python_tool(fold.result))


def python_tool(values: dict) -> Any:
    """A python tool whose result is ``values`` rendered (each as one of its args)."""
    from ruamel.yaml.comments import CommentedMap

    code = "result = {" + ", ".join(f"{k!r}: {k}" for k in values) + "}"
    return CommentedMap({"kind": "python", "args": CommentedMap(values), "code": code})


def result_tool(rewriter: Any, item: Any, others: list[str], end: int) -> bool:
    """A toolless v1 step's `result` mapping (and its `type: end`, ``others``) as a python tool
    computing it (unsafe: `result-as-tool`); False (U801 given) when its keys are not names."""
    result = item["result"]
    if not isinstance(result, dict) or not all(str(k).isidentifier() for k in result):
        rewriter.inexact(item, "result", "`result` is not a mapping of names")
        return False
    keys = sorted(["result", *others], key=lambda k: item.lc.key(k)[0])
    rewriter.replace_keys(item, keys, end, "tool", python_tool(dict(result)))
    return True
