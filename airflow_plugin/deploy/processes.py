"""The stack's processes: each spawned in its own process group with its log under the state
folder and its pid recorded, tagged with the stack id in its environment so a stack whose pid
files were lost can still be found and stopped.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .layout import Layout

__all__ = ["alive", "recorded_pids", "signal_group", "spawn", "tagged_processes"]


def spawn(layout: Layout, name: str, command: list[str], env: dict[str, str]) -> int:
    log = (layout.logs / f"{name}.log").open("ab")
    try:
        process = subprocess.Popen(
            command,
            env=env,
            cwd=layout.state,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: `down` stops it with its children
        )
    finally:
        log.close()
    (layout.pids / f"{name}.pid").write_text(f"{process.pid}\n")
    return process.pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, parent not reaping) is not alive.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def recorded_pids(layout: Layout) -> dict[str, int]:
    found = {}
    if layout.pids.is_dir():
        for path in sorted(layout.pids.glob("*.pid")):
            try:
                found[path.stem] = int(path.read_text().strip())
            except ValueError:
                continue
    return found


def tagged_processes(stack_id: str) -> list[int]:
    """Processes whose environment carries this stack's id (children that left their group)."""
    marker = f"NOETL_STACK_ID={stack_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
