"""How a failed ``kind: python`` call is reported (``python.py`` runs the code): NoETL's error
document as the step result, the traceback from the playbook code's own frame on (its lines
quoted, for the generations whose python tool runs the code in the worker's process), and NoETL
5's process result (exit code, stdout, stderr)."""

from __future__ import annotations

import io
import linecache
import traceback
import uuid
from typing import Any

from ..hooks.redact import redact
from .outcome import ToolOutcome, error_from_exception

__all__ = ["Tee", "failed", "failed_code", "failed_noetl5", "quote_source", "user_traceback"]

KIND = "python"


def failed_code(exc: BaseException, filename: str, **meta: Any) -> ToolOutcome:
    """The playbook code raised: :func:`failed`, its traceback from the code's frame on, so the
    task log shows where the code failed, not how the runtime called it."""
    error = error_from_exception(exc, kind=KIND)
    error["traceback"] = redact(user_traceback(exc, filename))
    return failed(exc, error, **meta)


def failed(exc: BaseException, error: dict[str, Any], **meta: Any) -> ToolOutcome:
    """A failure whose step result is NoETL's python error document ``{id, status, error}``
    (a fresh id per call, the exception's text); ``error`` keeps the type and traceback."""
    reported = {"id": str(uuid.uuid4()), "status": "error", "error": str(exc)}
    return ToolOutcome.failure(error, reported=reported, **meta)


class Tee(io.TextIOBase):
    """Writes to the task's own stream (its log) and keeps a copy (NoETL 5's stdout/stderr)."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.copy = io.StringIO()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


def quote_source(filename: str, code: str) -> None:
    """Let tracebacks quote ``code``'s lines for ``filename`` (``linecache`` keeps an entry
    without a modification time until it is replaced: one per step and task, the latest code)."""
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)


def user_traceback(exc: BaseException, filename: str) -> str:
    """The traceback from the playbook code's first frame on, as the python3 process NoETL 5
    runs would print it (the runtime's own frames above it left out)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))


def failed_noetl5(
    exc: BaseException, out: Tee, err: Tee, filename: str, **meta: Any
) -> ToolOutcome:
    """A failure as NoETL 5's python tool reports it (noetl/tools ``python.rs``): the code runs
    in a ``python3`` process, so an exception (or a syntax error) exits it with code 1, and
    ``sys.exit(n)`` with n; the traceback is on stderr after what the code printed. Its
    ``ToolResult`` is ``{status: error, exit_code, stdout, stderr, data: {stdout, stderr}}`` with
    the error "Python script exited with code N": the step result here, as the shell tool's
    (``{{ step.stderr }}``, ``{{ step.exit_code }}``), with the structured error (exception type,
    message, traceback) as ``error``. Output is redacted as the shell tool's is."""
    code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
    if isinstance(exc, SystemExit) and code == 0:
        code = 1  # an exit without a code still ends the script before its result
    stdout = redact(out.copy.getvalue())
    trace = user_traceback(exc, filename)
    stderr = redact(err.copy.getvalue() + trace)
    error = error_from_exception(exc, kind=KIND)
    error["message"] = redact(f"Python script exited with code {code}: {type(exc).__name__}: {exc}")
    error["traceback"] = redact(trace)
    error["exit_code"] = code
    data = {
        "status": "error",
        "exit_code": code,
        "stdout": stdout,
        "stderr": stderr,
        "data": {"stdout": stdout, "stderr": stderr},
    }
    return ToolOutcome.failure(error, data=data, **meta)
