"""The one mapping from a playbook's catalog path to its Airflow DAG id.

Both sides of a nested call need it: the compiler names each DAG after its playbook's catalog
path and writes ``trigger_dag_id`` for a literal child path, and the runtime
(``airflow_plugin.runtime.catalog``) maps a templated child path at run time. The runtime imports
this module, so it stays standard-library only and imports nothing of the compiler's stages.

A DAG id depends on the playbook alone (never on what else is compiled): its catalog path, with
``/`` as ``.``, reduced to the characters Airflow accepts. Two playbooks of one run that map to one
DAG id are a diagnostic (R208), not a silent ``_2`` suffix.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["MAX_DAG_ID", "dag_id_for_path"]

MAX_DAG_ID = 200  # Airflow allows 250; leave room for a suffix a deployment may add
_INVALID_DAG = re.compile(r"[^A-Za-z0-9_.-]+")


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def dag_id_for_path(path: str) -> str:
    """The DAG id of a catalog path: ``tests/fixtures/hello`` -> ``tests.fixtures.hello``.

    Characters Airflow rejects become ``_`` (accented letters keep their ASCII form); a path with
    nothing usable left, or longer than ``MAX_DAG_ID``, keeps a short hash of the original so
    that distinct paths stay distinct.
    """
    text = unicodedata.normalize("NFKD", str(path)).encode("ascii", "ignore").decode("ascii")
    text = _INVALID_DAG.sub("_", text.strip().strip("/").replace("/", "."))
    text = re.sub(r"\.{2,}", ".", text).strip("._")
    if not text:
        return f"playbook_{_short_hash(str(path))}"
    if len(text) > MAX_DAG_ID:
        text = f"{text[: MAX_DAG_ID - 10]}_{_short_hash(str(path))}"
    return text
