"""Provenance of a quantum job (whitepaper 10.4): what is needed to run it again and compare.

Provider, backend name and version, shots, the simulator seed, the transpiler settings and the
depth they produced, the calibration snapshot (real hardware only; null on a simulator), the
versions of the qiskit packages, the circuit's language and sha256, the bound parameters, the
submit and completion times (RFC 3339, UTC), the job id and its tags.
"""

from __future__ import annotations

import datetime as _dt
import functools
from importlib import metadata
from typing import Any

__all__ = ["now", "package_versions"]

_PACKAGES = ("qiskit", "qiskit-aer", "qiskit-qasm3-import", "qiskit-ibm-runtime")


def now() -> str:
    """The current time as RFC 3339 (UTC, milliseconds)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


@functools.cache
def package_versions() -> dict[str, Any]:
    """Installed versions of the qiskit packages (None: not installed)."""
    versions: dict[str, Any] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions
