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

from .circuit import LoadedCircuit
from .options import QuantumRequest

__all__ = ["build_provenance", "now", "package_versions"]

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


def build_provenance(
    request: QuantumRequest,
    loaded: LoadedCircuit,
    bound: Any,
    *,
    job_id: str,
    backend: dict[str, Any],
    seed_simulator: int | None,
    seed_generated: bool,
    seed_transpiler: int | None,
    seed_transpiler_generated: bool,
    depth: int | None,
    calibration: str | None,
    submitted_at: str,
    completed_at: str | None,
) -> dict[str, Any]:
    """The provenance record (see the module docstring) of one job."""
    return {
        "provider": request.provider,
        "backend": backend,
        "job_id": job_id,
        "shots": request.shots,
        "seed_simulator": seed_simulator,
        "seed_simulator_generated": seed_generated,
        "transpile": {
            "optimization_level": request.optimization_level,
            "seed_transpiler": seed_transpiler,
            "seed_transpiler_generated": seed_transpiler_generated,
            "depth": depth,
        },
        "device": request.device,
        "calibration_snapshot_id": calibration,
        "circuit": {
            "language": loaded.language,
            "sha256": loaded.sha256,
            "num_qubits": bound.num_qubits,
            "num_clbits": bound.num_clbits,
            "depth": bound.depth(),
        },
        "params": dict(request.params),
        "versions": dict(package_versions()),
        "submitted_at": submitted_at,
        "completed_at": completed_at,
        "tags": list(request.tags),
    }
