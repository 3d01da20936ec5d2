"""Table (a)'s specs for NoETL 58c2a16b (v1) rows recorded after the first rounds.

The same shape as ``dsl_key_specs.CANONICAL`` (name, engine, key, default, file, playbook with
the key absent, playbook with it present); the builders come from ``dsl_key_specs`` and
``dsl_key_specs_older``. Kept apart so that those modules stay under the size the project keeps.
One small builder per key family here (broker, retry, iterator, workbook, http); the tools' keys
(duckdb, `save`, transfer) are ``dsl_key_specs_v1_tools.V1_TOOLS``, included at the end.
"""

from __future__ import annotations

import base64
from typing import Any

from tests.differential.dsl_key_specs_older import _V1_ARG, _V1_FAILS, _V1_OK, _v1, _v1_iter
from tests.differential.dsl_key_specs_v1_tools import V1_TOOLS, _v1_book

_SERVER = "noetl/server/api/event/service/"
_RETRY = "noetl/plugin/tool/retry.py"
_ITER = "noetl/plugin/iterator/"
# Adds what the step's inputs hold: `x` and `y` (1 and 0 when the engine hands none).
_V1_SUM = "def main(x=1, y=0):\n    return {'v': int(x) + int(y)}\n"


def _v1_flow(a: dict[str, Any], arc: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    """v1: start -> `a` (the step under test, `arc` the extra keys of start's arc) -> end; `a`
    keeps its own `next` when it names one (None: no `next` at all)."""
    step = {"step": "a", "next": [{"step": "end"}], **a}
    if step["next"] is None:
        del step["next"]
    return _v1_book(
        [
            {"step": "start", "next": [{"step": "a", **(arc or {})}]},
            step,
            {"step": "end"},
        ],
        **top,
    )


def _v1_named(name_key: str) -> dict[str, Any]:
    """v1: step `a` named by `step:` or by `name:` (58c2a16b reads `step`, else `name`)."""
    return _v1_book(
        [
            {"step": "start", "next": [{"step": "a"}]},
            {name_key: "a", "type": "python", "code": _V1_OK, "next": [{"step": "end"}]},
            {"step": "end"},
        ]
    )


def _v1_retry(**retry: Any) -> dict[str, Any]:
    return _v1({"type": "python", "code": _V1_FAILS, "retry": {"max_attempts": 2, **retry}})


def _v1_arc_key(key: str | None) -> dict[str, Any]:
    """v1: `a` (x = 4) with an arc to `b` guarded by `x > 5` under `key` (none: unguarded)."""
    arc: dict[str, Any] = {"step": "b"}
    if key:
        arc[key] = "{{ a.x > 5 }}"
    return _v1_book(
        [
            {"step": "start", "next": [{"step": "a"}]},
            {"step": "a", "type": "python", "code": _V1_OK, "next": [arc, {"step": "end"}]},
            {
                "step": "b",
                "type": "python",
                "code": "def main():\n    return {'b': 1}\n",
                "next": [{"step": "end"}],
            },
            {"step": "end"},
        ]
    )


def _v1_workbook(action: dict[str, Any] | None) -> dict[str, Any]:
    """v1: step `a` calls workbook task `calc` (`action`: its entry; None: no `workbook`)."""
    # Named by `name:` (a `task: calc` workbook step right after `start` never finishes on
    # 58c2a16b: recorded once, left out of the table as no key's doing).
    step = {"type": "workbook", "name": "calc"}
    if action is None:
        return _v1_flow(step)
    return _v1_flow(step, workbook=[{"name": "calc", "type": "python", "code": _V1_ARG, **action}])


def _v1_iter_task(**task: Any) -> dict[str, Any]:
    """v1: the iterator of ``_v1_iter`` with its nested task's keys replaced by ``task``."""
    book = _v1_iter()
    loop = book["workflow"][1]
    loop["task"] = {"type": "python", "code": _V1_ARG, **task}
    return book


def _v1_iter_without(*keys: str) -> dict[str, Any]:
    book = _v1_iter()
    for key in keys:
        del book["workflow"][1][key]
    return book


def _v1_loop_form(**loop: Any) -> dict[str, Any]:
    """v1: the legacy `loop:` block (58c2a16b's normalize_step turns it into an iterator)."""
    return _v1_book(
        [
            {"step": "start", "next": [{"step": "loop"}]},
            {
                "step": "loop",
                "loop": loop,
                "task": {
                    "type": "python",
                    "code": "def main(x):\n    return {'v': int(x)}\n",
                    "with": {"x": "{{ item }}"},
                },
                "next": [{"step": "end"}],
            },
            {"step": "end"},
        ],
        workload={"items": [3, 1, 5, 2, 4]},
    )


_STEPS_ALIAS = _v1_book(
    [
        {"step": "start", "next": [{"step": "a"}]},
        {"step": "a", "type": "python", "code": _V1_OK, "next": [{"step": "end"}]},
        {"step": "end"},
    ],
    key="steps",
)
_WORKFLOW = _v1({"type": "python", "code": _V1_OK})

V1_MORE: tuple[tuple[str, str, str, str, str, dict, dict], ...] = (
    # The broker: playbook, step and arc keys.
    (
        "v1_workload",
        "v1",
        "workload",
        "{}",
        _SERVER + "context.py",
        _v1_flow({"type": "python", "code": _V1_ARG}),
        _v1_flow(
            {"type": "python", "code": _V1_ARG, "with": {"x": "{{ workload.n }}"}},
            workload={"n": 3},
        ),
    ),
    ("v1_workflow_none", "v1", "workflow", "None", _SERVER + "initial.py", _STEPS_ALIAS, _WORKFLOW),
    ("v1_workflow_list", "v1", "workflow", "[]", _SERVER + "workflow.py", _STEPS_ALIAS, _WORKFLOW),
    ("v1_steps_none", "v1", "steps", "None", _SERVER + "initial.py", _WORKFLOW, _STEPS_ALIAS),
    ("v1_steps_list", "v1", "steps", "[]", _SERVER + "workflow.py", _WORKFLOW, _STEPS_ALIAS),
    (
        "v1_step_key",
        "v1",
        "step",
        "None",
        _SERVER + "workflow.py",
        _v1_named("name"),
        _v1_named("step"),
    ),
    (
        "v1_step_key_broker",
        "v1",
        "step",
        "f'step_{i}'",
        "noetl/server/api/broker/execute.py",
        _v1_named("name"),
        _v1_named("step"),
    ),
    (
        "v1_step_name",
        "v1",
        "name",
        "f'step_{i}'",
        "noetl/server/api/broker/broker.py",
        _v1_named("step"),
        _v1_named("name"),
    ),
    (
        "v1_step_type",
        "v1",
        "type",
        "'unknown'",
        _SERVER + "workflow.py",
        _v1_flow({"code": _V1_OK}),
        _v1_flow({"type": "python", "code": _V1_OK}),
    ),
    (
        "v1_control_next",
        "v1",
        "next",
        "None",
        _SERVER + "finalize.py",
        _v1_flow({"next": None}),
        _v1_flow({}),
    ),
    (
        "v1_step_next",
        "v1",
        "next",
        "[]",
        "noetl/server/api/broker/execute.py",
        _v1_flow({"type": "python", "code": _V1_OK, "next": None}),
        _v1_flow({"type": "python", "code": _V1_OK}),
    ),
    (
        "v1_next_condition",
        "v1",
        "condition",
        "None",
        _SERVER + "workflow.py",
        _v1_arc_key(None),
        _v1_arc_key("condition"),
    ),
    (
        "v1_next_pass",
        "v1",
        "pass",
        "None",
        _SERVER + "workflow.py",
        _v1_arc_key(None),
        _v1_arc_key("pass"),
    ),
    (
        "v1_end_result",
        "v1",
        "result",
        "None",
        _SERVER + "finalize.py",
        _v1({"type": "python", "code": _V1_OK}),
        _v1_book(
            [
                {"step": "start", "next": [{"step": "a"}]},
                {"step": "a", "type": "python", "code": _V1_OK, "next": [{"step": "end"}]},
                {"step": "end", "result": {"total": "{{ a.x }}"}},
            ]
        ),
    ),
    (
        "v1_task_args",
        "v1",
        "args",
        "{}",
        _SERVER + "initial.py",
        _v1_flow({"type": "python", "code": _V1_SUM}, {"input": {"x": 3}}),
        _v1_flow({"type": "python", "code": _V1_SUM, "args": {"y": 10}}, {"input": {"x": 3}}),
    ),
    (
        "v1_code_base64",
        "v1",
        "code_base64",
        "None",
        _SERVER + "initial.py",
        _v1({"type": "python", "code": _V1_OK}),
        _v1({"type": "python", "code_base64": base64.b64encode(_V1_OK.encode()).decode()}),
    ),
    # retry_config: the waits between attempts (the attempts are what a case compares).
    *(
        (
            f"v1_retry_{key}",
            "v1",
            key,
            default,
            _RETRY,
            _v1_retry(**({} if key == "initial_delay" else {"initial_delay": 0.1})),
            _v1_retry(**{"initial_delay": 0.1, key: value}),
        )
        for key, default, value in (
            ("initial_delay", "1.0", 0.2),
            ("max_delay", "60.0", 0.1),
            ("backoff_multiplier", "2.0", 1.0),
            ("jitter", "True", False),
        )
    ),
    # The iterator plugin and its nested task.
    (
        "v1_iterator_collection",
        "v1",
        "collection",
        "None",
        _ITER + "config.py",
        _v1_iter_without("collection"),
        _v1_iter(),
    ),
    (
        "v1_iterator_element",
        "v1",
        "element",
        "None",
        _ITER + "config.py",
        _v1_iter_without("element"),
        _v1_iter(),
    ),
    (
        "v1_iterator_task",
        "v1",
        "task",
        "None",
        "noetl/core/dsl/normalize.py",
        _v1_iter_without("task"),
        _v1_iter(),
    ),
    (
        "v1_iterator_task_with",
        "v1",
        "with",
        "None",
        _ITER + "execution.py",
        _v1_iter_task(),
        _v1_iter_task(**{"with": {"x": "{{ item }}"}}),
    ),
    (
        "v1_loop_in",
        "v1",
        "in",
        "None",
        "noetl/core/dsl/normalize.py",
        _v1_loop_form(iterator="item"),
        _v1_loop_form(**{"in": "{{ workload.items }}", "iterator": "item"}),
    ),
    (
        "v1_loop_iterator",
        "v1",
        "iterator",
        "None",
        "noetl/core/dsl/normalize.py",
        _v1_loop_form(**{"in": "{{ workload.items }}"}),
        _v1_loop_form(**{"in": "{{ workload.items }}", "iterator": "item"}),
    ),
    # Workbook tasks and the http tool's legacy body.
    (
        "v1_workbook",
        "v1",
        "workbook",
        "[]",
        "noetl/plugin/workbook/catalog.py",
        _v1_workbook(None),
        _v1_workbook({}),
    ),
    (
        "v1_workbook_with",
        "v1",
        "with",
        "{}",
        "noetl/plugin/workbook/executor.py",
        _v1_workbook({}),
        _v1_workbook({"with": {"x": 3}}),
    ),
    (
        "v1_http_payload",
        "v1",
        "payload",
        "{}",
        "noetl/plugin/http/executor.py",
        _v1({"type": "http", "endpoint": "@HTTP@/respond"}),
        _v1(
            {"type": "http", "endpoint": "@HTTP@/respond", "payload": {"body": "p", "status": 203}}
        ),
    ),
    # Step keys the broker reads besides `step`/`type`.
    (
        "v1_step_id",
        "v1",
        "id",
        "None",
        _SERVER + "workflow.py",
        _v1({"type": "python", "code": _V1_OK}),
        _v1({"type": "python", "code": _V1_OK, "id": "a_id"}),
    ),
    (
        "v1_step_name_none",
        "v1",
        "name",
        "None",
        _SERVER + "workflow.py",
        _v1_named("step"),
        _v1_named("name"),
    ),
    (
        "v1_step_type_none",
        "v1",
        "type",
        "None",
        "noetl/worker/worker.py",
        _v1_flow({"code": _V1_OK}),
        _v1_flow({"type": "python", "code": _V1_OK}),
    ),
    (
        "v1_step_action",
        "v1",
        "action",
        "'unknown'",
        "noetl/plugin/tool/execution.py",
        _v1({"type": "python", "code": _V1_OK}),
        _v1({"type": "python", "code": _V1_OK, "action": "http"}),
    ),
    (
        "v1_step_type_or_action",
        "v1",
        "type",
        "task_config.get('action', 'unknown')",
        "noetl/plugin/tool/execution.py",
        _v1_flow({"action": "python", "code": _V1_OK}),
        _v1_flow({"type": "python", "code": _V1_OK}),
    ),
    *V1_TOOLS,
)
