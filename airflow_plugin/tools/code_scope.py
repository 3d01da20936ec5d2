"""What NoETL 5's python tool gives the process its code runs in (noetl/tools ded94546
``python.rs``: ``env``, ``cwd``, ``timeout_seconds`` else the tool's ``timeout``), for code this
runtime runs in the task's own process.

* ``env``: the variables are set in ``os.environ`` while the code runs, and the previous values
  (or their absence) put back after it;
* ``cwd``: the working directory while the code runs, the previous one back after it;
* ``timeout_seconds`` (else ``timeout``): past it the code is interrupted with
  ``TimeoutError("Execution timed out after N seconds")``, NoETL 5's message, and the call fails.
  In the main thread (an Airflow task's, ``dag.test()``'s) a ``SIGALRM`` timer interrupts even a
  blocking call; a timer armed already (Airflow's ``execution_timeout``) keeps its deadline and
  handler. In another thread the exception is raised asynchronously in the code's thread, which
  takes effect at its next Python instruction (a blocking C call finishes first).

A task process runs one tool call at a time, so changing its environment and directory for the
length of the call is what a process of its own would have had.
"""

from __future__ import annotations

import ctypes
import math
import os
import signal
import threading
import time
import types
from collections.abc import Mapping
from typing import Any, Self

from ..errors import NoetlConfigError

__all__ = ["CodeScope"]


class _Expired(TimeoutError):
    """Raised into the code's thread when its time is up (a class: the async API takes one)."""


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class CodeScope:
    """``with CodeScope.from_config(config): exec(...)`` — see the module docstring."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        seconds: float | None = None,
    ) -> None:
        self.env = dict(env or {})
        self.cwd = cwd
        self.seconds = seconds
        self._saved_env: dict[str, str | None] = {}
        self._saved_cwd: str | None = None
        self._undo_timer: Any = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> CodeScope:
        """The scope ``config`` asks for; raises NoetlConfigError for a value of the wrong kind."""
        env = config.get("env")
        if env is not None and not isinstance(env, Mapping):
            raise NoetlConfigError("python `env` must be a mapping of variable names to values")
        cwd = config.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd.strip()):
            raise NoetlConfigError("python `cwd` must be a directory path")
        if cwd is not None and not os.path.isdir(cwd):
            raise NoetlConfigError(f"python `cwd` {cwd!r} is not a directory")
        raw = config.get("timeout_seconds")
        what = "timeout_seconds"
        if raw is None:
            raw, what = config.get("timeout"), "timeout"
        seconds = None
        if raw is not None:
            try:
                seconds = float(raw)
            except (TypeError, ValueError):
                seconds = math.nan
            if isinstance(raw, bool) or not math.isfinite(seconds) or seconds <= 0:
                raise NoetlConfigError(
                    f"python `{what}` must be a positive number of seconds, got {raw!r}"
                )
        return cls(
            {str(k): _text(v) for k, v in (env or {}).items() if v is not None}, cwd, seconds
        )

    def _message(self) -> str:
        return f"Execution timed out after {self.seconds:g} seconds"

    def __enter__(self) -> Self:
        for key, value in self.env.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        if self.cwd is not None:
            self._saved_cwd = os.getcwd()
            os.chdir(self.cwd)
        if self.seconds is not None:
            main = threading.current_thread() is threading.main_thread()
            self._undo_timer = self._alarm() if main else self._async_timer()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        if self._undo_timer is not None:
            try:
                self._undo_timer()
            except _Expired:  # it fired as the code ended: the code ended in time, disarm again
                self._undo_timer()
        if self._saved_cwd is not None:
            os.chdir(self._saved_cwd)
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if exc_type is not None and issubclass(exc_type, _Expired):
            raise TimeoutError(self._message()).with_traceback(tb) from None

    def _alarm(self) -> Any:
        """The SIGALRM timer, sharing it with one armed already (Airflow's ``execution_timeout``
        arms one in the task process): whichever deadline comes first fires; the other timer's
        deadline gets its own handler, and it is re-armed afterwards if it has not fired."""
        previous = signal.getsignal(signal.SIGALRM)
        outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
        started = time.monotonic()
        deadline = started + self.seconds
        outer = {"deadline": started + outer_delay if outer_delay > 0 else None, "fired": False}

        def expire(signum: int, frame: Any) -> None:
            now = time.monotonic()
            if now >= deadline - 0.001:
                raise _Expired(self._message())
            # The outer timer's deadline: ours is re-armed, then its handler runs (and may raise).
            signal.setitimer(signal.ITIMER_REAL, max(deadline - now, 0.001))
            outer["fired"] = True
            if callable(previous):
                previous(signum, frame)

        signal.signal(signal.SIGALRM, expire)
        first = self.seconds if outer["deadline"] is None else min(self.seconds, outer_delay)
        signal.setitimer(signal.ITIMER_REAL, first)

        def undo() -> None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if outer["deadline"] is not None and not outer["fired"]:
                left = max(outer["deadline"] - time.monotonic(), 0.001)
                signal.setitimer(signal.ITIMER_REAL, left, outer_interval)

        return undo

    def _async_timer(self) -> Any:
        thread_id = threading.get_ident()
        lock = threading.Lock()
        state = {"active": True, "fired": False}

        def expire() -> None:
            with lock:
                if state["active"]:
                    state["fired"] = True
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(thread_id), ctypes.py_object(_Expired)
                    )

        timer = threading.Timer(self.seconds, expire)
        timer.daemon = True
        timer.start()

        def undo() -> None:
            with lock:
                state["active"] = False
                timer.cancel()
                if state["fired"]:  # not raised yet if the code ended first: drop it
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)

        return undo
