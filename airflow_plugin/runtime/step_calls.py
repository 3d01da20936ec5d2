"""A step's call loop: the tool (or pipeline) runs, the call event's case rules or the first
step-level policy that applies decide whether to call again (error retry, pagination with
``next_call``), and per-call ``collect``/``sink`` apply (module ``repeat`` has the policies).

``CallLoop`` is one object of a step run (``step._StepRun`` builds it from the typed step),
given what it calls and the run state it advances (``step_state``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from noetl_compile.engine_behaviours import EngineProfile

from ..events import names
from ..templating.context import issuing_context, with_values
from ..templating.proxy import response_view, wrap_result
from ..templating.render import evaluate_condition, render_value, to_jsonable
from ..tools import ToolOutcome
from .pipeline import (
    call_tool,
    outcome_envelope,
    outcome_result,
    run_pipeline,
    single_tool_pipeline,
)
from .policy import first_match
from .repeat import (
    Policy,
    apply_next_call,
    case_policy,
    collect_value,
    merge_collected,
    step_policies,
)
from .step_case import CaseRules
from .step_state import RunState, SinkRunner, StepEvents, failure_error

# The result keys 138c10ed's output view lays over its envelope (engine.py:416).
_RESULT_OWN_KEYS = ("http", "pg", "py", "meta", "context")

__all__ = ["CallLoop", "failure_error", "has_rules", "retry_policies"]

log = logging.getLogger(__name__)


def has_rules(tool: Mapping[str, Any]) -> bool:
    spec = tool.get("spec")
    policy = spec.get("policy") if isinstance(spec, Mapping) else None
    return isinstance(policy, Mapping) and bool(policy.get("rules"))


def retry_policies(payload: Mapping[str, Any]) -> list[Policy]:
    """Step-level ``retry`` (v1, case-v2), then a ``retry`` inside the tool (the formal spec's
    list form); NoETL ignores ``retry`` on a ``playbook`` call."""
    policies = step_policies(payload.get("retry"))
    tool = payload.get("tool")
    if isinstance(tool, Mapping) and tool.get("kind") not in ("playbook", "playbooks"):
        policies += step_policies(tool.get("retry"))
    return policies


class CallLoop:
    """The call loop of one step run. Given what it calls (the step's tool or pipeline, with
    defaults filled in), its retry policies and engine profile, the run's phase and ``sleep``,
    what it changes (:class:`RunState`), how it reports (:class:`StepEvents`), writes sinks
    (:class:`SinkRunner`) and applies the call event's case rules (:class:`CaseRules`), and
    ``before_call``: called once a tool's config is rendered, before the tool runs (strict mode
    fails there on a template kept as text)."""

    def __init__(
        self,
        *,
        tool: Mapping[str, Any] | None,
        pipeline: list[Any] | None,
        policies: list[Policy],
        profile: EngineProfile,
        phase: str,
        sleep: Callable[[float], None],
        state: RunState,
        events: StepEvents,
        sinks: SinkRunner,
        case: CaseRules,
        before_call: Callable[[], None],
    ) -> None:
        self.tool = tool
        self.pipeline = pipeline
        self.policies = policies
        self.profile = profile
        self.phase = phase
        self.sleep = sleep
        self.state = state
        self.events = events
        self.sinks = sinks
        self.case = case
        self.before_call = before_call

    def call(
        self, step_input: dict[str, Any], overrides: Mapping[str, Any], attempt: int
    ) -> tuple[ToolOutcome, Any, str]:
        """Run tool / pipeline once -> (outcome envelope source, step result, status)."""
        tool, pipeline = self.tool, self.pipeline
        if tool and overrides:
            tool = apply_next_call(tool, overrides)
        if tool and has_rules(tool):
            pipeline = single_tool_pipeline(self.events.step, tool)
        if pipeline:
            ran = run_pipeline(
                pipeline,
                self.state.context,
                step=self.events.step,
                step_input=step_input,
                sleep=self.sleep,
                events=self.events,
                profile=self.profile,
                before_call=self.before_call,
            )
            self.state.write(ran.ctx_writes)
            if ran.status == "failed":
                outcome = ToolOutcome.failure(ran.error or {}, data=ran.result)
                return outcome, ran.result, "error"
            return ToolOutcome.success(ran.result), ran.result, ran.status
        if tool:
            outcome = call_tool(
                self.events.step,
                self.events.step,
                tool,
                issuing_context(self.state.context, self.events.step, self.profile),
                step_input,
                events=self.events,
                attempt=attempt,
                profile=self.profile,
                before_call=self.before_call,
            )
            return outcome, outcome_result(outcome), "ok" if outcome.ok else "error"
        # No tool: a pure router (v1 steps without type, v1 ``end``) produces no result.
        return ToolOutcome.success(None), None, "ok"

    def after_call_context(
        self, outcome: ToolOutcome, result: Any, failed: bool, attempt: int
    ) -> None:
        after = dict(self.state.context)
        promote = self.profile.pipeline_last_task_promoted
        own = wrap_result(result, promote=promote, envelope=self.profile.result_envelope_fields)
        after[self.events.step] = own
        output = outcome_envelope(outcome, attempt=attempt)
        data = output["data"]
        if self.profile.output_data_own_data and isinstance(data, Mapping) and "data" in data:
            # The engine's arc/set `output.data` is the result's own `data` when it has one
            # (138c10ed engine.py:414, `step_result.get("data", step_result)`).
            output["data"] = data["data"]
        if self.profile.output_result_own_keys and not failed and isinstance(result, Mapping):
            # 138c10ed's view lays the result's own http/pg/py/meta/context over its envelope
            # (engine.py:416), so `output.meta` reads a result's `meta` key.
            output.update({k: result[k] for k in _RESULT_OWN_KEYS if k in result})
        if self.profile.output_fields_flat and isinstance(data, Mapping):
            # NoETL 5's `output` is the step's data itself, its fields at the top
            # (orchestrator.rs output_namespace): `output.rows` beside `output.data.rows`.
            output = {**output, **{k: v for k, v in data.items() if k != "data"}}
        after = with_values(
            after,
            output=output,
            result=wrap_result(result, promote=promote),
            response=response_view(result),
            # The full envelope (formal spec 3.3), read body first: v1 sinks write
            # `{{ this.profile_score }}` for the result's own field.
            this=response_view(
                {
                    "status": "ok" if not failed else "error",
                    "data": result,
                    "error": outcome.error,
                    "meta": outcome.meta,
                }
            ),
        )
        if failed:
            after["error"] = outcome.error
        else:
            after.pop("error", None)
        # Formal spec 6.3: ``_retry.index`` (1-based try) and ``_retry.count`` (tries so far).
        after["_retry"] = {"index": attempt, "count": attempt}
        self.state.context = after

    def call_loop(self, step_input: dict[str, Any]) -> tuple[ToolOutcome, Any, str, int]:
        """Call, then decide whether to call again (retry / next call), collecting as it goes."""
        overrides: dict[str, Any] = {}
        collected: dict[str, tuple[Mapping[str, Any], Any]] = {}  # into -> (collect spec, value)
        attempt = 1
        while True:
            outcome, result, status = self.call(step_input, overrides, attempt)
            failed = status == "error"
            self.after_call_context(outcome, result, failed, attempt)
            policy, collect, sink, where = self.choose_repetition(failed, outcome, result, attempt)
            if collect:
                self.collect(collect, collected, where)
            if sink:
                self.sinks.run(sink, self.state.context, f"{where}.sink")
            if policy is None:
                break
            if attempt >= policy.max_attempts:
                if not failed:
                    log.warning(
                        "NoETL step %s: %s still asks for another call after %d calls; "
                        "stopping at max_attempts",
                        self.events.step,
                        where,
                        attempt,
                    )
                break
            next_call = render_value(
                policy.next_call, self.state.context, strict=False, field=f"{where}.next_call"
            )
            overrides = (
                apply_next_call(overrides, next_call)
                if isinstance(next_call, Mapping)
                else overrides
            )
            wait = policy.delay(attempt)
            self.events.emit(
                names.RETRY_STARTED,
                "retry",
                "in_progress",
                attempt=attempt + 1,
                entity_id=f"{self.events.step_run_id}:retry",
                data={
                    "after": "error" if failed else "success",
                    "policy": where,
                    "delay": wait,
                    "error": outcome.error if failed else None,
                },
            )
            if wait > 0:
                self.sleep(wait)
            attempt += 1
            self.state.fired.clear()  # each call gets its own first match
        if attempt > 1:
            self.events.emit(
                names.RETRY_PROCESSED,
                "retry",
                "error" if failed else "success",
                attempt=attempt,
                entity_id=f"{self.events.step_run_id}:retry",
                data={"calls": attempt},
            )
        if collected:
            result = self.merge_collection(result, collected)
        return outcome, result, status, attempt

    def choose_repetition(
        self, failed: bool, outcome: ToolOutcome, result: Any, attempt: int
    ) -> tuple[Policy | None, Mapping[str, Any] | None, Any, str]:
        """The case rule of this call's event, else the first step-level policy that applies."""
        if self.case.rules:
            event = "call.error" if failed else "call.done"
            matched = self.case.match_case(event, self.state.context, failed=failed)
            if matched is None:
                return None, None, None, ""
            index, actions, event_context = matched
            where = f"case[{index}].then"
            repeat = None
            for kind in ("retry", "call"):
                action = actions.get(kind)
                if isinstance(action, Mapping) and not (kind == "call" and "step" in action):
                    repeat = case_policy(action, kind=kind, failed=failed)
            # A rule that decides where to go handles the failure; one that only retries does not
            # handle the failure it finally gives up on.
            if failed and repeat is None:
                self.state.handled = True
            sink = actions.pop("sink", None)
            collect = actions.get("collect")
            self.case.apply_case(index, actions, event_context, routing=self.phase == "step")
            return repeat, collect if isinstance(collect, Mapping) else None, sink, where
        context = self.retry_context(failed, outcome, result, attempt)
        stopped: list[bool] = []

        def holds(number: int, policy: Policy) -> bool:
            if policy.on == ("success" if failed else "error"):
                return False
            where = f"retry[{number}]"
            if policy.stop_when is not None and evaluate_condition(
                policy.stop_when, context, flavor="arc", field=f"{where}.stop_when"
            ):
                stopped.append(True)  # the first applicable policy says: no more calls
                return True
            return policy.when is None or evaluate_condition(
                policy.when, context, flavor="arc", field=f"{where}.when"
            )

        found = first_match(self.policies, holds)
        if found is None:
            return None, None, None, ""
        number, policy = found
        if stopped:
            return None, None, None, f"retry[{number}]"
        return policy, policy.collect, policy.sink, f"retry[{number}]"

    def retry_context(
        self, failed: bool, outcome: ToolOutcome, result: Any, attempt: int
    ) -> dict[str, Any]:
        """What a step-level retry condition sees (spec 3.3: the retry evaluator exposes raw
        fields): ``status_code``, ``error`` (None after a success), ``success``, ``data``,
        ``attempt``, ``result``, on top of the step context."""
        http = outcome.meta.get("http") if isinstance(outcome.meta, Mapping) else None
        status_code = None
        if isinstance(result, Mapping) and "status_code" in result:
            status_code = result["status_code"]
        elif isinstance(http, Mapping):
            status_code = http.get("status")
        elif isinstance(outcome.error, Mapping):
            status_code = outcome.error.get("status_code")
        data = result.get("data", result) if isinstance(result, Mapping) else result
        return with_values(
            self.state.context,
            status_code=status_code,
            error=outcome.error if failed else None,
            success=not failed,
            data=wrap_result(data),
            attempt=attempt,
            result=wrap_result(result),
        )

    def collect(
        self,
        spec: Mapping[str, Any],
        collected: dict[str, tuple[Mapping[str, Any], Any]],
        where: str,
    ) -> None:
        into = spec.get("into") or "collected"
        rendered_from = (
            render_value(
                spec["from"], self.state.context, strict=False, field=f"{where}.collect.from"
            )
            if "from" in spec
            else None
        )
        value = collect_value(spec, self.state.context.get("response"), rendered_from)
        previous = collected.get(into, (spec, None))[1]
        merged = merge_collected(
            spec.get("strategy", spec.get("mode")), previous, to_jsonable(value)
        )
        collected[into] = (spec, merged)
        if self.profile.collect_into_vars or "vars" in self.state.context:
            self.state.write({}, {into: merged})
        else:
            self.state.write({into: merged})

    @staticmethod
    def merge_collection(
        result: Any, collected: Mapping[str, tuple[Mapping[str, Any], Any]]
    ) -> Any:
        """The step result after a collecting repetition: the collected value replaces the
        collected path (``data`` of the last response holds every page), as NoETL merges pages."""
        merged = dict(result) if isinstance(result, Mapping) else {"data": result}
        for into, (spec, value) in collected.items():
            merged[into] = value  # formal spec 6.2: "aggregate results into then.collect.into"
            path = spec.get("path") if "from" not in spec else None
            key = path.split(".")[0] if isinstance(path, str) and path else "data"
            if (
                isinstance(merged.get("data"), Mapping)
                and isinstance(path, str)
                and path in merged["data"]
            ):
                key = "data"  # the path was read in the body of an HTTP-shaped result
            merged[key] = value
        return merged
