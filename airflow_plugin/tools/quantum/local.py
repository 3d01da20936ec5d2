"""The local simulators: ``aer`` (qiskit-aer) and ``basic`` (qiskit's BasicSimulator).

A local job runs inside the calling task and is finished when the call returns, so ``op: submit``
on a simulator returns a job that is already ``DONE`` (or ``ERROR``); the job store lets later
tasks ask for its status and results. Seeds: with no ``seed`` (or no ``seed_transpiler``) one is
drawn and recorded, so every run can be repeated exactly from its provenance.
"""

from __future__ import annotations

import secrets
import warnings
from dataclasses import dataclass
from typing import Any

from .circuit import LoadedCircuit
from .errors import QuantumError
from .options import QuantumRequest

__all__ = ["DEFAULT_BACKENDS", "Execution", "draw_seed", "execute_locally", "transpile_for"]

DEFAULT_BACKENDS = {"aer": "aer_simulator", "basic": "basic_simulator"}


@dataclass
class Execution:
    """What running one circuit produced (the caller turns it into the result and provenance)."""

    job_id: str
    status: str  # qiskit JobStatus name: DONE, ERROR...
    counts: dict[str, int] | None
    backend_name: str
    backend_version: str | None
    seed_simulator: int | None
    seed_generated: bool
    seed_transpiler: int | None
    seed_transpiler_generated: bool
    depth: int | None
    error: str | None = None


def draw_seed() -> int:
    return secrets.randbelow(2**31)


def _backend(request: QuantumRequest) -> Any:
    name = request.backend or DEFAULT_BACKENDS[request.provider]
    if request.provider == "aer":
        from qiskit_aer import Aer as provider
    else:
        from qiskit.providers.basic_provider import BasicProvider

        provider = BasicProvider()
    try:
        backend = provider.get_backend(name)
    except Exception:  # noqa: BLE001 - QiskitBackendNotFoundError, or a provider's own error
        with warnings.catch_warnings():  # listing builds the legacy backends, which warn
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            known = ", ".join(b.name for b in provider.backends())
        raise QuantumError(
            "QuantumConfigError",
            f"provider {request.provider} has no backend {name!r} (it has: {known})",
            code="BACKEND_NOT_FOUND",
        ) from None
    if request.device == "GPU":
        devices = _devices(backend, request.provider)
        if "GPU" not in devices:
            raise QuantumError(
                "QuantumDeviceError",
                f"GPU simulation asked, this {_package(request.provider)} has devices: "
                f"{', '.join(devices)}",
                code="GPU_UNAVAILABLE",
            )
    return backend


def _devices(backend: Any, provider: str) -> tuple[str, ...]:
    if provider == "aer":
        return tuple(backend.available_devices())
    return ("CPU",)  # BasicSimulator is pure Python


def _package(provider: str) -> str:
    return "qiskit-aer" if provider == "aer" else "qiskit BasicSimulator"


def transpile_for(backend: Any, bound: Any, level: int, seed: int | None) -> Any:
    """``bound`` transpiled for ``backend``; what the transpiler refuses (a circuit wider than
    the backend, a gate it cannot map) is a clear error, not a crash."""
    from qiskit import transpile
    from qiskit.exceptions import QiskitError

    try:
        return transpile(bound, backend=backend, optimization_level=level, seed_transpiler=seed)
    except QiskitError as exc:
        message = getattr(exc, "message", None) or str(exc)
        raise QuantumError(
            "QuantumTranspileError",
            f"cannot transpile the circuit for {backend.name}: {message}",
            code="TRANSPILE",
        ) from None


def execute_locally(request: QuantumRequest, loaded: LoadedCircuit, bound: Any) -> Execution:
    """Transpile ``bound`` for the simulator and run it; a simulator failure is an ERROR job."""
    backend = _backend(request)
    if bound.num_clbits == 0:
        raise QuantumError(
            "QuantumCircuitError",
            "the circuit measures nothing (no classical bits): counts need `measure` statements",
            code="NO_MEASUREMENTS",
        )
    seed = request.seed if request.seed is not None else draw_seed()
    seed_transpiler = (
        request.seed_transpiler if request.seed_transpiler is not None else draw_seed()
    )
    compiled = transpile_for(backend, bound, request.optimization_level, seed_transpiler)
    options: dict[str, Any] = {"shots": request.shots, "seed_simulator": seed}
    if request.device == "GPU":
        options["device"] = "GPU"
    try:
        job = backend.run(compiled, **options)
    except Exception as exc:  # noqa: BLE001 - a simulator refusing the job before it has an id
        raise QuantumError(
            "QuantumBackendError",
            f"{backend.name} refused the job: {type(exc).__name__}: {exc}",
            code="BACKEND",
        ) from None
    job_id = str(job.job_id())
    counts: dict[str, int] | None = None
    error: str | None = None
    try:
        result = job.result()
        counts = {str(k): int(v) for k, v in sorted(result.get_counts().items())}
        status = "DONE"
    except Exception as exc:  # noqa: BLE001 - the simulator's own failure, recorded with the job
        status, error = "ERROR", f"{type(exc).__name__}: {exc}"
    return Execution(
        job_id=job_id,
        status=status,
        counts=counts,
        backend_name=backend.name,
        backend_version=str(getattr(backend, "backend_version", None) or "") or None,
        seed_simulator=seed,
        seed_generated=request.seed is None,
        seed_transpiler=seed_transpiler,
        seed_transpiler_generated=request.seed_transpiler is None,
        depth=compiled.depth(),
        error=error,
    )
