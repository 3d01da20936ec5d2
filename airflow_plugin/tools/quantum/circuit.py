"""OpenQASM text -> a bound qiskit circuit.

The language comes from the header (``OPENQASM 2.0;`` -> ``qiskit.qasm2``, ``OPENQASM 3.x;`` ->
``qiskit.qasm3``, which needs the ``qiskit-qasm3-import`` package). Parse errors keep the
parser's own message (line and column). ``params`` binds the circuit's free parameters by name:
QASM 3 ``input float theta;`` declarations, or parameters of a circuit built elsewhere. Every
free parameter must get a value and every value must name one: a typo would otherwise run a
different experiment than the one asked for.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import QuantumError

__all__ = ["LoadedCircuit", "bind", "load"]

# Whitespace, `//` line comments and `/* */` block comments may precede the version header.
_PREAMBLE = re.compile(r"(?:\s++|//[^\n]*+|/\*.*?\*/)*+", re.DOTALL)
_HEADER = re.compile(r"OPENQASM\s++(?P<major>\d++)(?:\.(?P<minor>\d++))?+\s*+;")


@dataclass(frozen=True)
class LoadedCircuit:
    circuit: Any  # qiskit.QuantumCircuit
    language: str  # "OpenQASM 2.0" / "OpenQASM 3.0"
    sha256: str  # of the rendered text: ties a provenance record to the exact circuit


def load(text: str) -> LoadedCircuit:
    match = _HEADER.match(text, _PREAMBLE.match(text).end())
    if match is None:
        raise QuantumError(
            "QASMParseError",
            "`circuit` must start with an `OPENQASM 2.0;` or `OPENQASM 3.0;` header",
            code="QASM_PARSE",
        )
    major = match["major"]
    language = f"OpenQASM {major}.{match['minor'] or 0}"
    if major == "2":
        circuit = _load_qasm2(text)
    elif major == "3":
        circuit = _load_qasm3(text)
    else:
        raise QuantumError(
            "QASMParseError",
            f"{language} is not supported (OpenQASM 2 and 3 are)",
            code="QASM_PARSE",
        )
    return LoadedCircuit(circuit, language, hashlib.sha256(text.encode()).hexdigest())


def _load_qasm2(text: str) -> Any:
    from qiskit import qasm2

    try:
        return qasm2.loads(text)
    except qasm2.QASM2Error as exc:
        raise QuantumError(
            "QASMParseError", f"OpenQASM 2 parse error: {_message(exc)}", code="QASM_PARSE"
        ) from None


def _load_qasm3(text: str) -> Any:
    from qiskit import qasm3
    from qiskit.exceptions import MissingOptionalLibraryError

    try:
        return qasm3.loads(text)
    except MissingOptionalLibraryError:
        raise QuantumError(
            "ProviderNotInstalled",
            "OpenQASM 3 circuits need the package qiskit-qasm3-import "
            "(part of noetlc's `airflow` extra: pip install 'noetlc[airflow]')",
            code="QASM3_IMPORTER_MISSING",
        ) from None
    except qasm3.QASM3Error as exc:
        raise QuantumError(
            "QASMParseError", f"OpenQASM 3 parse error: {_message(exc)}", code="QASM_PARSE"
        ) from None
    except Exception as exc:  # noqa: BLE001 - the importer's ANTLR front end raises its own types
        raise QuantumError(
            "QASMParseError",
            f"OpenQASM 3 parse error: {type(exc).__name__}: {exc}",
            code="QASM_PARSE",
        ) from None


def _message(exc: BaseException) -> str:
    # QiskitError's str() is the repr of its message (quoted); the message itself reads better.
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def bind(circuit: Any, params: Mapping[str, float]) -> Any:
    """``circuit`` with every free parameter bound from ``params`` (by name)."""
    free = {parameter.name: parameter for parameter in circuit.parameters}
    unknown = sorted(set(params) - set(free))
    missing = sorted(set(free) - set(params))
    if unknown or missing:
        parts = []
        if unknown:
            parts.append(f"unknown parameter(s) {', '.join(unknown)}")
        if missing:
            parts.append(f"no value for parameter(s) {', '.join(missing)}")
        declared = ", ".join(sorted(free)) or "none"
        raise QuantumError(
            "QuantumParameterError",
            f"`params` does not match the circuit: {'; '.join(parts)} "
            f"(the circuit's parameters: {declared})",
            code="PARAMS",
        )
    if not free:
        return circuit
    return circuit.assign_parameters({free[name]: value for name, value in params.items()})
