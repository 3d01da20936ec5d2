"""``provider: ibm`` — IBM Quantum through qiskit-ibm-runtime (the optional ``quantum-ibm`` extra).

Checked in this order, each with its own clear error and never a traceback: the package is
installed (else: which extra to install), ``auth`` names an Airflow connection, the connection
holds a token (its password, or ``token`` in its extra; ``channel`` and ``instance`` in the extra
are passed on). The token is registered with Airflow's log masker and never leaves this module.

Circuits run through the Sampler primitive (``SamplerV2``) after transpiling for the backend's
instruction set; ``backend`` absent = the least busy operational device. The simulator seed has
no meaning on hardware and is recorded as null. This path is not exercised by the test suite (no
account, and the package is not installed there): only its installation and credential errors are.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from ...hooks.connections import ConnectionNotFound, auth_name, get_connection, mask
from .errors import QuantumError

__all__ = [
    "EXTRA",
    "IbmSession",
    "calibration_snapshot",
    "job_counts",
    "job_status",
    "open_session",
    "require_package",
    "submit",
]

EXTRA = "quantum-ibm"
_PACKAGE = "qiskit_ibm_runtime"


class IbmSession:
    """A QiskitRuntimeService and the token to keep out of messages."""

    def __init__(self, service: Any, token: str):
        self.service = service
        self._token = token

    def failure(self, exc: BaseException, doing: str) -> QuantumError:
        message = f"IBM Quantum {doing} failed: {type(exc).__name__}: {exc}"
        return QuantumError(
            "IBMRuntimeError",
            message.replace(self._token, "***"),
            code="IBM_RUNTIME",
            retryable=_transient(exc),
        )

    def backend(self, name: str | None) -> Any:
        try:
            if name:
                return self.service.backend(name)
            return self.service.least_busy(operational=True, simulator=False)
        except Exception as exc:  # noqa: BLE001 - the service's errors are many and undocumented
            raise self.failure(exc, f"backend lookup ({name or 'least busy'})") from None

    def job(self, job_id: str) -> Any:
        try:
            return self.service.job(job_id)
        except Exception as exc:  # noqa: BLE001
            raise self.failure(exc, f"lookup of job {job_id}") from None


def require_package() -> None:
    if importlib.util.find_spec(_PACKAGE) is None:
        raise QuantumError(
            "ProviderNotInstalled",
            "provider ibm needs the package qiskit-ibm-runtime, which is not installed: "
            f"install the extra with pip install 'noetlc[{EXTRA}]'",
            code="IBM_NOT_INSTALLED",
        )


def open_session(auth: Any) -> IbmSession:
    require_package()
    name = auth_name(auth)
    if name is None:
        raise QuantumError(
            "QuantumCredentialsError",
            "provider ibm needs credentials: set `auth` to an Airflow connection whose password "
            "(or extra `token`) is the IBM Quantum API token; `channel` and `instance` go in "
            "its extra",
            code="IBM_CREDENTIALS",
        )
    try:
        info = get_connection(name)
    except ConnectionNotFound as exc:
        raise QuantumError("QuantumCredentialsError", str(exc), code="IBM_CREDENTIALS") from None
    extra: Mapping[str, Any] = info.extra or {}
    token = info.password or extra.get("token")
    if not isinstance(token, str) or not token:
        raise QuantumError(
            "QuantumCredentialsError",
            f"connection {name!r} holds no IBM Quantum token (put it in the password or in the "
            "extra as `token`)",
            code="IBM_CREDENTIALS",
        )
    mask(token)
    from qiskit_ibm_runtime import QiskitRuntimeService

    options = {key: extra[key] for key in ("channel", "instance", "url") if extra.get(key)}
    try:
        service = QiskitRuntimeService(token=token, **options)
    except Exception as exc:  # noqa: BLE001
        raise IbmSession(None, token).failure(exc, "login") from None
    return IbmSession(service, token)


def submit(session: IbmSession, backend: Any, compiled: Any, shots: int) -> Any:
    from qiskit_ibm_runtime import SamplerV2

    try:
        return SamplerV2(mode=backend).run([compiled], shots=shots)
    except Exception as exc:  # noqa: BLE001
        raise session.failure(exc, "submit") from None


def job_status(session: IbmSession, job: Any) -> str:
    try:
        status = job.status()
    except Exception as exc:  # noqa: BLE001
        raise session.failure(exc, "status") from None
    return str(getattr(status, "name", status)).upper()  # a str in V2 jobs, an enum before


def job_counts(session: IbmSession, job: Any) -> dict[str, int]:
    try:
        pub = job.result()[0]
        counts = pub.join_data().get_counts()
    except Exception as exc:  # noqa: BLE001
        raise session.failure(exc, "result") from None
    return {str(k): int(v) for k, v in sorted(counts.items())}


def calibration_snapshot(backend: Any) -> str | None:
    """The time of the backend's last calibration, the snapshot its results depend on."""
    try:
        properties = backend.properties()
    except Exception:  # noqa: BLE001 - not every backend publishes properties
        return None
    updated = getattr(properties, "last_update_date", None)
    return updated.isoformat() if hasattr(updated, "isoformat") else None


def _transient(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return any(word in text for word in ("timeout", "connection", "temporar", "503", "502", "429"))
