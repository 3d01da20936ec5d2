"""The quantum tool's playbook surface (docs/quantum.md): the one table `noetlc check`
(C511) and the runtime's quantum tool both read. The runtime imports this module, so it stays
standard-library only and imports nothing of the compiler's stages (like ``step_contract``).
"""

from __future__ import annotations

__all__ = ["CONFIG_KEYS", "DEVICES", "OPS", "PROVIDERS", "TRANSPILE_KEYS"]

PROVIDERS = ("aer", "basic", "ibm")
OPS = ("run", "submit", "status", "results")
DEVICES = ("CPU", "GPU")
# The keys of a quantum tool's config (a pipeline task's `name`/`spec` are the pipeline's own).
CONFIG_KEYS = frozenset(
    {
        "kind",
        "input",
        "output",
        "provider",
        "backend",
        "op",
        "circuit",
        "params",
        "shots",
        "seed",
        "transpile",
        "job_id",
        "auth",
        "tags",
        "device",
    }
)
TRANSPILE_KEYS = frozenset({"optimization_level", "seed_transpiler"})
