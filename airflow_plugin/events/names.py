"""The catalogue of event names: every event the plugin emits or reads is named here once
(docs/events.md describes each; ``tests/events`` hold that table and this catalogue equal).

Plain strings, not an enum: a name is stored, hashed into the event id and compared as text.
"""

from __future__ import annotations

__all__ = ["ALL"]

# A run and its playbook (listener; an inline child's run_child)
PLAYBOOK_EXECUTION_REQUESTED = "PlaybookExecutionRequested"
PLAYBOOK_REQUEST_EVALUATED = "PlaybookRequestEvaluated"
WORKFLOW_STARTED = "WorkflowStarted"
WORKFLOW_FINISHED = "WorkflowFinished"
PLAYBOOK_PROCESSED = "PlaybookProcessed"
# Task instances (listener)
TASK_STARTED = "TaskStarted"
TASK_FINISHED = "TaskFinished"
# A step run (runtime.step*)
STEP_STARTED = "StepStarted"
STEP_FINISHED = "StepFinished"
CASE_STARTED = "CaseStarted"
CASE_EVALUATED = "CaseEvaluated"
NEXT_EVALUATED = "NextEvaluated"
TEMPLATE_WARNING = "TemplateWarning"
# Tool calls and what repeats or writes them (runtime.pipeline, step_calls, operators)
TOOL_STARTED = "ToolStarted"
TOOL_COMPLETED = "ToolCompleted"
TOOL_ERRORED = "ToolErrored"
RETRY_STARTED = "RetryStarted"
RETRY_PROCESSED = "RetryProcessed"
SINK_STARTED = "SinkStarted"
SINK_PROCESSED = "SinkProcessed"
# Loops (runtime.loop, runtime.cursor, loop operators)
LOOP_STARTED = "LoopStarted"
LOOP_ITERATION_STARTED = "LoopIterationStarted"
LOOP_ITERATION_COMPLETED = "LoopIterationCompleted"
LOOP_FINISHED = "LoopFinished"
# A cursor slot's claim on an item was taken over (its lease expired): the item is stopped and
# its completion refused (runtime.cursor)
CURSOR_LEASE_LOST = "CursorLeaseLost"
# Gates (operators.gates)
PLAYBOOK_PAUSED = "PlaybookPaused"
SIGNAL_RECEIVED = "SignalReceived"

ALL: frozenset[str] = frozenset(
    value for key, value in dict(globals()).items() if key.isupper() and isinstance(value, str)
)
