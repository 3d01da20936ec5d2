"""The recorder's own logic, without a NoETL checkout: the 3.11 copy and the result mapping.

A live recording needs NoETL's server, worker and NATS (README.md, "Re-recording a case"); the
parts of ``record.py`` that decide what a case says are checked here on the shapes the three
engines store.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.differential import record

# The shape of 138c10ed's noetl/tools/duckdb/auth/secrets.py:165, which Python 3.11 refuses.
_F_STRING = (
    "def secret(alias, parts):\n"
    "    return f\"CREATE SECRET {alias} (\\n  {',\\n  '.join(parts)}\\n);\"\n"
)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 parses the f-string as written")
def test_the_311_copy_hoists_separators_and_keeps_the_string(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "noetl" / "tools").mkdir(parents=True)
    (checkout / "noetl" / "tools" / "secrets.py").write_text(_F_STRING)
    (checkout / "noetl" / "plain.py").write_text("X = 1\n")
    with pytest.raises(SyntaxError):
        compile(_F_STRING, "secrets.py", "exec")
    copy = record.py311_copy(checkout, tmp_path / "scratch")
    spec = importlib.util.spec_from_file_location("secrets_copy", copy / "noetl/tools/secrets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.secret("s", ["A", "B"]) == "CREATE SECRET s (\n  A,\n  B\n);"
    assert (copy / "noetl/plain.py").read_text() == "X = 1\n"  # parsed: left as it is
    assert (checkout / "noetl/tools/secrets.py").read_text() == _F_STRING  # the user's is untouched


def test_an_inline_case_v2_result_is_the_tool_result_inside_the_worker_envelope():
    http = {"status_code": 200, "data": {"id": 2}}
    stored = {"kind": "data", "data": {"result": http, "status": "completed", "case_action": "x"}}
    assert record._resolve(None, stored) == http
    # A tool result that merely has a `result` key is not the envelope.
    own = {"kind": "data", "data": {"result": 1, "status": "ok", "rows": []}}
    assert record._resolve(None, own) == {"result": 1, "status": "ok", "rows": []}


def test_the_broker_outcome_counts_actions_and_binds_the_flattened_result():
    case = {"playbook": {"workflow": [{"step": "start"}, {"step": "a"}, {"step": "end"}]}}

    def event(kind, node, result=None, error=None):
        return {"event_type": kind, "node_name": node, "result": result, "error": error}

    events = [
        event("action_started", "a"),
        event("action_error", "a", {"id": "1", "data": {"x": 1}}, "boom"),
        event("action_completed", "a", '{"status": "success", "data": {"x": 2}}'),
        event("execution_failed", "a", {"reason": "failed", "failed_step": "a"}),
    ]
    outcome = record._broker_outcome(case, events, "failed")
    assert outcome["steps_ran"] == ["a"] and outcome["calls"] == {"a": 2}
    assert outcome["results"] == {"a": {"x": 2}}  # the execution's end is not the step's result
    assert outcome["steps_not_run"] == ["start", "end"] and outcome["errors"] == {"a": "boom"}
