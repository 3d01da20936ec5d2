"""`noetlc run` on a terminal: the run's start at once, heartbeats during a long step counting
loop items and fetched pages, and the `noetlc events` command it prints."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

from airflow_plugin.events import Event
from tests.harness.run_cli import PLAYBOOKS, ROOT, TIMEOUT, noetlc_run, write_playbook

# -- live progress on a terminal ------------------------------------------------------------------

NAP = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: nap, path: tests/nap}
    workflow:
      - step: start
        tool: {kind: python, code: "result = 1"}
        next: {arcs: [{step: nap}]}
      - step: nap
        tool:
          kind: python
          code: |
            import time
            time.sleep(10)
            result = {"slept": 10}
"""


# Cursor and erase sequences of rich's live display (CSI ... letter); a bounded class, linear.
_CSI = re.compile(rb"\x1b\[[0-9;?]{0,16}[A-Za-z]")


def _read_terminal(leader: int, process: subprocess.Popen, started: float) -> list:
    """(seconds since start, text) for every line or redrawn status line the command wrote to
    its terminal (rich redraws its live line after a carriage return)."""
    lines, pending = [], b""
    deadline = started + TIMEOUT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        pending += chunk
        *complete, pending = re.split(rb"[\r\n]", pending)
        now = time.monotonic() - started
        lines += [(now, t) for raw in complete if (t := _CSI.sub(b"", raw).decode().rstrip())]
    return lines


def test_a_terminal_sees_the_run_start_at_once_and_a_heartbeat_during_a_long_step(
    first_run, home, tmp_path
):
    playbook = write_playbook(tmp_path, "nap", NAP)
    leader, follower = pty.openpty()
    environ = {k: v for k, v in os.environ.items() if k not in ("NOETL_STRICT", "NOETL_NESTED")}
    environ["NOETLC_HOME"] = str(home)
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "noetl_compile", "run", str(playbook)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=ROOT,
        env=environ,
    )
    os.close(follower)
    try:
        lines = _read_terminal(leader, process, started)
    finally:
        os.close(leader)
        process.wait(timeout=60)
    assert process.returncode == 0, lines
    text = [line for _, line in lines]
    # The first line comes before Airflow is imported: well within a second of the start.
    first_at, first = lines[0]
    assert first == f"noetlc: running {playbook} (starting Airflow)" and first_at < 1.0, lines
    at = {}
    for t, line in lines:
        if line.startswith("  ") and len(line.split()) >= 2:
            at.setdefault(" ".join(line.split()[:2]), t)
    assert at["nap started"] < at["nap success"], lines
    # On a terminal the heartbeat is rich's live status line, redrawn while the step sleeps:
    # from 3 s on, the seconds counting up, all before the step's end.
    beats = [(t, line) for t, line in lines if line.startswith("  nap    running  ")]
    seconds = sorted({int(line.split()[-1].removesuffix("s")) for _, line in beats})
    assert len(seconds) >= 2 and seconds[0] >= 3, text
    # (a redraw read in the same chunk as the success line shares its time)
    assert all(at["nap started"] + 2.5 < t <= at["nap success"] for t, _ in beats), lines
    # The total is the command's wall time, from its first line to its last.
    total = next(line for line in text if line.startswith("success in "))
    wall = float(total.removeprefix("success in ").removesuffix("s"))
    assert abs(wall - (lines[-1][0] - first_at)) < 2.0, (wall, lines)


def test_the_events_command_a_run_prints_answers_whatever_airflow_home_says(
    first_run, home, tmp_path
):
    """Every Airflow user's shell sets AIRFLOW_HOME; `noetlc run` still writes to its managed
    home, and the `noetlc events ID` it prints finds the run there, saying which log it read."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"AIRFLOW_HOME": str(elsewhere)}
    result = noetlc_run(home, PLAYBOOKS / "hello_world.yaml", env=env)
    assert result.returncode == 0, result.stderr
    command = next(line for line in result.stdout.splitlines() if line.startswith("events  "))
    printed = command.rsplit("(", 1)[1].rstrip(")").split()  # ['noetlc', 'events', ID]
    assert printed[:2] == ["noetlc", "events"]
    environ = {**os.environ, "NOETLC_HOME": str(home), **env}
    outputs = []
    for args, expected in (
        (printed[1:], ["WorkflowStarted", "StepFinished", "PlaybookProcessed"]),
        (["status", printed[2]], ["greet  success"]),
    ):
        shown = subprocess.run(
            [sys.executable, "-m", "noetl_compile", *args],
            cwd=ROOT,
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert shown.returncode == 0, shown.stderr
        assert all(name in shown.stdout for name in expected), shown.stdout
        outputs.append(shown.stdout)
    assert outputs[0].splitlines()[0] == f"event log: sqlite {home / 'noetl' / 'events.db'}"


def test_heartbeats_count_loop_items_from_the_runs_events():
    import io

    from airflow_plugin.local.live import Live

    stream = io.StringIO()
    live = Live({}, stream, width=6, after=3.0, every=3.0)
    try:
        live.task_started("d", "r", "square")
        loop = {"entity": "loop", "entity_id": "square", "step": "square"}
        live.observe(Event(name="LoopStarted", status="in_progress", data={"total": 5}, **loop))
        for _ in range(2):
            live.observe(Event(name="LoopIterationCompleted", status="success", **loop))
        since = live.current[1]
        assert live.heartbeat(since + 1.0) is None  # too early for a first heartbeat
        assert live.heartbeat(since + 4.0) == "  square  running  4s  (loop 2/5 items)"
        assert live.heartbeat(since + 5.0) is None  # one every 3 s
        live.task_finished()
        assert live.heartbeat(since + 9.0) is None  # nothing runs
        live.task_started("d", "r", "square")  # the next mapped item: same step, same start
        assert live.heartbeat(since + 9.0) == "  square  running  9s  (loop 2/5 items)"
    finally:
        live.close()
    written = stream.getvalue()
    assert written.startswith("  square  started\n") and written.count("started") == 1


def test_heartbeats_count_the_pages_a_paginating_step_fetched():
    import io

    from airflow_plugin.local.live import Live

    live = Live({}, io.StringIO(), width=10, after=3.0, every=3.0)
    try:
        live.task_started("d", "r", "fetch_page")
        tool = {"entity": "tool", "entity_id": "fetch_page:http", "step": "fetch_page"}
        since = live.current[1]
        assert live.heartbeat(since + 4.0) == "  fetch_page  running  4s"  # no page yet
        live.observe(Event(name="ToolCompleted", status="success", data={"kind": "http"}, **tool))
        assert live.heartbeat(since + 7.0) == "  fetch_page  running  7s  (1 page fetched)"
        live.observe(Event(name="ToolErrored", status="error", data={"kind": "http"}, **tool))
        live.observe(Event(name="ToolCompleted", status="success", data={"kind": "python"}, **tool))
        for _ in range(2):
            live.observe(
                Event(name="ToolCompleted", status="success", data={"kind": "http"}, **tool)
            )
        # A failed call and a python call are no pages; the status line (rich) says the same.
        assert live.heartbeat(since + 10.0) == "  fetch_page  running  10s  (3 pages fetched)"
        assert live.status(since + 11.0) == "  fetch_page  running  11s  (3 pages fetched)"
    finally:
        live.close()
