"""``kind: quantum`` — run OpenQASM circuits on a simulator or IBM Quantum (spec-extensions.md §2).

Modules: ``options`` (the config, checked), ``circuit`` (QASM 2/3 loading and parameter binding),
``local`` (aer and basic simulators), ``ibm`` (qiskit-ibm-runtime, optional), ``jobs`` (the job
store later tasks read), ``provenance`` (versions, timestamps). qiskit is imported by these
modules only when a quantum step runs.

Ops: ``run`` (default: submit and wait), ``submit`` (a simulator job is finished when the call
returns), ``status`` and ``results`` (of a job id, found in the job store, or at IBM).

Result: ``{job_id, status, counts, shots, backend: {name, version}, provenance}``; ``counts`` is
null for ``submit`` and ``status``. The provenance also rides on the outcome's ``meta`` so the
runtime puts it into the ToolCompleted event. Every failure is a tool error (type, message,
retryable, code), never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..outcome import ToolCall, ToolOutcome, tool_error
from . import circuit as circuits
from . import ibm
from .errors import KIND, QuantumError
from .jobs import jobs_folder, load_job, save_job
from .local import DEFAULT_BACKENDS, execute_locally, transpile_for
from .options import QuantumRequest, read_request
from .provenance import build_provenance, now, package_versions

__all__ = ["run_quantum"]

_FINAL_FAILURES = ("ERROR", "CANCELLED")


def run_quantum(call: ToolCall) -> ToolOutcome:
    try:
        request = read_request(call.config)
        if request.op in ("run", "submit"):
            record = _execute(request)
        else:
            record = _lookup(request)
    except QuantumError as exc:
        return ToolOutcome.failure(exc.as_tool_error())
    except Exception as exc:  # noqa: BLE001 - qiskit's own failures: a tool error, never a crash
        return ToolOutcome.failure(
            tool_error(
                KIND,
                type(exc).__name__,
                f"quantum op {call.config.get('op') or 'run'} failed: {exc}",
                code="QISKIT",
            )
        )
    result = {
        "job_id": record["job_id"],
        "status": record["status"],
        "counts": record.get("counts") if request.op in ("run", "results") else None,
        "shots": record["shots"],
        "backend": record["backend"],
        "provenance": record["provenance"],
    }
    return ToolOutcome.success(result, provenance=record["provenance"])


# -- run / submit ----------------------------------------------------------------------------


def _execute(request: QuantumRequest) -> dict[str, Any]:
    assert request.circuit is not None  # read_request demands it for run/submit
    if request.provider == "ibm":
        ibm.require_package()  # before parsing: a missing extra is the first thing to fix
    loaded = circuits.load(request.circuit)
    bound = circuits.bind(loaded.circuit, request.params)
    submitted_at = now()
    if request.provider == "ibm":
        return _execute_ibm(request, loaded, bound, submitted_at)
    execution = execute_locally(request, loaded, bound)
    provenance = build_provenance(
        request,
        loaded,
        bound,
        job_id=execution.job_id,
        backend={"name": execution.backend_name, "version": execution.backend_version},
        seed_simulator=execution.seed_simulator,
        seed_generated=execution.seed_generated,
        seed_transpiler=execution.seed_transpiler,
        seed_transpiler_generated=execution.seed_transpiler_generated,
        depth=execution.depth,
        calibration=None,
        submitted_at=submitted_at,
        completed_at=now(),
    )
    record = _record(request, execution.job_id, execution.status, provenance, execution.counts)
    record["error"] = execution.error
    save_job(record)
    if request.op == "run" and execution.status != "DONE":
        raise _job_failed(record)
    return record


def _execute_ibm(
    request: QuantumRequest, loaded: circuits.LoadedCircuit, bound: Any, submitted_at: str
) -> dict[str, Any]:
    if request.device == "GPU":
        raise QuantumError(
            "QuantumDeviceError",
            "`device: GPU` selects a simulator device; provider ibm runs on quantum hardware",
            code="GPU_UNAVAILABLE",
        )
    session = ibm.open_session(request.auth)
    backend = session.backend(request.backend)
    seed_transpiler = request.seed_transpiler
    compiled = transpile_for(backend, bound, request.optimization_level, seed_transpiler)
    job = ibm.submit(session, backend, compiled, request.shots)
    job_id = str(job.job_id())
    counts = ibm.job_counts(session, job) if request.op == "run" else None
    status = "DONE" if request.op == "run" else ibm.job_status(session, job)
    provenance = build_provenance(
        request,
        loaded,
        bound,
        job_id=job_id,
        backend={"name": backend.name, "version": _version(backend)},
        seed_simulator=None,
        seed_generated=False,
        seed_transpiler=seed_transpiler,
        seed_transpiler_generated=False,
        depth=compiled.depth(),
        calibration=ibm.calibration_snapshot(backend),
        submitted_at=submitted_at,
        completed_at=now() if status == "DONE" else None,
    )
    record = _record(request, job_id, status, provenance, counts)
    save_job(record)
    return record


def _version(backend: Any) -> str | None:
    version = getattr(backend, "backend_version", None) or getattr(backend, "version", None)
    return str(version) if version is not None else None


def _record(
    request: QuantumRequest,
    job_id: str,
    status: str,
    provenance: Mapping[str, Any],
    counts: dict[str, int] | None,
) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "provider": request.provider,
        "status": status,
        "counts": counts,
        "shots": request.shots,
        "backend": dict(provenance["backend"]),
        "provenance": dict(provenance),
        "error": None,
    }


# -- status / results ------------------------------------------------------------------------


def _lookup(request: QuantumRequest) -> dict[str, Any]:
    assert request.job_id is not None  # read_request demands it for status/results
    record = load_job(request.job_id)
    provider = record["provider"] if record else request.provider
    if record and request.provider_given and request.provider != provider:
        raise QuantumError(
            "QuantumConfigError",
            f"job {request.job_id} was run by provider {provider}, not {request.provider}",
            code="PROVIDER_MISMATCH",
        )
    if provider == "ibm":
        return _lookup_ibm(request, record)
    if record is None:
        raise QuantumError(
            "QuantumJobNotFound",
            f"no quantum job {request.job_id!r} in the job store {jobs_folder()} (simulator jobs "
            f"are kept where they ran: {', '.join(DEFAULT_BACKENDS)} jobs are found on the same "
            "machine or shared volume only)",
            code="JOB_NOT_FOUND",
        )
    if request.op == "results" and record["status"] != "DONE":
        raise _job_failed(record)
    return record


def _lookup_ibm(request: QuantumRequest, record: dict[str, Any] | None) -> dict[str, Any]:
    session = ibm.open_session(request.auth)
    job = session.job(request.job_id or "")
    status = ibm.job_status(session, job)
    if record is None:  # submitted elsewhere: what the service tells is all there is
        name = getattr(job.backend(), "name", None) if hasattr(job, "backend") else None
        provenance = {
            "provider": "ibm",
            "backend": {"name": name, "version": None},
            "job_id": request.job_id,
            "shots": None,
            "seed_simulator": None,
            "transpile": None,
            "calibration_snapshot_id": None,
            "versions": dict(package_versions()),
            "submitted_at": None,
            "completed_at": None,
            "tags": list(request.tags),
        }
        record = _record(request, request.job_id or "", status, provenance, None)
        record["shots"] = None
    record["status"] = status
    if status in _FINAL_FAILURES:
        record["error"] = f"the IBM Quantum job ended {status}"
    if request.op == "results":
        if status != "DONE":
            save_job(record)
            raise _job_failed(record)
        record["counts"] = ibm.job_counts(session, job)
        record["provenance"]["completed_at"] = record["provenance"].get("completed_at") or now()
    save_job(record)
    return record


def _job_failed(record: Mapping[str, Any]) -> QuantumError:
    status = record["status"]
    if status in _FINAL_FAILURES:
        return QuantumError(
            "QuantumJobFailed",
            f"quantum job {record['job_id']} ended {status}: {record.get('error') or 'no reason'}",
            code=f"JOB_{status}",
        )
    return QuantumError(
        "QuantumJobNotDone",
        f"quantum job {record['job_id']} has no results yet (status {status})",
        code="JOB_NOT_DONE",
        retryable=True,
    )
