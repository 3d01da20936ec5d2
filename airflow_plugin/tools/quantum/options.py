"""The rendered config of a quantum call, read and checked once (spec-extensions.md §2).

Templates are rendered by the runtime before the tool sees the config, so a value here is what a
template produced: ``shots: "{{ shots }}"`` may arrive as ``256`` or ``"256"``; both are fine.
What cannot work is refused here, naming the key and what it accepts, before any simulator runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from noetl_compile.quantum_surface import CONFIG_KEYS, DEVICES, OPS, PROVIDERS, TRANSPILE_KEYS

from .errors import config_error

__all__ = [
    "DEFAULT_OPTIMIZATION_LEVEL",
    "DEFAULT_SHOTS",
    "DEVICES",
    "OPS",
    "PROVIDERS",
    "QuantumRequest",
    "read_request",
]

DEFAULT_SHOTS = 1024
# qiskit 2.x transpiles at level 2 when none is given; written down so provenance says it.
DEFAULT_OPTIMIZATION_LEVEL = 2


@dataclass(frozen=True)
class QuantumRequest:
    provider: str
    op: str
    backend: str | None = None
    circuit: str | None = None
    params: dict[str, float] = field(default_factory=dict)
    shots: int = DEFAULT_SHOTS
    seed: int | None = None
    optimization_level: int = DEFAULT_OPTIMIZATION_LEVEL
    seed_transpiler: int | None = None
    job_id: str | None = None
    auth: Any = None
    tags: tuple[str, ...] = ()
    device: str = "CPU"
    # Whether `provider` was written (status/results then trust the job store's record).
    provider_given: bool = False


def read_request(config: Mapping[str, Any]) -> QuantumRequest:
    unknown = sorted(str(k) for k in config if k not in CONFIG_KEYS)
    if unknown:
        raise config_error(
            f"unknown key(s) {', '.join(unknown)} in the quantum tool "
            f"(known: {', '.join(sorted(CONFIG_KEYS - {'kind'}))})"
        )
    provider = _choice(config, "provider", PROVIDERS, "aer")
    op = _choice(config, "op", OPS, "run")
    circuit = config.get("circuit")
    if op in ("run", "submit") and (not isinstance(circuit, str) or not circuit.strip()):
        raise config_error(f"op {op} needs `circuit`: OpenQASM 2 or 3 text")
    job_id = config.get("job_id")
    if op in ("status", "results"):
        if job_id in (None, "") or isinstance(job_id, (Mapping, list, bool)):
            raise config_error(f"op {op} needs `job_id` (the id a run or submit returned)")
        job_id = str(job_id).strip()
    transpile = config.get("transpile") or {}
    if not isinstance(transpile, Mapping):
        raise config_error("`transpile` must be a mapping {optimization_level, seed_transpiler}")
    extra = sorted(str(k) for k in transpile if k not in TRANSPILE_KEYS)
    if extra:
        raise config_error(
            f"unknown key(s) {', '.join(extra)} in `transpile` "
            "(known: optimization_level, seed_transpiler)"
        )
    level = _integer(transpile, "optimization_level", "transpile.optimization_level")
    if level is not None and not 0 <= level <= 3:
        raise config_error(f"`transpile.optimization_level` must be 0, 1, 2 or 3, not {level}")
    shots = _integer(config, "shots", "shots")
    if shots is not None and shots < 1:
        raise config_error(f"`shots` must be a positive integer, not {shots}")
    device = _choice(config, "device", DEVICES, "CPU")
    return QuantumRequest(
        provider=provider,
        op=op,
        backend=_text(config, "backend"),
        circuit=circuit if isinstance(circuit, str) else None,
        params=_params(config.get("params")),
        shots=DEFAULT_SHOTS if shots is None else shots,
        seed=_integer(config, "seed", "seed"),
        optimization_level=DEFAULT_OPTIMIZATION_LEVEL if level is None else level,
        seed_transpiler=_integer(transpile, "seed_transpiler", "transpile.seed_transpiler"),
        job_id=job_id if isinstance(job_id, str) else None,
        auth=config.get("auth"),
        tags=_tags(config.get("tags")),
        device=device,
        provider_given=config.get("provider") not in (None, ""),
    )


def _choice(config: Mapping[str, Any], key: str, choices: tuple[str, ...], default: str) -> str:
    value = config.get(key)
    if value in (None, ""):
        return default
    # Exactly the spellings `noetlc check` accepts (C511), so a playbook that passes the check
    # never fails here for the case of a letter.
    if not isinstance(value, str) or value.strip() not in choices:
        raise config_error(f"`{key}` must be one of {', '.join(choices)}, not {value!r}")
    return value.strip()


def _text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise config_error(f"`{key}` must be a name, not {type(value).__name__}")
    return value.strip()


def _integer(mapping: Mapping[str, Any], key: str, where: str) -> int | None:
    """An integer, also from the text a template rendered (``"256"``); never a bool or 2.5."""
    value = mapping.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise config_error(f"`{where}` must be an integer, not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise config_error(f"`{where}` must be an integer, not {value!r}")


def _params(value: Any) -> dict[str, float]:
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise config_error(
            f"`params` must be a mapping parameter name -> number, not {type(value).__name__}"
        )
    params: dict[str, float] = {}
    for name, raw in value.items():
        if isinstance(raw, bool):
            raise config_error(f"`params.{name}` must be a number, not {raw!r}")
        try:
            params[str(name)] = float(raw)
        except (TypeError, ValueError):
            raise config_error(f"`params.{name}` must be a number, not {raw!r}") from None
    return params


def _tags(value: Any) -> tuple[str, ...]:
    if value in (None, ""):
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(tag, str) for tag in value):
        return tuple(value)
    raise config_error(f"`tags` must be a list of strings, not {value!r}")
