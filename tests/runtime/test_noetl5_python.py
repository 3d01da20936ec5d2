"""NoETL 5's python tool and renderer on the Airflow runtime: the calling convention decided per
playbook generation (``ToolCall.generation``), NoETL 5's line rule for a top-level ``return``
(``noetl_compile/python_surface.py``, shared with check), ``main`` and printed output as the
result, a pipeline task's ``set``, and the filters NoETL 5's renderers register."""

from __future__ import annotations

import pytest

from airflow_plugin.runtime.pipeline import run_pipeline
from airflow_plugin.templating.context import build_context
from airflow_plugin.templating.render import RenderError, render_value
from airflow_plugin.tools.outcome import ToolCall
from airflow_plugin.tools.python import run_python
from noetl_compile.check import check_text
from noetl_compile.engine_profiles import CANONICAL, NOETL5, EngineProfile
from noetl_compile.python_surface import has_top_level_return, wrapped_source


def call(code: str, profile: EngineProfile = NOETL5, **inputs):
    return run_python(
        ToolCall(step="s", task="s", config={"code": code, "input": inputs}, profile=profile)
    )


def test_a_top_level_return_is_the_result_of_a_function_of_args_and_input_data() -> None:
    code = (
        "names = [n for n in input_data['raw'].split(',') if n]\n"
        "if not names:\n"
        "    return {'count': 0}\n"
        "return {'count': len(names), 'args': args['raw'], 'global': raw}\n"
    )
    out = call(code, raw="a,b")
    assert out.ok and out.data == {"count": 2, "args": "a,b", "global": "a,b"}
    assert call(code, raw="").data == {"count": 0}


def test_the_older_generations_keep_their_convention() -> None:
    # The April 2026 engine runs code at module level: a `return` there is a syntax error, and
    # `input_data` is no global of theirs.
    old = call("return 1\n", profile=CANONICAL)
    assert not old.ok and "'return' outside function" in old.error["message"]
    assert not call("result = input_data\n", profile=CANONICAL, a=1).ok
    assert call("result = {'a': a}\n", profile=CANONICAL, a=1).data == {"a": 1}


def test_noetl5_line_rule_decides_the_wrapping() -> None:
    # A return only inside a top-level `if`: NoETL 5 does not wrap; Python says so.
    only_nested = "if x:\n    return 1\nresult = 2\n"
    assert not has_top_level_return(only_nested)
    out = call(only_nested, x=True)
    assert not out.ok and "'return' outside function" in out.error["message"]
    # A def first: the scan stops there, `main` is the convention.
    assert not has_top_level_return("def main():\n    return 1\nreturn 2\n")
    assert has_top_level_return("# note\n\nreturn\n")
    assert wrapped_source("return 1").splitlines() == [
        "def __noetl_step__(args, input_data, **kw):",
        "    return 1",
        "",
        "result = __noetl_step__(args, input_data)",
    ]


def test_a_syntax_error_names_the_users_line_not_the_wrappers() -> None:
    out = call("x = 1\nreturn {'x': x\n")
    assert not out.ok and out.error["line"] == 2
    # check reports the same code at the same line (C501 of a NoETL 5 playbook).
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t, "
        "exposes_as_mcp: true}\nworkflow:\n  - step: start\n    tool:\n      kind: python\n"
        "      code: |\n        x = 1\n        return {'x': x\n"
    )
    (c501,) = [d for d in check_text(text).diagnostics if d.code == "C501"]
    assert c501.position.line == 10


def test_check_and_runtime_agree_on_a_nested_return() -> None:
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t, "
        "exposes_as_mcp: true}\nworkflow:\n  - step: start\n    tool:\n      kind: python\n"
        "      code: |\n        if True:\n            return 1\n"
    )
    (c501,) = [d for d in check_text(text).diagnostics if d.code == "C501"]
    assert "'return' outside function" in c501.message
    assert "unindented `return`" in c501.hint


def test_main_and_async_main_are_called_when_there_is_no_result() -> None:
    out = call("def main(a, **rest):\n    return {'a': a, 'rest': rest}\n", a=1, b=2)
    assert out.data == {"a": 1, "rest": {"b": 2}}
    assert call("async def main(n):\n    return n * 2\n", n=4).data == 8


def test_code_that_sets_no_result_gives_its_printed_output(capsys) -> None:
    out = call("import sys\nprint('hello', n)\nprint('warn', file=sys.stderr)\n", n=3)
    assert out.ok and out.data == {"stdout": "hello 3\n", "stderr": "warn\n"}
    seen = capsys.readouterr()  # still in the task's log
    assert "hello 3" in seen.out and "warn" in seen.err


def test_a_raised_exception_fails_the_call_with_noetl5s_process_result(capsys) -> None:
    """NoETL 5's python tool runs the code in a python3 process (noetl/tools python.rs): an
    exception exits it with code 1, the traceback on stderr after what was printed, and the
    result is `{status: error, exit_code, stdout, stderr, data: {stdout, stderr}}`, the shape of
    a failed shell command; the structured error keeps the exception."""
    out = call("print('before', n)\nraise ValueError('bad input')\nreturn 1\n", n=2)
    assert not out.ok and out.reported is None
    assert out.data["status"] == "error" and out.data["exit_code"] == 1
    assert out.data["stdout"] == "before 2\n"
    assert out.data["stderr"].startswith("Traceback (most recent call last):")
    # From the playbook code's frame on, as the python3 process prints it: no runtime frame.
    assert "airflow_plugin" not in out.data["stderr"]
    assert 'File "<noetl python s:s>"' in out.data["stderr"]
    assert out.error["traceback"] == out.data["stderr"]
    assert out.data["stderr"].rstrip().endswith("ValueError: bad input")
    assert out.data["data"] == {"stdout": out.data["stdout"], "stderr": out.data["stderr"]}
    assert out.error["type"] == "ValueError" and out.error["exit_code"] == 1
    assert out.error["message"] == "Python script exited with code 1: ValueError: bad input"
    exited = call("import sys\nsys.exit(3)\n")
    assert exited.data["exit_code"] == 3 and exited.error["exit_code"] == 3
    broken = call("x = 1\nreturn {'x': x\n")
    assert broken.data["exit_code"] == 1 and "SyntaxError" in broken.data["stderr"]
    assert broken.error["line"] == 2
    # Success is the exit code alone there: a returned `{status: error}` is a result.
    returned = call("return {'status': 'error', 'n': 1}\n")
    assert returned.ok and returned.data == {"status": "error", "n": 1}
    assert not call("result = {'status': 'error'}\n", profile=CANONICAL).ok
    # The older generations keep NoETL's python error document.
    old = call("raise ValueError('bad input')\n", profile=CANONICAL)
    assert old.reported["status"] == "error" and old.reported["error"] == "bad input"


def test_a_secret_printed_before_a_failure_is_redacted() -> None:
    from airflow_plugin.hooks.redact import redact

    secret = "s3cr3t-Value-42"
    masked = redact(f"password={secret}")
    assert secret not in masked  # the masker knows the shape: the tool's output goes through it
    out = call(f"print('password={secret}')\nraise RuntimeError('password={secret}')\n")
    for text in (
        out.data["stdout"],
        out.data["stderr"],
        out.error["message"],
        out.error["traceback"],
    ):
        assert secret not in text, text


def test_a_pipeline_task_set_binds_plain_names_for_the_later_tasks() -> None:
    tasks = [
        {
            "name": "first",
            "kind": "python",
            "code": "return {'n': 2}\n",
            "set": {"extracted": "{{ output }}", "ctx.total": "{{ output.n * 10 }}"},
        },
        {
            "name": "second",
            "kind": "python",
            "input": {"n": "{{ extracted.n }}", "total": "{{ ctx.total }}"},
            "code": "return {'n': n, 'total': total}\n",
        },
    ]
    ran = run_pipeline(tasks, build_context(), step="s", profile=NOETL5)
    assert ran.status == "ok", ran.error
    assert ran.result["second"] == {"n": 2, "total": 20}  # by label (task_sequence.rs:838)
    assert ran.ctx_writes == {"total": 20}  # the plain name stays the step's


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ w.names | split(',') }}", ["a", "b", "", "c"]),
        ("{{ 'x y' | split }}", ["x", "y"]),
        ("{{ 'ab' | split('') }}", ["", "a", "b", ""]),  # Rust's split on an empty separator
        ("{{ w.settings | keys | list }}", ["mode", "depth"]),
        ("{{ w.settings | values | list }}", ["fast", 2]),
        ("{{ w.settings | get('mode') }}", "fast"),
        ("{{ w.settings | get('colour') | default('unset') }}", "unset"),
        ("{{ w.names | split(',') | len }}", 4),
        ("{{ w.json | fromjson }}", {"k": [1]}),
        ("{{ 'aGk=' | b64decode }}", "hi"),
    ],
)
def test_noetl5_filters_render(template: str, expected) -> None:
    context = build_context(
        workload={
            "names": "a,b,,c",
            "settings": {"mode": "fast", "depth": 2},
            "json": '{"k": [1]}',
        }
    )
    context["w"] = context["workload"]
    assert render_value(template, context, strict=True, field="t") == expected


def test_keys_of_a_non_mapping_is_an_error_as_in_noetl5() -> None:
    with pytest.raises(RenderError, match="keys requires a mapping"):
        render_value("{{ [1, 2] | keys }}", build_context(), strict=True, field="t")
