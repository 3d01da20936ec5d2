"""``kind: shell`` — commands in a subprocess, with NoETL 5's result shape.

The config keys are the table ``noetl_compile.shell_surface.CONFIG_FIELDS`` (``cmds`` |
``command`` | ``cmd``, ``shell``, ``env``, ``cwd``, ``timeout_seconds`` | ``timeout``,
``capture``). How it runs, and where each rule comes from:

* **Commands.** ``cmds`` as NoETL 5's local runtime runs them: every list item (a string: every
  non-empty line) in its own ``bash -c`` process, in order, stopping at the first non-zero exit;
  ``command`` / ``cmd`` is one script in one process (NoETL 5's Rust shell tool). ``shell``
  picks another interpreter. Templates were rendered before the call (Go template actions such
  as ``{{.ID}}`` are left to the command: ``shell_surface``).
* **Environment.** The task's environment (``PATH``, ``HOME``... as NoETL's local runtime and
  Rust tool inherit theirs) with ``env`` laid over it; ``cwd`` or the task's directory. Standard
  input is closed (``/dev/null``): a command waiting for a keyboard would hang the worker.
* **Result** (NoETL 5's Rust ``ToolResult`` of a shell call, plus the local runtime's value)::

      {"status": "success" | "error" | "timeout", "exit_code": 0, "stdout": "...",
       "stderr": "...", "data": {"exit_code", "stdout", "stderr"},
       "result": "<the last command's stdout without its trailing newlines>"}

  ``stdout``/``stderr`` hold every command's output in order; ``result`` is what ``noetl run -r
  local`` reports as the step's result (and templates read as ``{{ step.result }}``).
* **Failure.** A non-zero exit is a failed call (``CommandFailed``, ``code`` ``EXIT_<n>``, not
  retryable) whose data is the result above with ``status: error``: an error arc
  (``when: "{{ event.name == 'call.error' }}"``) routes it and can read ``exit_code``/``stderr``;
  without one the step fails. A command past ``timeout_seconds`` has its process group killed:
  ``status: timeout``, ``exit_code`` null, a retryable ``TimeoutError``. A shell that cannot
  start (missing interpreter or ``cwd``) is an ``OSError`` failure.
* **Secrets.** stdout, stderr, the error message and the command preview go through the same
  redaction as events (Airflow's masker: connection passwords, values the secrets tool read,
  workload values under secret-looking keys; credentials in URLs and DSNs): a secret a command
  prints never reaches the XCom, an event or a log line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from typing import Any

from noetl_compile.shell_surface import COMMAND_KEYS, protect_go_actions, unprotect_go_actions

from ..hooks.redact import redact
from .outcome import ToolCall, ToolOutcome, tool_error

__all__ = ["DEFAULT_SHELL", "commands_of", "run_shell", "shell_commands_protected"]

DEFAULT_SHELL = "bash"
_PREVIEW = 120  # characters of a failing command named in the error message


def _text(value: Any) -> str:
    """A command or env value as text (rendering may have coerced it to a number or a list; a
    command whose rendering failed is its template text, Go actions given back)."""
    if isinstance(value, str):
        return unprotect_go_actions(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return "" if value is None else str(value)


def commands_of(config: Mapping[str, Any]) -> list[str]:
    """The commands to run, one process each (see the module docstring)."""
    cmds = config.get("cmds")
    if isinstance(cmds, list):
        return [_text(c) for c in cmds if _text(c).strip()]
    if isinstance(cmds, str):
        return [line.strip() for line in cmds.splitlines() if line.strip()]
    for key in COMMAND_KEYS[1:]:
        value = config.get(key)
        if value is not None and _text(value).strip():
            return [_text(value)]
    return []


def shell_commands_protected(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """``tool`` with the Go template actions of its commands inside Jinja ``raw`` blocks, so the
    lenient rendering of the tool config gives them back verbatim (``shell_surface``)."""
    changed: dict[str, Any] = {}
    for key in COMMAND_KEYS:
        value = tool.get(key)
        if isinstance(value, str):
            protected: Any = protect_go_actions(value)
        elif isinstance(value, list):
            protected = [protect_go_actions(v) if isinstance(v, str) else v for v in value]
        else:
            continue
        if protected != value:
            changed[key] = protected
    return {**tool, **changed} if changed else tool


def _timeout(config: Mapping[str, Any]) -> float | None:
    for key in ("timeout_seconds", "timeout"):
        value = config.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            raise TypeError(f"`{key}` must be a number of seconds, not {value!r}")
        seconds = float(value)
        if seconds <= 0:
            raise ValueError(f"`{key}` must be a positive number of seconds, not {value!r}")
        return seconds
    return None


def _environment(config: Mapping[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    extra = config.get("env")
    if extra is None:
        return env
    if not isinstance(extra, Mapping):
        raise TypeError(f"`env` must be a mapping of names to values, not {type(extra).__name__}")
    for key, value in extra.items():
        if value is not None:
            env[str(key)] = _text(value)
    return env


def _preview(command: str) -> str:
    first = command.strip().splitlines()[0] if command.strip() else ""
    return redact(first[:_PREVIEW] + ("..." if len(first) > _PREVIEW else ""))


def _result(status: str, exit_code: int | None, out: list[str], err: list[str], last: str):
    stdout, stderr = redact("".join(out)), redact("".join(err))
    return {
        "status": status,
        "exit_code": exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "data": {"exit_code": exit_code, "stdout": stdout, "stderr": stderr},
        "result": redact(last.rstrip("\n")),
    }


def _run_one(
    argv: list[str], env: dict[str, str], cwd: str | None, timeout: float | None, capture: bool
) -> tuple[int | None, str, str]:
    """One command; exit code None when it ran past ``timeout`` (its process group killed)."""
    pipe = subprocess.PIPE if capture else None
    # A session of its own: a timeout kills the command's children too (`sleep` under bash).
    with subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=pipe,
        stderr=pipe,
        env=env,
        cwd=cwd,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return None, _decode(out), _decode(err)
        return proc.returncode, _decode(out), _decode(err)


def _decode(data: bytes | None) -> str:
    return data.decode("utf-8", errors="replace") if data else ""


def run_shell(call: ToolCall) -> ToolOutcome:
    config = call.config
    commands = commands_of(config)
    if not commands:
        return ToolOutcome.failure(
            tool_error(
                "shell",
                "ConfigError",
                "the shell tool needs `cmds` (a list of commands) or `command` (one script)",
            )
        )
    try:
        timeout = _timeout(config)
        env = _environment(config)
    except (TypeError, ValueError) as exc:
        return ToolOutcome.failure(tool_error("shell", "ConfigError", str(exc)))
    shell = _text(config.get("shell")) or DEFAULT_SHELL
    cwd = _text(config.get("cwd")) or None
    capture = config.get("capture", True) not in (False, "false", "False", 0)
    out: list[str] = []
    err: list[str] = []
    last = ""
    started = time.monotonic()
    for index, command in enumerate(commands):
        try:
            code, stdout, stderr = _run_one([shell, "-c", command], env, cwd, timeout, capture)
        except OSError as exc:
            data = _result("error", None, out, err, last)
            message = redact(f"cannot start {shell!r}: {exc}")
            return ToolOutcome.failure(tool_error("shell", "OSError", message), data=data)
        out.append(stdout)
        err.append(stderr)
        last = stdout
        where = f"command {index + 1} of {len(commands)} ({_preview(command)})"
        if code is None:
            data = _result("timeout", None, out, err, last)
            message = f"Execution timed out after {timeout:g} seconds: {where}"
            error = tool_error("shell", "TimeoutError", message, retryable=True, code="TIMEOUT")
            # The step result keeps the tool's own status (`timeout`, not the generic `error`).
            reported = {**data, "error": error}
            return ToolOutcome.failure(error, data=data, reported=reported, command=index)
        if code != 0:
            data = _result("error", code, out, err, last)
            tail = data["stderr"].strip().splitlines()[-1:] if capture else []
            message = f"Command exited with code {code}: {where}" + (
                f": {tail[0][:_PREVIEW]}" if tail else ""
            )
            error = tool_error("shell", "CommandFailed", message, code=f"EXIT_{code}")
            return ToolOutcome.failure(error, data=data, command=index)
    data = _result("success", 0, out, err, last)
    return ToolOutcome.success(data, duration=time.monotonic() - started)
