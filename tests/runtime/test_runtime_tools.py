"""Tool registry, python and noop executors."""

from __future__ import annotations

import uuid

import pytest

from airflow_plugin.runtime.pipeline import outcome_result
from airflow_plugin.tools import (
    ToolCall,
    ToolNotAvailable,
    ToolOutcome,
    available_tools,
    get_tool,
    register_tool,
)


def run_python(code, *, step_input=None, context=None, **config):
    call = ToolCall(
        step="s",
        task="s",
        config={"kind": "python", "code": code, **config},
        step_input=step_input or {},
        context=context or {},
    )
    return get_tool("python")(call)


def test_result_convention_with_inputs_as_globals():
    out = run_python("result = {'sum': a + b, 'all': sorted(input)}", step_input={"a": 1, "b": 2})
    assert out.status == "ok"
    assert out.data == {"sum": 3, "all": ["a", "b"]}


def test_step_input_overrides_tool_input_and_args():
    out = run_python(
        "result = [a, b, c]",
        args={"a": "args", "b": "args", "c": "args"},
        input={"b": "tool input", "c": "tool input"},
        step_input={"c": "step input"},
    )
    assert out.data == ["args", "tool input", "step input"]


def test_preset_globals_and_context():
    out = run_python(
        "result = {'j': json.dumps([1]), 'u': len(str(uuid.uuid4())), 'y': datetime.date(2026, 1, 2).year,"
        " 'ctx': context['execution_id']}",
        context={"execution_id": "42"},
    )
    assert out.data == {"j": "[1]", "u": 36, "y": 2026, "ctx": "42"}


@pytest.mark.parametrize(
    "code",
    [
        "result = globals()['context']['execution_id']",
        "result = eval('cont' + 'ext')['execution_id']",
        "def main(context):\n    return context['execution_id']",
    ],
)
def test_context_reached_by_name_lookup_is_the_context(code):
    # The plain context is built only for code that can reach it (a loop item's cost); every
    # way of reaching it still finds it.
    out = run_python(code, context={"execution_id": "42"})
    assert out.data == "42", out.error


def test_code_that_cannot_name_the_context_runs_without_it():
    out = run_python("result = sorted(k for k in dir() if not k.startswith('_'))")
    assert out.status == "ok" and "context" in out.data  # the name is there, empty


def test_libs_are_imported():
    out = run_python(
        "result = m.sqrt(16) + p(2, 3)", libs={"m": "math", "p": {"from": "math", "import": "pow"}}
    )
    assert out.data == 12.0


def test_v1_main_with_keyword_inputs():
    out = run_python(
        "def main(message, extra='x'):\n    return {'m': message, 'e': extra}",
        step_input={"message": "hi"},
    )
    assert out.data == {"m": "hi", "e": "x"}


def test_v1_main_with_whole_input_dict():
    out = run_python(
        "def main(input_data):\n    return {'got': input_data.get('k')}", step_input={"k": 7}
    )
    assert out.data == {"got": 7}


def test_v1_main_with_kwargs():
    out = run_python("def main(**kw):\n    return sorted(kw)", step_input={"b": 1, "a": 2})
    assert out.data == ["a", "b"]


def test_v1_main_missing_argument_is_an_error():
    out = run_python("def main(required):\n    return 1")
    assert out.status == "error"
    assert out.error["type"] == "TypeError"


def test_exception_becomes_error_outcome():
    out = run_python("x = 1\nraise ValueError('bad value')")
    assert out.status == "error"
    assert out.error["type"] == "ValueError"
    assert out.error["message"] == "bad value"
    assert "Traceback" in out.error["traceback"] and "line 2" in out.error["traceback"]
    assert out.data is None


def test_syntax_error_becomes_error_outcome():
    out = run_python("result = {'a': 1\nreturn result")
    assert out.status == "error"
    assert out.error["type"] == "SyntaxError"
    assert out.error["line"] in (1, 2)
    assert "SyntaxError" in out.error["traceback"]


def test_module_level_return_is_a_syntax_error():
    # Seen in real fixtures (v2_* playbooks): NoETL itself fails these; so do we, with the cause.
    out = run_python("return {'status': 'ok'}")
    assert out.status == "error" and out.error["type"] == "SyntaxError"
    assert "return" in out.error["message"]


def test_status_error_result_is_an_error_outcome():
    out = run_python("result = {'status': 'error', 'error': 'db down', 'n': 1}")
    assert out.status == "error"
    assert out.error["message"] == "db down"
    assert out.data == {"status": "error", "error": "db down", "n": 1}
    # NoETL hands the dict back as the step result, with nothing merged in.
    assert outcome_result(out) == {"status": "error", "error": "db down", "n": 1}


def test_raised_exception_result_is_noetls_error_document():
    out = run_python("raise ValueError('boom')")
    assert out.status == "error" and out.error["type"] == "ValueError"
    assert "Traceback" in out.error["traceback"]
    result = outcome_result(out)
    assert set(result) == {"id", "status", "error"}
    assert result["status"] == "error" and result["error"] == "boom"
    assert str(uuid.UUID(result["id"])) == result["id"]
    assert outcome_result(run_python("raise ValueError('boom')"))["id"] != result["id"]


def test_result_is_made_json_safe():
    out = run_python("result = {'when': datetime.datetime(2026, 1, 2), 't': (1, 2), 's': {3}}")
    assert out.data == {"when": "2026-01-02T00:00:00", "t": [1, 2], "s": [3]}


def test_no_result_gives_noetls_status_and_locals_summary():
    out = run_python("x = 3\nname = 'n'\nimport math\nprint(x)")
    assert out.ok
    assert out.data == {
        "status": "success",
        "message": "Code executed without explicit result variable",
        "locals_count": 3,
        "locals_keys": ["x", "name", "math"],
    }


def test_missing_code_is_an_error():
    out = get_tool("python")(ToolCall(step="s", task="s", config={"kind": "python"}))
    assert out.status == "error" and "code" in out.error["message"]


def test_code_b64():
    out = run_python(None, code_b64="cmVzdWx0ID0gMQ==")  # "result = 1"
    assert out.data == 1


def test_noop():
    out = get_tool("noop")(ToolCall(step="route", task="route", config={"kind": "noop"}))
    assert out == ToolOutcome("ok", data={"status": "noop", "step": "route"})


@pytest.mark.parametrize("kind", ["snowflake", "nats", "gcs", "workbook", "no_such_kind"])
def test_kinds_without_executor_raise_tool_not_available(kind):
    # workbook calls are resolved by the compiler; a raw one reaching the runtime is a bug.
    with pytest.raises(ToolNotAvailable, match=f"cannot execute tool kind '{kind}'") as raised:
        get_tool(kind)
    assert "supported kinds: " in str(raised.value) and "postgres" in str(raised.value)


def test_registry_refuses_silent_shadowing_and_lists_kinds():
    assert {"python", "noop"} <= set(available_tools())
    with pytest.raises(ValueError, match="already registered"):
        register_tool("python", lambda call: ToolOutcome("ok"))


def test_python_inputs_holding_json_text_arrive_as_data():
    out = run_python(
        "result = [type(a).__name__, type(b).__name__, c]",
        step_input={"a": '{"x": 1}', "b": "[1, 2]", "c": "{not json}"},
    )
    assert out.data == ["dict", "list", "{not json}"]


def test_python_result_none_stays_none_not_noetls_storage_placeholder():
    # NoETL's result handler stores `result = None` as {_value: None} (a placeholder of its
    # result store; recorded: tests/differential/cases/python_results/none); the value the code
    # set is None, and that is the step's result here (docs/semantics.md section 1)
    out = run_python("result = None")
    assert out.status == "ok" and out.data is None
