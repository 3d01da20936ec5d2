"""The Airflow versions compiled DAG files run on, and what each can run: one table, read by the
compiler (``noetlc check/compile --airflow-version``) and by the runtime's ``airflow_plugin.compat``.

Standard library only, and no Airflow import: the compiler learns the installed Airflow's version
from the package metadata (``importlib.metadata``), so checking for a version needs no Airflow.
"""

from __future__ import annotations

import functools
import re
from importlib import metadata

__all__ = [
    "NEWEST",
    "SUPPORTED",
    "VersionError",
    "default_target",
    "gate_wait_states",
    "has_hitl",
    "installed",
    "parse_version",
    "version_label",
]

# (major, minor) of every supported Airflow, oldest first. 3.0 runs everything but approve/input
# gates (its standard provider has no human-in-the-loop operators).
SUPPORTED: tuple[tuple[int, int], ...] = ((3, 0), (3, 1), (3, 2), (3, 3))
NEWEST = SUPPORTED[-1]
HITL_SINCE = (3, 1)  # HITLOperator / HITLEntryOperator, the hitlDetails REST endpoints
AWAITING_INPUT_SINCE = (3, 3)  # a parked HITL task's own state; before it, deferred to HITLTrigger

_VERSION = re.compile(r"(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?")


class VersionError(ValueError):
    """A version text that names no supported Airflow (the message says which are)."""


def version_label(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def _supported_text() -> str:
    return ", ".join(version_label(v) for v in SUPPORTED)


def parse_version(text: str) -> tuple[int, int]:
    """``X.Y`` or ``X.Y.Z`` of a supported Airflow -> (X, Y)."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise VersionError(f"{text!r} is not an Airflow version (X.Y or X.Y.Z)")
    version = (int(match.group(1)), int(match.group(2)))
    if version not in SUPPORTED:
        raise VersionError(
            f"Airflow {text.strip()} is not supported (supported: {_supported_text()})"
        )
    return version


def _leading(text: str) -> tuple[int, int] | None:
    """(major, minor) at the start of a version text ("3.2.2", "3.3.0rc1", "3.1.8+local")."""
    match = re.match(r"(\d{1,4})\.(\d{1,4})", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def installed() -> tuple[int, int] | None:
    """The installed apache-airflow's (major, minor), from its distribution metadata; None when
    it is not installed or its version cannot be read."""
    try:
        text = metadata.version("apache-airflow")
    except metadata.PackageNotFoundError:
        return None
    return _leading(text)


@functools.cache
def default_target() -> tuple[int, int]:
    """What a DAG folder is compiled for unless told: the installed Airflow when it is a supported
    one, else the newest supported."""
    version = installed()
    return version if version in SUPPORTED else NEWEST


def has_hitl(version: tuple[int, int]) -> bool:
    """Whether approve/input gates can run there (the human-in-the-loop operators)."""
    return version >= HITL_SINCE


def gate_wait_states(version_text: str) -> tuple[str, ...]:
    """The task-instance states of a gate waiting for its answer on the Airflow whose version
    the text names: ``awaiting_input`` from 3.3; ``deferred`` (to ``HITLTrigger``) on 3.1 and
    3.2; none before 3.1 (no gates). A version this table does not know is taken as the newest."""
    version = _leading(version_text) or NEWEST
    if not has_hitl(version):
        return ()
    return ("awaiting_input",) if version >= AWAITING_INPUT_SINCE else ("deferred",)
