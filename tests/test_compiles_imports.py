"""What check accepts, compile turns into a DAG file Airflow imports.

Every value the emitted DAG or an operator's constructor validates when the file is parsed
(durations, timeouts, gate kinds, ...) must be validated by check first: a playbook that checks
clean and compiles but fails in the DAG processor is a lie. Two sources of such playbooks: the
invalid suite (whose warning-only cases pass check) and mutated real playbooks.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from noetl_compile.check import check_paths, check_results, read_file
from noetl_compile.compile import compile_result
from tests.fuzz_mutations import mutated_playbook

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("airflow")


def _dagbag(folder: Path):
    """Parse the folder as the DAG processor does: import every file, then serialize every DAG.

    The processor stores a DAG only in its serialized form, and a DAG that fails to serialize
    is an import error there too (``_serialize_dags`` in airflow/dag_processing/processor.py).
    """
    from airflow.models.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization, LazyDeserializedDAG

    bag = DagBag(dag_folder=str(folder))
    for dag in bag.dags.values():
        try:
            LazyDeserializedDAG(data=DagSerialization.to_dict(dag))
        except Exception as error:  # noqa: BLE001 - every failure is what the processor reports
            bag.import_errors[dag.fileloc] = f"serialization failed: {error!r}"
    return bag


def test_invalid_suite_cases_check_accepts_import(tmp_path: Path) -> None:
    results, _ = check_paths([str(ROOT / "tests" / "invalid")])
    accepted = [r for r in results if r.playbook is not None and not r.has_errors]
    assert len(accepted) >= 20
    for index, result in enumerate(accepted):
        text, _ = compile_result(result, Path(result.path).name)
        (tmp_path / f"case_{index:03}.py").write_text(text, encoding="utf-8")
    bag = _dagbag(tmp_path)
    assert not bag.import_errors, "\n".join(
        f"{path}: {error.strip().splitlines()[-1]}" for path, error in bag.import_errors.items()
    )
    assert len(bag.dags) == len(accepted)


@pytest.mark.corpus
@settings(
    max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
@given(mutated_playbook())
def test_mutated_playbooks_check_accepts_import(tmp_path_factory, text: str) -> None:
    importlib.import_module("airflow")
    folder = tmp_path_factory.mktemp("mutated")
    source = folder / "playbook.yaml"
    source.write_text(text, encoding="utf-8")
    result = read_file(str(source))
    check_results([result])
    if result.playbook is None or result.has_errors:
        return  # check refuses it: nothing is compiled
    dag, _ = compile_result(result, "playbook.yaml")
    out = folder / "dags"
    out.mkdir()
    (out / "playbook.py").write_text(dag, encoding="utf-8")
    bag = _dagbag(out)
    assert not bag.import_errors, next(iter(bag.import_errors.values())).strip().splitlines()[-1]
    assert len(bag.dags) == 1
