"""Signs of life during `noetlc run`: a line when a step starts, and a heartbeat while it runs.

The finished-step lines (``runner.Progress``) say what happened; these say what is happening, so
a long step is never silence: ``  square  started``, then every few seconds
``  square  running 12s  (loop 1200/5000 items)``. Loop counts come from the run's own events
(``LoopStarted`` carries the total, each ``LoopIterationCompleted`` is one item done), which the
in-process recorder sees as they are emitted, inline loops and mapped chunks alike. A paginating
step (a ``next_call`` policy, a pagination region) shows ``(12 pages fetched)``: the http calls
that completed (``ToolCompleted`` of kind http) while the step runs.

The driver runs tasks in the main thread, and a single task may run for minutes, so heartbeats
come from a daemon thread; writes share one lock with the start lines. On a terminal (stdout and
stderr both), the heartbeat is instead a live status line drawn by ``rich`` (refreshed four times
a second, below the step lines, gone when the run ends), and every line goes through rich's
console so the two never garble each other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import IO, Any

from ..events import names
from .report import Unit, units_of

__all__ = ["HEARTBEAT_AFTER", "HEARTBEAT_EVERY", "Live"]

HEARTBEAT_AFTER = 3.0  # seconds a step runs before its first heartbeat
HEARTBEAT_EVERY = 3.0  # seconds between heartbeats


class Live:
    def __init__(
        self,
        payloads: Mapping[str, Mapping[str, Any]],
        stream: IO[str],
        *,
        width: int = 0,
        terminal: bool = False,
        after: float = HEARTBEAT_AFTER,
        every: float = HEARTBEAT_EVERY,
    ) -> None:
        self.width = width  # the finished lines' step column, so both align
        self.units: dict[str, list[Unit]] = {
            dag_id: units_of(unit_payloads) for dag_id, unit_payloads in payloads.items()
        }
        self.stream = stream
        self.after, self.every = after, every
        self.lock = threading.Lock()
        self.started: dict[tuple[str, str, str], float] = {}  # step of a run -> its start
        self.current: tuple[str, float] | None = None  # (step label, start time)
        self.loop_total: dict[str | None, int] = {}
        self.loop_done: dict[str | None, int] = {}
        self.pages: dict[str, int] = {}  # step -> http calls completed while it ran
        self.last_beat = 0.0
        self._stop = threading.Event()
        self._rich: Any = None
        if terminal:
            from rich.console import Console
            from rich.live import Live as RichLive

            self.console = Console(file=stream, highlight=False)
            # sys.stdout/stderr lead to the run's log file (Airflow's output): not redirected.
            self._rich = RichLive(
                _Status(self),
                console=self.console,
                refresh_per_second=4,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._rich.start()
            return
        self._thread = threading.Thread(target=self._beat, name="noetlc-heartbeat", daemon=True)
        self._thread.start()

    def _label(self, dag_id: str, task_id: str) -> str:
        for unit in self.units.get(dag_id, ()):
            if unit.owns_task(task_id):
                return unit.own or unit.id
        return task_id

    def _write(self, line: str) -> None:
        try:
            if self._rich is not None:  # above the live status line, never through it
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
                return
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not fail the run

    def print_line(self, text: str) -> None:
        """Lines of the run's other output (the finished steps) while the live line is drawn."""
        for line in text.splitlines():
            self._write(line)

    def status(self, now: float) -> str:
        """The live status line: what runs, for how long, the loop's items (rich mode). Reads
        without the lock: rich calls this from its refresh thread while holding its own lock,
        which a writer holding ours may be waiting for."""
        current = self.current
        if current is None or now - current[1] < self.after:
            return ""
        label, since = current
        return f"  {label:<{self.width}}  running  {now - since:.0f}s{self._detail(label.strip())}"

    def _detail(self, step: str) -> str:
        total, pages = self.loop_total.get(step), self.pages.get(step, 0)
        if total is not None:
            return f"  (loop {self.loop_done.get(step, 0)}/{total} items)"
        if pages:
            return f"  ({pages} page{'s' if pages != 1 else ''} fetched)"
        return ""

    # -- the driver's side ------------------------------------------------------------------------
    def task_started(self, dag_id: str, run_id: str, task_id: str, prefix: str = "") -> None:
        if dag_id in self.units and not any(u.owns_task(task_id) for u in self.units[dag_id]):
            return  # a task of no step (the run outcome): the summary says how it ended
        label = self._label(dag_id, task_id)
        key = (dag_id, run_id, label)
        with self.lock:
            first = key not in self.started
            if first:
                # A loop's mapped instances are one step: it started with its first one.
                self.started[key] = self.last_beat = time.monotonic()
            self.current = (prefix + label, self.started[key])
        if first:
            self._write(f"  {prefix}{label:<{self.width}}  started")

    def task_finished(self) -> None:
        with self.lock:
            self.current = None

    def observe(self, event: Any) -> None:
        """Every event of the run, as it is recorded (any thread)."""
        name = getattr(event, "name", None)
        if name == names.LOOP_STARTED:
            data = getattr(event, "data", None)
            total = data.get("total") if isinstance(data, Mapping) else None
            if isinstance(total, int):
                with self.lock:
                    self.loop_total[event.step] = total
                    self.loop_done[event.step] = 0
        elif name == names.LOOP_ITERATION_COMPLETED:
            with self.lock:
                self.loop_done[event.step] = self.loop_done.get(event.step, 0) + 1
        elif name == names.TOOL_COMPLETED:
            data = getattr(event, "data", None)
            if isinstance(data, Mapping) and data.get("kind") == "http":
                with self.lock:
                    # Counted for the step that runs now: a region's or a nested playbook's
                    # inner http steps are that step's pages.
                    if self.current is not None:
                        step = self.current[0].strip()
                        self.pages[step] = self.pages.get(step, 0) + 1

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            return
        self._stop.set()
        self._thread.join(timeout=1.0)

    # -- the heartbeat thread ---------------------------------------------------------------------
    def heartbeat(self, now: float) -> str | None:
        """The heartbeat line due at ``now``, if one is."""
        with self.lock:
            if self.current is None:
                return None
            label, since = self.current
            if now - since < self.after or now - self.last_beat < self.every:
                return None
            self.last_beat = now
            return (
                f"  {label:<{self.width}}  running  {now - since:.0f}s{self._detail(label.strip())}"
            )

    def _beat(self) -> None:
        while not self._stop.wait(0.5):
            line = self.heartbeat(time.monotonic())
            if line is not None:
                with self.lock:
                    self._write(line)


class _Status:
    """The renderable rich redraws: the live status line of a ``Live``."""

    def __init__(self, live: Live) -> None:
        self.live = live

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.live.status(time.monotonic()))
