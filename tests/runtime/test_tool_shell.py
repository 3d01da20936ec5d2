"""The shell tool (``airflow_plugin/tools/shell.py``) and the Go-template rule of
``noetl_compile/shell_surface.py``: real subprocesses, the result shape, failures, timeouts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from airflow_plugin.runtime.pipeline import call_tool
from airflow_plugin.tools.shell import commands_of
from noetl_compile.shell_surface import (
    CONFIG_FIELDS,
    blank_go_actions,
    go_action_spans,
    protect_go_actions,
    unprotect_go_actions,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "shell-tool.md"
CTX = {"workload": {"who": "bob", "n": 3}}


def shell(**config):
    return call_tool("s", "s", {"kind": "shell", **config}, CTX, {})


def test_commands_run_in_order_and_the_result_is_the_last_stdout() -> None:
    out = shell(cmds=["echo one", "echo two; echo err >&2", "printf 'last\\n\\n'"])
    assert out.ok
    assert out.data == {
        "status": "success",
        "exit_code": 0,
        "stdout": "one\ntwo\nlast\n\n",
        "stderr": "err\n",
        "data": {"exit_code": 0, "stdout": "one\ntwo\nlast\n\n", "stderr": "err\n"},
        "result": "last",
    }


def test_a_block_string_is_one_command_per_line_and_command_is_one_script() -> None:
    assert commands_of({"cmds": "echo a\n\n  X=1\necho $X\n"}) == ["echo a", "X=1", "echo $X"]
    assert shell(cmds="X=1\necho [$X]").data["result"] == "[]"
    assert shell(command="X=1\necho [$X]").data["result"] == "[1]"


def test_a_non_zero_exit_fails_the_call_and_stops_the_commands(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    out = shell(cmds=["echo before", "echo oops >&2; exit 3", f"touch {marker}"])
    assert not out.ok and not marker.exists()
    assert out.error["type"] == "CommandFailed" and out.error["code"] == "EXIT_3"
    assert out.error["message"].startswith("Command exited with code 3: command 2 of 3")
    assert out.error["message"].endswith(": oops") and out.error["retryable"] is False
    assert out.data["status"] == "error" and out.data["exit_code"] == 3
    assert out.data["stdout"] == "before\n" and out.data["stderr"] == "oops\n"


def test_a_timeout_kills_the_process_group() -> None:
    started = time.monotonic()
    out = shell(command="sleep 30 & sleep 30; echo late", timeout_seconds=0.5)
    assert time.monotonic() - started < 10
    assert not out.ok and out.error["type"] == "TimeoutError" and out.error["retryable"]
    assert out.data["status"] == "timeout" and out.data["exit_code"] is None


def test_env_is_laid_over_the_task_environment_and_cwd_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHELL_TEST_OUTER", "outer")
    out = shell(
        cmds=['echo "$SHELL_TEST_OUTER/$INNER/$(pwd)"'], env={"INNER": 5}, cwd=str(tmp_path)
    )
    assert out.data["result"] == f"outer/5/{tmp_path}"


@pytest.mark.parametrize(
    "config, message",
    [
        ({}, "needs `cmds`"),
        ({"cmds": ["true"], "env": ["A=1"]}, "`env` must be a mapping"),
        ({"cmds": ["true"], "timeout_seconds": -1}, "positive number"),
    ],
)
def test_config_errors(config: dict, message: str) -> None:
    out = shell(**config)
    assert not out.ok and out.error["type"] == "ConfigError" and message in out.error["message"]


def test_a_missing_shell_is_an_os_error() -> None:
    out = shell(cmds=["true"], shell="/nonexistent/sh")
    assert not out.ok and out.error["type"] == "OSError"


def test_go_actions_stay_text_and_jinja_beside_them_renders() -> None:
    out = shell(
        cmds=[
            "echo '{{.ID}} {{ .Names }} {{range .items}}{{.name}}{{end}} {{json .}} {{ workload.who }}'"
        ]
    )
    assert (
        out.data["result"] == "{{.ID}} {{ .Names }} {{range .items}}{{.name}}{{end}} {{json .}} bob"
    )
    assert shell(cmds=["W=abcd; echo ${#W} {{ workload.n }}"]).data["result"] == "4 3"


def test_a_command_kept_as_text_gets_its_go_actions_back() -> None:
    out = shell(cmds=["echo '{{.ID}} {{ workload.missing }}'"])
    assert out.data["result"] == "{{.ID}} {{ workload.missing }}"


@pytest.mark.parametrize(
    "text, spans",
    [
        ("{{.ID}}", [(0, 7)]),
        ("{{ workload.x }}", []),
        ("{{- .Name -}} {{ a.b }}", [(0, 13)]),
        ("{{`{{.Size}}`}}", [(0, 15)]),
        ("{{ else }}{{end}}", [(0, 10), (10, 17)]),
        ('x ${#arr[@]} {{index .L "a"}}', [(2, 5), (13, 29)]),
        ("{{ a }}" * 3, []),
    ],
)
def test_go_action_spans(text: str, spans: list[tuple[int, int]]) -> None:
    assert go_action_spans(text) == spans
    blanked = blank_go_actions(text)
    assert len(blanked) == len(text)
    assert unprotect_go_actions(protect_go_actions(text)) == text


def test_the_scan_is_linear() -> None:
    started = time.monotonic()
    for text in ("{{" * 100_000, "{{ }" * 100_000, "${#" * 100_000, "{{ .a" * 50_000):
        go_action_spans(text)
        unprotect_go_actions(protect_go_actions(text))
    assert time.monotonic() - started < 20


def test_the_doc_table_is_the_config_table() -> None:
    text = DOC.read_text()
    for key, (kind, meaning) in CONFIG_FIELDS.items():
        assert f"| `{key}` | {kind} | {meaning} |" in text
