"""Where one stack lives (``Layout``: the state folder's airflow home, logs, pids, manifest, env
file, passwords), the error every part of the stack raises, and two small helpers they share.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Layout", "StackError", "free_port", "tail"]


class StackError(RuntimeError):
    """The stack could not be started or stopped; the message says which part and why."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


@dataclass
class Layout:
    """Where everything of one stack lives."""

    state: Path

    @property
    def home(self) -> Path:
        return self.state / "airflow"

    @property
    def python(self) -> Path:
        """This checkout's packages (links), the first entry of every process's PYTHONPATH."""
        return self.state / "python"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def pids(self) -> Path:
        return self.state / "pids"

    @property
    def manifest(self) -> Path:
        return self.state / "stack.json"

    @property
    def env_file(self) -> Path:
        return self.state / "env"

    @property
    def passwords(self) -> Path:
        return self.state / "passwords.json"

    def read_manifest(self) -> dict:
        try:
            return json.loads(self.manifest.read_text())
        except (OSError, ValueError):
            return {}
