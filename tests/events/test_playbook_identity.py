"""The playbook identity every event carries is read back from the compiled DAG itself: its
`doc_md` lists "- Source: `path`" and "- SHA-256: `hash`" (older DAG files carried bare lines)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from airflow_plugin.events.listener import playbook_identity

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["hello_world", "branching", "loop_parallel"])
def test_a_compiled_dags_doc_names_its_playbook(name: str) -> None:
    spec = importlib.util.spec_from_file_location(f"identity_{name}", ROOT / "dags" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (dag,) = [v for v in vars(module).values() if type(v).__name__ == "DAG"]
    path, digest = playbook_identity(dag)
    assert path == f"playbooks/{name}.yaml"
    assert digest == hashlib.sha256((ROOT / path).read_bytes()).hexdigest()


def test_the_older_bare_lines_are_read_too() -> None:
    doc = "Airflow DAG\n\nSource: playbooks/a.yaml\nSHA-256: " + "ab" * 32 + "\n"
    assert playbook_identity(doc) == ("playbooks/a.yaml", "ab" * 32)
    assert playbook_identity("no identity here") == (None, None)
