"""Table (a)'s specs for the two older engines: case-v2 (dc55c492) and v1 (58c2a16b).

The same shape as ``dsl_key_specs.CANONICAL``; the builders are those engines' playbook forms.
"""

from __future__ import annotations

import base64
from typing import Any

from tests.differential.dsl_key_specs import (
    _LIBS_CODE,
    _OK,
    _POST_ONLY,
    _SLOW,
    CANONICAL,
    _http,
    _playbook,
    _py,
)


def _c2(first_tool: dict, **first_extra: Any) -> dict[str, Any]:
    """case-v2: `start` (marked by its step `args`, a case-v2 key, so noetlc reads the
    playbook in that generation) with the tool under test, then `after`."""
    return _playbook(
        {
            "step": "start",
            "args": {"m": 1},
            "tool": first_tool,
            "next": [{"step": "after"}],
            **first_extra,
        },
        {"step": "after", "tool": _py("result = {'after': True}")},
    )


def _c2_marked(playbook: dict[str, Any]) -> dict[str, Any]:
    """A canonical-shaped playbook with the case-v2 mark `_c2` uses (step `args` on `start`):
    without it noetlc reads the playbook as canonical (docs/semantics.md section 1,
    `unmarked-case-v2`) and the case would record that reading, not the key."""
    first, *rest = playbook["workflow"]
    marked = {"step": first["step"], "args": {"m": 1}, **first}
    return {**playbook, "workflow": [marked, *rest]}


def _c2_case(case: list[dict[str, Any]]) -> dict[str, Any]:
    """case-v2: `start` routed by its `case` alone (no `next` beside it: dc55c492 would issue
    `after` once per route)."""
    return _playbook(
        {"step": "start", "tool": _py(_OK), "case": case},
        {"step": "after", "tool": _py("result = {'after': True}")},
    )


def _v1(step: dict[str, Any]) -> dict[str, Any]:
    """v1: start -> `a` (the step under test) -> end."""
    return {
        "apiVersion": "noetl.io/v1",
        "kind": "Playbook",
        "metadata": {"name": "keys", "path": "v1/keys"},
        "workflow": [
            {"step": "start", "next": [{"step": "a"}]},
            {"step": "a", **step, "next": [{"step": "end"}]},
            {"step": "end"},
        ],
    }


def _v1_arc(arc: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "noetl.io/v1",
        "kind": "Playbook",
        "metadata": {"name": "keys", "path": "v1/keys"},
        "workflow": [
            {"step": "start", "next": [{"step": "a"}]},
            {
                "step": "a",
                "type": "python",
                "code": "def main():\n    return {'x': 4}\n",
                "next": [arc, {"step": "end"}],
            },
            {
                "step": "b",
                "type": "python",
                "code": "def main():\n    return {'b': 1}\n",
                "next": [{"step": "end"}],
            },
            {"step": "end"},
        ],
    }


def _v1_iter(**extra: Any) -> dict[str, Any]:
    """v1: start -> an iterator over five numbers (the keys under test beside `collection`)."""
    return {
        "apiVersion": "noetl.io/v1",
        "kind": "Playbook",
        "metadata": {"name": "keys", "path": "v1/keys"},
        "workload": {"items": [3, 1, 5, 2, 4]},
        "workflow": [
            {"step": "start", "next": [{"step": "loop"}]},
            {
                "step": "loop",
                "type": "iterator",
                "collection": "{{ workload.items }}",
                "element": "item",
                **extra,
                "task": {
                    "type": "python",
                    "code": "def main(x):\n    return {'v': int(x)}\n",
                    "with": {"x": "{{ item }}"},
                },
                "next": [{"step": "end"}],
            },
            {"step": "end"},
        ],
    }


_V1_FAILS = "def main():\n    raise RuntimeError('boom')\n"
_V1_OK = "def main():\n    return {'x': 4}\n"
# Reads `x` from the step's inputs, 1 when the engine hands it none.
_V1_ARG = "def main(x=1):\n    return {'v': int(x)}\n"

CASE_V2: tuple[tuple[str, str, str, str, str, dict, dict], ...] = (
    # case-v2 (dc55c492)
    (
        "c2_python_code",
        "case-v2",
        "code",
        "''",
        "noetl/worker/v2_worker_nats.py",
        _c2({"kind": "python"}),
        _c2(_py(_OK)),
    ),
    (
        "c2_http_method",
        "case-v2",
        "method",
        "'GET'",
        "noetl/worker/v2_worker_nats.py",
        _c2(_http(url=_POST_ONLY)),
        _c2(_http(url=_POST_ONLY, method="POST")),
    ),
    (
        "c2_http_params",
        "case-v2",
        "params",
        "{}",
        "noetl/worker/v2_worker_nats.py",
        _c2(_http(url="@HTTP@/respond")),
        _c2(_http(url="@HTTP@/respond", params={"body": "made", "status": 201})),
    ),
    (
        "c2_duckdb_database",
        "case-v2",
        "database",
        "':memory:'",
        "noetl/worker/v2_worker_nats.py",
        _c2({"kind": "duckdb", "query": "SELECT 41 + 1 AS n"}),
        _c2({"kind": "duckdb", "query": "SELECT 41 + 1 AS n", "database": "@WORK@/k33c2.duckdb"}),
    ),
    (
        "c2_case_when",
        "case-v2",
        "when",
        "None",
        "noetl/worker/v2_worker_nats.py",
        _c2_case([{"then": {"next": [{"step": "after"}]}}]),
        _c2_case(
            [{"when": "{{ event.name == 'call.done' }}", "then": {"next": [{"step": "after"}]}}]
        ),
    ),
    (
        "c2_next_args",
        "case-v2",
        "args",
        "{}",
        "noetl/core/dsl/v2/engine.py",
        _playbook(
            {
                "step": "start",
                "args": {"m": 1},
                "tool": _py("result = {'a': 2}"),
                "next": [{"step": "after"}],
            },
            {
                "step": "after",
                "tool": _py("result = {'v': v}", args={"v": "{{ v | default('none') }}"}),
            },
        ),
        _playbook(
            {
                "step": "start",
                "args": {"m": 1},
                "tool": _py("result = {'a': 2}"),
                "next": [{"step": "after", "args": {"v": "{{ start.a }}"}}],
            },
            {
                "step": "after",
                "tool": _py("result = {'v': v}", args={"v": "{{ v | default('none') }}"}),
            },
        ),
    ),
    (
        "c2_http_timeout",
        "case-v2",
        "timeout",
        "30",
        "noetl/tools/http/executor.py",
        _c2(_http(url=_SLOW)),
        _c2(_http(url=_SLOW, timeout=0.5)),
    ),
    (
        "c2_http_follow_redirects",
        "case-v2",
        "follow_redirects",
        "False",
        "noetl/tools/http/executor.py",
        _c2(_http(url="@HTTP@/redirect-to", params={"url": "/respond", "status_code": 302})),
        _c2(
            _http(
                url="@HTTP@/redirect-to",
                params={"url": "/respond", "status_code": 302},
                follow_redirects=True,
            )
        ),
    ),
    (
        "c2_http_url",
        "case-v2",
        "url",
        "None",
        "noetl/worker/v2_worker_nats.py",
        _c2(_http(method="GET")),
        _c2(_http(url="@HTTP@/respond", params={"body": "u"})),
    ),
    (
        "c2_duckdb_query",
        "case-v2",
        "query",
        "None",
        "noetl/worker/v2_worker_nats.py",
        _c2({"kind": "duckdb"}),
        _c2({"kind": "duckdb", "query": "SELECT 41 + 1 AS n"}),
    ),
    (
        "c2_http_verify",
        "case-v2",
        "verify",
        "True",
        "noetl/tools/http/executor.py",
        _c2(_http(url="@HTTP@/respond", params={"body": "v"})),
        _c2(_http(url="@HTTP@/respond", params={"body": "v"}, verify=False)),
    ),
    (
        "c2_http_verify_ssl",
        "case-v2",
        "verify_ssl",
        "None",
        "noetl/tools/http/executor.py",
        _c2(_http(url="@HTTP@/respond", params={"body": "v"})),
        _c2(_http(url="@HTTP@/respond", params={"body": "v"}, verify_ssl=False)),
    ),
    (
        "c2_next_step",
        "case-v2",
        "step",
        "None",
        "noetl/core/dsl/v2/engine.py",
        _playbook(
            {"step": "start", "args": {"m": 1}, "tool": _py(_OK), "next": [{"args": {"v": 1}}]},
            {"step": "after", "tool": _py(_OK)},
        ),
        _playbook(
            {
                "step": "start",
                "args": {"m": 1},
                "tool": _py(_OK),
                "next": [{"step": "after", "args": {"v": 1}}],
            },
            {"step": "after", "tool": _py(_OK)},
        ),
    ),
    (
        "c2_python_libs",
        "case-v2",
        "libs",
        "None",
        "noetl/tools/python/executor.py",
        _c2(_py(_LIBS_CODE)),
        _c2(_py(_LIBS_CODE, libs={"j": "json"})),
    ),
    (
        "c2_http_data",
        "case-v2",
        "data",
        "None",
        "noetl/tools/http/executor.py",
        _c2(_http(url="@HTTP@/respond")),
        _c2(_http(url="@HTTP@/respond", data={"query": {"body": "d", "status": 202}})),
    ),
    (
        "c2_http_headers_map",
        "case-v2",
        "headers",
        "{}",
        "noetl/tools/http/executor.py",
        _c2(_http(url="@HTTP@/bearer")),
        _c2(_http(url="@HTTP@/bearer", headers={"Authorization": "Bearer k33b"})),
    ),
    (
        "c2_http_tool_url",
        "case-v2",
        "url",
        "''",
        "noetl/tools/http/executor.py",
        _c2(_http(method="GET")),
        _c2(_http(url="@HTTP@/respond", params={"body": "t"})),
    ),
    # The transfer tool of dc55c492 reads its source and target as 138c10ed's does (the same
    # executor lines): the canonical transfer cases, recorded again on this engine, with the
    # case-v2 mark on `start` so that noetlc reads them in that generation.
    *(
        (f"c2_{name}", "case-v2", key, default, file, _c2_marked(absent), _c2_marked(present))
        for name, _, key, default, file, absent, present in CANONICAL
        if name.startswith("transfer_")
    ),
)

V1: tuple[tuple[str, str, str, str, str, dict, dict], ...] = (
    (
        "v1_retry",
        "v1",
        "retry",
        "None",
        "noetl/plugin/tool/retry.py",
        _v1({"type": "python", "code": _V1_FAILS}),
        _v1(
            {
                "type": "python",
                "code": _V1_FAILS,
                "retry": {"max_attempts": 2, "initial_delay": 0.1},
            }
        ),
    ),
    (
        "v1_retry_max_attempts",
        "v1",
        "max_attempts",
        "3",
        "noetl/plugin/tool/retry.py",
        _v1({"type": "python", "code": _V1_FAILS, "retry": {"initial_delay": 0.1}}),
        _v1(
            {
                "type": "python",
                "code": _V1_FAILS,
                "retry": {"max_attempts": 4, "initial_delay": 0.1},
            }
        ),
    ),
    (
        "v1_next_when",
        "v1",
        "when",
        "None",
        "noetl/server/api/broker/execute.py",
        _v1_arc({"step": "b"}),
        _v1_arc({"when": "{{ a.x > 5 }}", "then": [{"step": "b"}]}),
    ),
    (
        "v1_http_method",
        "v1",
        "method",
        "'GET'",
        "noetl/plugin/http/executor.py",
        _v1({"type": "http", "endpoint": _POST_ONLY}),
        _v1({"type": "http", "endpoint": _POST_ONLY, "method": "POST"}),
    ),
    (
        "v1_http_params",
        "v1",
        "params",
        "{}",
        "noetl/plugin/http/executor.py",
        _v1({"type": "http", "endpoint": "@HTTP@/respond"}),
        _v1(
            {
                "type": "http",
                "endpoint": "@HTTP@/respond",
                "params": {"body": "made", "status": 201},
            }
        ),
    ),
    (
        "v1_http_timeout",
        "v1",
        "timeout",
        "30",
        "noetl/plugin/http/executor.py",
        _v1({"type": "http", "endpoint": _SLOW}),
        _v1({"type": "http", "endpoint": _SLOW, "timeout": 0.5}),
    ),
    (
        "v1_retry_when",
        "v1",
        "retry_when",
        "None",
        "noetl/plugin/tool/retry.py",
        _v1(
            {
                "type": "python",
                "code": _V1_FAILS,
                "retry": {"max_attempts": 3, "initial_delay": 0.1},
            }
        ),
        _v1(
            {
                "type": "python",
                "code": _V1_FAILS,
                "retry": {"max_attempts": 3, "initial_delay": 0.1, "retry_when": "{{ false }}"},
            }
        ),
    ),
    (
        "v1_retry_stop_when",
        "v1",
        "stop_when",
        "None",
        "noetl/plugin/tool/retry.py",
        _v1(
            {
                "type": "python",
                "code": _V1_FAILS,
                "retry": {"max_attempts": 3, "initial_delay": 0.1},
            }
        ),
        _v1(
            {
                "type": "python",
                "code": _V1_FAILS,
                "retry": {"max_attempts": 3, "initial_delay": 0.1, "stop_when": "{{ true }}"},
            }
        ),
    ),
    (
        "v1_code_b64",
        "v1",
        "code_b64",
        "None",
        "noetl/server/api/event/service/initial.py",
        _v1({"type": "python", "code": _V1_OK}),
        _v1({"type": "python", "code_b64": base64.b64encode(_V1_OK.encode()).decode()}),
    ),
    *(
        (
            f"v1_iterator_{key}",
            "v1",
            key,
            "None",
            "noetl/plugin/iterator/config.py",
            _v1_iter(),
            _v1_iter(**{key: value}),
        )
        for key, value in (
            ("where", "{{ item > 2 }}"),
            ("limit", 2),
            ("order_by", "{{ item }}"),
            ("mode", "async"),
            ("concurrency", 2),
            ("enumerate", True),
            ("chunk", 2),
        )
    ),
    (
        "v1_http_url",
        "v1",
        "url",
        "''",
        "noetl/plugin/http/executor.py",
        _v1({"type": "http"}),
        _v1({"type": "http", "url": "@HTTP@/respond", "params": {"body": "u"}}),
    ),
    (
        "v1_http_headers",
        "v1",
        "headers",
        "{}",
        "noetl/plugin/http/executor.py",
        _v1({"type": "http", "endpoint": "@HTTP@/bearer"}),
        _v1(
            {
                "type": "http",
                "endpoint": "@HTTP@/bearer",
                "headers": {"Authorization": "Bearer k33b"},
            }
        ),
    ),
    (
        "v1_http_data",
        "v1",
        "data",
        "None",
        "noetl/plugin/http/executor.py",
        _v1({"type": "http", "endpoint": "@HTTP@/respond"}),
        _v1(
            {
                "type": "http",
                "endpoint": "@HTTP@/respond",
                "data": {"query": {"body": "d", "status": 202}},
            }
        ),
    ),
    *(
        (
            f"v1_python_{key}",
            "v1",
            key,
            "None",
            "noetl/worker/worker.py",
            _v1({"type": "python", "code": _V1_ARG}),
            _v1({"type": "python", "code": _V1_ARG, key: {"x": 3}}),
        )
        for key in ("args", "input", "payload")
    ),
    (
        "v1_step_description",
        "v1",
        "description",
        "None",
        "noetl/server/api/event/service/workflow.py",
        _v1({"type": "python", "code": _V1_OK}),
        _v1({"type": "python", "code": _V1_OK, "description": "says what a does"}),
    ),
)
