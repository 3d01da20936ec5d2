"""Tool pipelines and task policies (canonical ``tool: [..]`` + ``spec.policy.rules``).

NoETL runs these on the worker, inside one command; so do we, inside one Airflow task. Semantics
(reference/noetl_dsl.md sections 1c and 5):

* tasks run in order; each sees the step context plus the results of earlier tasks by label,
  ``_prev`` (previous task's result), ``_task``, ``_attempt``, ``results``, the merged ``ctx`` and
  ``iter``; rules additionally see ``output`` (the call envelope) and ``error``;
* per task, the first rule whose ``when`` matches wins (``else`` matches always); no rule or no
  match: ``ok`` -> continue, ``error`` -> fail;
* ``retry`` re-runs the task until ``attempts`` tries in total (default 3), waiting per
  ``backoff``: none 0, linear delay×attempt, exponential delay×2^(attempt-1), anything else
  (``fixed``) the plain delay; absent: the engine's default (``pipeline_retry_backoff`` of its
  profile: ``none``, as 138c10ed's task_sequence_executor.py:959 and NoETL 5's
  task_sequence.rs default it); when exhausted the pipeline fails;
* ``break`` ends the pipeline with status ``break``; ``jump`` goes to the task labelled ``to``
  (``previous``/``prev`` = the task before); ``fail`` fails the pipeline;
* rule ``set``: ``ctx.x``/``step.x``/bare ``x`` become ctx writes (returned, and visible to later
  tasks), ``iter.x`` stays in the pipeline's iteration scope.

The step result (NoETL 5: ``profile.pipeline_result_labelled``, the task results by label, flat,
``_context_updates`` when a rule's ``set`` wrote; failed: ``{labeled_results, failed_task}``) is
otherwise NoETL's task-sequence record, with no merge of the last task's result:
``{status: ok|break|failed, _prev, results, ctx}``; ``results`` and ``_prev`` hold successful
tasks only (a failed task that a rule lets continue leaves no entry); ``ctx`` holds the
pipeline's ``set`` writes; ``break`` adds ``remaining_actions`` (the tasks not run) and
``failed`` adds ``failed_task`` and ``error`` (``{kind: tool_error, retryable, code,
status_code, message}`` for a tool failure, ``{kind: config, message}`` for a bad jump, ``null``
when a rule failed a task that succeeded). ``PipelineResult.error`` keeps noetlc's full error
(type, traceback, field) for the step's events and logs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from noetl_compile.engine_profiles import CANONICAL, EngineProfile

from ..events import names
from ..templating.context import apply_ctx_writes, reveal, with_bindings, with_values
from ..templating.proxy import wrap_result
from ..templating.render import evaluate_condition, render_value
from ..tools import ToolCall, ToolOutcome, get_tool
from ..tools.shell import shell_commands_protected
from .policy import backoff_wait, first_match

__all__ = [
    "DEFAULT_RETRY_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "PipelineResult",
    "backoff_delay",
    "call_tool",
    "outcome_envelope",
    "outcome_result",
    "pipeline_error",
    "run_pipeline",
    "single_tool_pipeline",
    "split_set",
    "task_label",
]

DEFAULT_RETRY_ATTEMPTS = 3
DEFAULT_RETRY_DELAY = 1.0
# A jump cycle whose rules never stop would spin forever inside a worker slot; this bound turns it
# into a visible pipeline failure.
MAX_TASK_RUNS = 10_000

# Keys of a tool/task block that are not tool configuration to render.
# ``retry`` inside a tool is the step's retry policy (formal spec section 6), read by
# runtime.step; on ``kind: playbook`` NoETL ignores it.
_NOT_CONFIG = ("spec", "name", "retry")
# Tools for which ``name`` is configuration (the secret to fetch), not a task label.
_NAMED_KINDS = frozenset({"secrets", "secret_manager", "credential"})
# Keys rendered as text (no value coercion): source code must stay a string.
_TEXT_KEYS = frozenset({"circuit", "code", "command", "commands", "query", "script"})


@dataclass
class PipelineResult:
    status: Literal["ok", "break", "failed"]
    result: dict[str, Any]
    ctx_writes: dict[str, Any] = field(default_factory=dict)
    iter_scope: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    # One entry per task run: {"task", "attempt", "status", "do"} — for events and tests.
    trace: list[dict[str, Any]] = field(default_factory=list)


def task_label(task: Mapping[str, Any], index: int) -> str:
    name = task.get("name")
    return name if isinstance(name, str) and name else f"task_{index}"


def single_tool_pipeline(step: str, tool: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A single tool with policy rules runs as a one-task pipeline named ``<step>_task``."""
    return [{**dict(tool), "name": f"{step}_task"}]


def backoff_delay(backoff: Any, delay: Any, attempt: int) -> float:
    """Seconds to wait after failed try number ``attempt`` (1-based)."""
    try:
        base = float(delay) if delay is not None else DEFAULT_RETRY_DELAY
    except (TypeError, ValueError):
        base = DEFAULT_RETRY_DELAY
    if backoff == "none":
        return 0.0
    if backoff == "linear":
        return backoff_wait(attempt, base, linear=True)
    if backoff == "exponential":
        return backoff_wait(attempt, base, 2.0)
    return backoff_wait(attempt, base)  # "fixed", absent, anything else: NoETL's plain delay


def split_set(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split rendered ``set`` entries into (ctx writes, iter writes) by key prefix."""
    ctx_writes: dict[str, Any] = {}
    iter_writes: dict[str, Any] = {}
    for key, value in values.items():
        if key == "ctx" and isinstance(value, Mapping):  # nested form ``set: {ctx: {x: ..}}``
            ctx_writes.update(value)
        elif key == "iter" and isinstance(value, Mapping):
            iter_writes.update(value)
        elif key.startswith("iter."):
            iter_writes[key[len("iter.") :]] = value
        elif key.startswith("ctx."):
            ctx_writes[key[len("ctx.") :]] = value
        elif key.startswith("step."):
            ctx_writes[key[len("step.") :]] = value
        else:
            ctx_writes[key] = value
    return ctx_writes, iter_writes


def _scoped(key: Any) -> bool:
    return isinstance(key, str) and (key in ("ctx", "iter") or key.startswith(_SCOPES))


_SCOPES = ("ctx.", "iter.", "step.")


def outcome_result(outcome: ToolOutcome) -> Any:
    """What ``{{ step }}`` / ``results.<task>`` holds for an outcome."""
    if outcome.ok:
        return outcome.data
    if outcome.reported is not None:
        return outcome.reported
    result: dict[str, Any] = {}
    if isinstance(outcome.data, Mapping):
        result.update(outcome.data)
    elif outcome.data is not None:
        result["data"] = outcome.data
    result["status"] = "error"
    result["error"] = outcome.error
    return result


def outcome_envelope(outcome: ToolOutcome, *, attempt: int = 1) -> dict[str, Any]:
    """The ``output`` namespace: ``{status, data, ref, error, context, http, pg, py, meta}``."""
    error = outcome.error
    py: dict[str, Any] = {}
    if error and error.get("kind") == "python":
        py = {"exception": error.get("type"), "traceback": error.get("traceback")}
    return {
        "status": "ok" if outcome.ok else "error",
        "data": outcome.data,
        "ref": None,
        "error": error,
        "context": None,
        "http": dict(outcome.meta.get("http", {})),
        "pg": dict(outcome.meta.get("pg", {})),
        "py": py,
        "meta": {**outcome.meta, "attempt": attempt},
    }


def _status_code(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def pipeline_error(outcome: ToolOutcome) -> dict[str, Any] | None:
    """The ``error`` NoETL's task sequence records for a failed task: ``{kind, retryable, code,
    status_code, message}``; ``None`` for a task that succeeded (a rule failed it)."""
    if outcome.ok:
        return None
    data = outcome.data if isinstance(outcome.data, Mapping) else {}
    error = outcome.error if isinstance(outcome.error, Mapping) else {}
    raw = data.get("status_code")
    if raw is None and isinstance(data.get("data"), Mapping):
        raw = data["data"].get("status_code") or data["data"].get("status")
    if raw is None:
        raw = error.get("status_code")
    status_code = _status_code(raw)
    code = data.get("code", error.get("code"))
    if code is None and status_code is not None:
        code = f"HTTP_{status_code}"
    retryable = data.get("retryable", error.get("retryable"))
    if retryable is None:
        retryable = status_code is not None and (status_code == 429 or status_code >= 500)
    if data.get("status") == "error":  # a result that reports its own failure
        message = data.get("error") or data.get("message", "Tool returned error status")
    else:
        message = error.get("message", "tool call failed")
    return {
        "kind": data.get("error_kind", "tool_error"),
        "retryable": bool(retryable),
        "code": code,
        "status_code": status_code,
        "message": message,
    }


class EventSink(Protocol):
    def emit(self, name: str, entity: str, status: str, **fields: Any) -> None: ...


def _with_task_inputs(
    task: Mapping[str, Any], label: str, context: Mapping[str, Any]
) -> dict[str, Any]:
    """NoETL 5's pipeline task `input` (else `args`, task_sequence.rs:324): each value rendered
    against the running context, then bound as a name the task's own templates read
    (`{{ x }}` in a noop `result`, a postgres `command`). Reserved names keep their meaning."""
    block = task.get("input")
    if not isinstance(block, Mapping):
        block = task.get("args")
    if not isinstance(block, Mapping) or not block:
        return dict(context)
    key = "input" if isinstance(task.get("input"), Mapping) else "args"
    rendered = render_value(dict(block), context, strict=False, field=f"tool.{label}.{key}")
    return with_bindings(context, rendered if isinstance(rendered, Mapping) else {})


def call_tool(
    step: str,
    label: str,
    tool: Mapping[str, Any],
    context: Mapping[str, Any],
    step_input: Mapping[str, Any],
    *,
    events: EventSink | None = None,
    attempt: int = 1,
    profile: EngineProfile = CANONICAL,
    before_call: Callable[[], None] | None = None,
) -> ToolOutcome:
    """Render a tool block leniently (worker rules) and run it, reporting ToolStarted and
    ToolCompleted / ToolErrored (aliases ``call.done`` / ``call.error``) to ``events``.

    Raises ToolNotAvailable for kinds this runtime does not have: that is a missing feature,
    not a tool failure a policy could retry.
    """
    kind = tool.get("kind")
    executor = get_tool(kind)
    config: dict[str, Any] = {}
    where = "tool" if label == step else f"tool.{label}"
    tool = shell_commands_protected(tool) if kind == "shell" else tool  # Go templates stay text
    for key, value in tool.items():
        # ``name`` labels a pipeline task, except for the tools whose ``name`` is their subject.
        if key in _NOT_CONFIG and not (key == "name" and kind in _NAMED_KINDS):
            continue
        if key == "set" and profile.task_set_after_call:
            continue  # NoETL 5's task `set`: the pipeline renders it after the call

        config[key] = render_value(
            value, context, strict=False, coerce=key not in _TEXT_KEYS, field=f"{where}.{key}"
        )
    if before_call is not None:
        before_call()  # the step's strict mode refuses a config left as template text
    tool_run_id = f"{step}:{label}"
    if events is not None:
        events.emit(
            names.TOOL_STARTED,
            "tool",
            "in_progress",
            entity_id=tool_run_id,
            tool_run_id=tool_run_id,
            attempt=attempt,
            data={"kind": kind},
        )
    started = time.monotonic()
    outcome = executor(
        ToolCall(
            step=step,
            task=label,
            config=config,
            step_input=step_input,
            context=context,
            profile=profile,
        )
    )
    if not outcome.ok and isinstance(outcome.error, dict):
        # Where in the step the failure happened: `tool` or `tool.<pipeline task>`.
        outcome.error.setdefault("field", where)
    if events is not None:
        events.emit(
            names.TOOL_COMPLETED if outcome.ok else names.TOOL_ERRORED,
            "tool",
            "success" if outcome.ok else "error",
            alias="call.done" if outcome.ok else "call.error",
            entity_id=tool_run_id,
            tool_run_id=tool_run_id,
            attempt=attempt,
            duration=time.monotonic() - started,
            data=_completion_data(kind, outcome),
        )
    return outcome


def _completion_data(kind: Any, outcome: ToolOutcome) -> dict[str, Any]:
    """ToolCompleted / ToolErrored data. A tool whose outcome carries ``provenance`` (quantum:
    seeds, backend, versions) gets it as a key of its own, so the event log alone reproduces the
    call; other tools' events stay as they were."""
    if not outcome.ok:
        return {"kind": kind, "error": outcome.error}
    data = {"kind": kind, "result": outcome.data}
    if "provenance" in outcome.meta:
        data["provenance"] = outcome.meta["provenance"]
    return data


def _rules(task: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = task.get("spec")
    policy = spec.get("policy") if isinstance(spec, Mapping) else None
    rules = policy.get("rules") if isinstance(policy, Mapping) else None
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


def _select_action(
    rules: Sequence[Mapping[str, Any]], context: Mapping[str, Any], ok: bool, label: str
) -> dict[str, Any]:
    def holds(index: int, rule: Mapping[str, Any]) -> bool:
        # `else` matches always; a rule after it is never evaluated.
        where = f"tool.{label}.spec.policy.rules[{index}].when"
        return "else" in rule or evaluate_condition(
            rule.get("when"), context, flavor="policy", field=where
        )

    found = first_match(rules, holds)
    if found is None:
        return {"do": "continue" if ok else "fail"}
    _, rule = found
    if "else" in rule:
        block = rule["else"] if isinstance(rule["else"], Mapping) else {}
        then = block.get("then", block)
    else:
        then = rule.get("then")
    return dict(then) if isinstance(then, Mapping) else {}


def run_pipeline(
    tasks: Sequence[Mapping[str, Any]],
    context: Mapping[str, Any],
    *,
    step: str,
    step_input: Mapping[str, Any] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    events: EventSink | None = None,
    profile: EngineProfile = CANONICAL,
    before_call: Callable[[], None] | None = None,
) -> PipelineResult:
    """Run ``tasks`` in order with their policies; see the module docstring."""
    step_input = dict(step_input or {})
    labels = [task_label(task, i) for i, task in enumerate(tasks)]
    index_of = {label: i for i, label in enumerate(labels)}

    results: dict[str, Any] = {}
    ctx_writes: dict[str, Any] = {}
    iter_scope: dict[str, Any] = dict(context.get("iter") or {})
    trace: list[dict[str, Any]] = []
    prev: Any = None  # the last successful task's result
    status: Literal["ok", "break", "failed"] = "ok"
    error: dict[str, Any] | None = None  # noetlc's full error: events, logs
    record: dict[str, Any] = {}  # what NoETL adds to the result: failed_task/error, remaining
    task_vars: dict[str, Any] = {}  # NoETL 5 task `set` plain names, for the later tasks
    rule_writes: dict[str, Any] = {}  # policy rules' `set`, keyed as written (_context_updates)

    def failed(label: str, full: dict[str, Any], noetl: dict[str, Any] | None) -> None:
        nonlocal status, error, record
        status, error = "failed", full
        record = {"error": noetl, "failed_task": label}

    i = 0
    attempt = 1
    runs = 0
    while i < len(tasks):
        runs += 1
        if runs > MAX_TASK_RUNS:
            message = f"pipeline of step {step!r} ran {MAX_TASK_RUNS} tasks; jump cycle?"
            failed(
                labels[i],
                {"kind": "policy", "type": "PolicyError", "message": message},
                {"kind": "policy", "message": message},
            )
            break
        task, label = tasks[i], labels[i]
        task_context = apply_ctx_writes(context, ctx_writes)
        task_context = with_bindings(task_context, task_vars)
        visible = {name: wrap_result(reveal(value)) for name, value in results.items()}
        task_context.update(visible)
        task_context = with_values(
            task_context,
            _task=label,
            _prev=wrap_result(reveal(prev)),
            _attempt=attempt,
            results=visible,
            iter=dict(iter_scope),
        )
        if profile.task_input_as_names:
            task_context = _with_task_inputs(task, label, task_context)

        outcome = call_tool(
            step,
            label,
            task,
            task_context,
            step_input,
            events=events,
            attempt=attempt,
            profile=profile,
            before_call=before_call,
        )
        if outcome.ok:
            # NoETL records a task as soon as it succeeds, whatever its rule then decides.
            results[label] = outcome_result(outcome)
            prev = results[label]
            if profile.task_set_after_call and isinstance(task.get("set"), Mapping):
                # NoETL 5's task `set` (noetl/tools task_sequence.rs): rendered with `output` as
                # the task's result; a plain name is a variable of the later tasks of this step,
                # `ctx.`/`iter.` names write those scopes as a rule's `set` does.
                rendered = render_value(
                    task["set"],
                    with_values(task_context, output=wrap_result(reveal(prev))),
                    strict=False,
                    field=f"tool.{label}.set",
                )
                plain = {k: v for k, v in rendered.items() if not _scoped(k)}
                new_ctx, new_iter = split_set({k: v for k, v in rendered.items() if _scoped(k)})
                task_vars.update(plain)
                ctx_writes.update(new_ctx)
                iter_scope.update(new_iter)
        rule_context = with_values(task_context, output=outcome_envelope(outcome, attempt=attempt))
        if not outcome.ok:
            rule_context["error"] = outcome.error

        action = _select_action(_rules(task), rule_context, outcome.ok, label)
        do = action.get("do", "continue")
        trace.append(
            {"task": label, "attempt": attempt, "status": "ok" if outcome.ok else "error", "do": do}
        )

        if isinstance(action.get("set"), Mapping):
            rendered = render_value(
                action["set"], rule_context, strict=False, field=f"tool.{label}.policy.set"
            )
            rule_writes.update(rendered)
            new_ctx, new_iter = split_set(rendered)
            ctx_writes.update(new_ctx)
            iter_scope.update(new_iter)

        if do == "retry":
            max_attempts = _int(action.get("attempts"), DEFAULT_RETRY_ATTEMPTS)
            if attempt < max_attempts:
                # A rule without `backoff` waits as its engine defaults: "none" (0 s) in
                # 138c10ed and NoETL 5 (profile.pipeline_retry_backoff).
                backoff = action.get("backoff", profile.pipeline_retry_backoff)
                wait = backoff_delay(backoff, action.get("delay"), attempt)
                if wait > 0:
                    sleep(wait)
                attempt += 1
                continue
            full: dict[str, Any] = (
                dict(outcome.error)
                if outcome.error
                else {
                    "kind": "policy",
                    "type": "RetryExhausted",
                    "message": f"task {label!r} still matched a retry rule after {attempt} attempts",
                }
            )
            full["attempts"] = attempt
            failed(label, full, pipeline_error(outcome))
            break

        attempt = 1
        if do == "break":
            status = "break"
            record = {"remaining_actions": [dict(t) for t in tasks[i + 1 :]]}
            break
        if do == "fail":
            full = dict(outcome.error or {}) or {
                "kind": "policy",
                "type": "PolicyFail",
                "message": f"policy rule of task {label!r} failed the pipeline",
            }
            failed(label, full, pipeline_error(outcome))
            break
        if do == "jump":
            target = action.get("to")
            if target in ("previous", "prev"):
                i = max(i - 1, 0)
                continue
            if target not in index_of:
                message = (
                    f"jump target {target!r} is not a task of this pipeline ({', '.join(labels)})"
                )
                failed(
                    label,
                    {"kind": "policy", "type": "PolicyError", "message": message},
                    {"kind": "config", "message": f"Jump target '{target}' not found"},
                )
                break
            i = index_of[target]
            continue
        # "continue", and unknown verbs (the parser rejects them; the engine continues)
        i += 1

    if profile.pipeline_result_labelled:
        result = _labelled(results, rule_writes, status, record, labels)
    else:
        result = {
            "status": status,
            "_prev": prev,
            "results": results,
            "ctx": dict(ctx_writes),
            **record,
        }
    return PipelineResult(
        status=status,
        result=result,
        ctx_writes=ctx_writes,
        iter_scope=iter_scope,
        error=error,
        trace=trace,
    )


def _labelled(
    results: Mapping[str, Any],
    rule_writes: Mapping[str, Any],
    status: str,
    record: Mapping[str, Any],
    labels: Sequence[str],
) -> dict[str, Any]:
    """NoETL 5's pipeline result (noetl/tools ded94546 task_sequence.rs:838): the task results
    by label, flat, with ``_context_updates`` (the policy rules' ``set``, keyed as written) when
    one wrote; a failed pipeline's is ``{labeled_results, failed_task}``, the task's index."""
    if status == "failed":
        failed = record.get("failed_task")
        index = labels.index(failed) if failed in labels else None
        return {"labeled_results": dict(results), "failed_task": index}
    flat: dict[str, Any] = dict(results)
    if rule_writes:
        flat["_context_updates"] = dict(rule_writes)
    return flat


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default
