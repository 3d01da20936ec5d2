"""NoETL 5's python ``python`` key (noetl/tools ded94546 ``python.rs``:211): the interpreter the
code runs in. NoETL 5 always runs the code in a child process of that interpreter (default
``$PYTHON_PATH`` or ``python3``); the Airflow runtime runs it in the task's own interpreter unless
the key names one, and then does as ``python.rs`` does (``execute_code``, :637):

* a script written to a temporary file runs as ``<python> <file>``, with ``env`` added to the
  environment, ``cwd`` as its directory and ``timeout_seconds`` (else ``timeout``) as its limit
  (the process is killed; the call fails "Execution timed out after N seconds");
* the inputs reach it as JSON on stdin (``{args, variables, execution_id, step}``), become its
  globals and the dict ``input_data``; a top-level ``return`` makes the code a function body;
  with no ``result`` a callable ``main`` is called with the inputs it names (awaited if async);
* the result is the ``result`` global, sent back as one marked JSON line on stdout (the line is
  taken out of the visible stdout); none (null) is ``{stdout, stderr}``; a non-zero exit is the
  error "Python script exited with code N" with ``{status, exit_code, stdout, stderr, data}``.

Only JSON reaches the child: its inputs are the rendered values as JSON, as NoETL 5 sends them.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping
from typing import Any

from noetl_compile.python_surface import has_top_level_return, wrapped_source

from ..hooks.redact import redact
from ..templating.render import to_jsonable
from .code_scope import CodeScope
from .outcome import ToolOutcome

KIND = "python"
MARKER = "__NOETLC_PYTHON_RESULT__:"

# Runs in the chosen interpreter: stdlib only, no noetlc import (the interpreter may not have
# it). `{code}` is the playbook's code, at column 0.
_HEAD = """\
import sys as __noetl_sys
import json as __noetl_json

__noetl_context = __noetl_json.loads(__noetl_sys.stdin.read())
args = __noetl_context.get("args") or {}
variables = __noetl_context.get("variables") or {}
execution_id = __noetl_context.get("execution_id")
step = __noetl_context.get("step")
globals().update(args)
input_data = dict(args)
"""

_TAIL = """
if globals().get("result", None) is None and callable(globals().get("main", None)):
    import asyncio as __noetl_asyncio
    import inspect as __noetl_inspect
    __noetl_sig = __noetl_inspect.signature(main)
    __noetl_kw = {}
    __noetl_var_kw = False
    for __noetl_name, __noetl_p in __noetl_sig.parameters.items():
        if __noetl_p.kind == __noetl_p.VAR_KEYWORD:
            __noetl_var_kw = True
        elif __noetl_p.kind != __noetl_p.VAR_POSITIONAL and __noetl_name in args:
            __noetl_kw[__noetl_name] = args[__noetl_name]
    if __noetl_var_kw:
        for __noetl_k, __noetl_v in args.items():
            __noetl_kw.setdefault(__noetl_k, __noetl_v)
    result = main(**__noetl_kw)
    if __noetl_inspect.iscoroutine(result):
        result = __noetl_asyncio.run(result)
try:
    __noetl_out = __noetl_json.dumps(globals().get("result", None), default=str)
except Exception as __noetl_err:
    __noetl_out = "null"
    __noetl_sys.stderr.write("noetl result capture failed: " + repr(__noetl_err) + "\\n")
__noetl_sys.stdout.write("\\n" + @MARKER@ + __noetl_out + "\\n")
__noetl_sys.stdout.flush()
"""


def script(code: str) -> str:
    """The file the interpreter runs: the inputs read, the code, the result written."""
    body = wrapped_source(code) if has_top_level_return(code) else code
    return _HEAD + body + "\n" + _TAIL.replace("@MARKER@", repr(MARKER))


def _split(raw: str) -> tuple[Any, bool, str]:
    """(the marked result, whether there was one, the visible stdout without its line)."""
    head, found, tail = raw.rpartition(MARKER)
    if not found:
        return None, False, raw
    line, _, rest = tail.partition("\n")
    try:
        value = json.loads(line)
    except ValueError:
        return None, False, raw
    # The wrapper writes a newline before the marker, so output without a trailing one is kept.
    return value, True, head.removesuffix("\n") + rest


def run_in_interpreter(
    interpreter: str,
    code: str,
    inputs: Mapping[str, Any],
    scope: CodeScope,
    step: str,
    meta: dict[str, Any],
) -> ToolOutcome:
    """Run ``code`` in ``interpreter`` as NoETL 5's python tool does (see the module docstring)."""
    payload = json.dumps(
        {"args": to_jsonable(dict(inputs)), "variables": {}, "execution_id": None, "step": step},
        default=str,
    )
    env = {**os.environ, **scope.env}
    with tempfile.NamedTemporaryFile(
        "w", suffix=".py", prefix="noetl_python_", delete=False, encoding="utf-8"
    ) as handle:
        handle.write(script(code))
        path = handle.name
    try:
        try:
            done = subprocess.run(  # the playbook names its interpreter
                [interpreter, path],
                input=payload,
                capture_output=True,
                text=True,
                env=env,
                cwd=scope.cwd,
                timeout=scope.seconds,
                check=False,
            )
        except subprocess.TimeoutExpired:
            message = f"Execution timed out after {scope.seconds:g} seconds"
            return ToolOutcome.failure(
                {"kind": KIND, "type": "TimeoutError", "message": message}, **meta
            )
        except OSError as exc:
            message = f"Failed to spawn Python process {interpreter!r}: {exc.strerror or exc}"
            return ToolOutcome.failure(
                {"kind": KIND, "type": "ConfigError", "message": message}, **meta
            )
    finally:
        os.unlink(path)
    value, marked, stdout = _split(done.stdout)
    stdout, stderr = redact(stdout), redact(done.stderr)
    if not marked and stdout.strip():
        try:  # NoETL 5's fallback when the script ended before its result line
            value, marked = json.loads(stdout), True
        except ValueError:
            value = None
    if value is None:
        value = {"stdout": stdout, "stderr": stderr}
    if done.returncode != 0:
        code_ = done.returncode
        error = {
            "kind": KIND,
            "type": "ProcessError",
            "message": redact(f"Python script exited with code {code_}"),
            "exit_code": code_,
        }
        data = {
            "status": "error",
            "exit_code": code_,
            "stdout": stdout,
            "stderr": stderr,
            "data": value,
        }
        return ToolOutcome.failure(error, data=data, **meta)
    return ToolOutcome.success(value, **meta)
