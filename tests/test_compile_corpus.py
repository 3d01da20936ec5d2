"""The whole shared corpus through `noetlc compile`: every playbook `check` accepts compiles,
the generated files of each corpus project (top-level folder: one catalog) load in one DagBag
with zero import errors and pass validation, acyclic loop-free playbooks get one task per step,
compiling is byte-for-byte deterministic, and a playbook's DAG id is the same whether it is
compiled with its own project or with the whole corpus.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noetl_compile.compile import compile_paths
from tests.corpus import CORPUS, ROOT, corpus_projects

pytestmark = pytest.mark.corpus

# Loads every DAG file of a folder in ONE DagBag under a throwaway AIRFLOW_HOME, validates and
# serializes every DAG as the DAG processor does.
DAGBAG_PROBE = r"""
import json, os, sys, tempfile, time
home = tempfile.mkdtemp(prefix="noetlc-dagbag-")
os.environ.update(AIRFLOW_HOME=home, AIRFLOW__CORE__LOAD_EXAMPLES="False",
                  AIRFLOW__CORE__DAGS_FOLDER=sys.argv[1], AIRFLOW__CORE__UNIT_TEST_MODE="True",
                  AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db")
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization, LazyDeserializedDAG
started = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1], safe_mode=False)
seconds = time.perf_counter() - started
invalid = {}
for dag_id, dag in bag.dags.items():
    try:
        dag.validate()
        # the DAG processor stores only the serialized DAG: failing that is an import error
        LazyDeserializedDAG(data=DagSerialization.to_dict(dag))
    except Exception as exc:
        invalid[dag_id] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"dags": len(bag.dags), "tasks": sum(len(d.tasks) for d in bag.dags.values()),
                  "files": len(bag.dagbag_stats), "import_errors": bag.import_errors,
                  "invalid": invalid, "seconds": seconds}))
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Each corpus project compiled alone into its own DAG folder: project name -> (report, out)."""
    found = {}
    for project in corpus_projects():
        out = tmp_path_factory.mktemp(f"dags-{project.name}")
        found[project.name] = (compile_paths([str(project)], str(out)), out)
    return found


def test_every_accepted_playbook_compiles(compiled) -> None:
    for name, (report, _) in compiled.items():
        lowering_failures = [d for d in report.diagnostics if d.code == "L701"]
        assert not lowering_failures, lowering_failures
        failed = set(report.failed)
        with_errors = {d.path for d in report.diagnostics if d.severity.label == "error"}
        assert failed == with_errors  # only files `check` rejects are left out
        assert len(report.files) + len(report.failed) == report.playbooks
        print(
            f"\n{name}: {report.playbooks} playbooks, {len(report.files)} compiled, "
            f"{len(report.failed)} rejected by check"
        )


def test_dag_ids_do_not_depend_on_the_other_files_of_the_run(compiled, tmp_path) -> None:
    whole = compile_paths([str(CORPUS)], str(tmp_path / "whole"), check_only=True)
    alone = {
        os.path.abspath(path): dag_id
        for report, _ in compiled.values()
        for path, dag_id in report.dag_ids.items()
    }
    together = {os.path.abspath(path): dag_id for path, dag_id in whole.dag_ids.items()}
    assert len(together) > 250 and together == alone
    # Every DAG written alone carries that id in its file; compiled together, a playbook is
    # either the same DAG or left out for a catalog conflict (R208/R209), never renamed.
    written = {
        os.path.abspath(f.source): f.dag_id for report, _ in compiled.values() for f in report.files
    }
    assert written and all(alone[path] == dag_id for path, dag_id in written.items())
    for compiled_file in whole.files:
        assert compiled_file.dag_id == written[os.path.abspath(compiled_file.source)]
    conflicts = {os.path.abspath(d.path) for d in whole.diagnostics if d.code in ("R208", "R209")}
    failed_alone = {os.path.abspath(p) for report, _ in compiled.values() for p in report.failed}
    left_out = {os.path.abspath(p) for p in whole.failed} - failed_alone
    assert left_out and left_out <= conflicts


@pytest.mark.parametrize("project", [p.name for p in corpus_projects()])
def test_all_generated_files_load_in_one_dagbag(compiled, project: str) -> None:
    report, out = compiled[project]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    probe = subprocess.run(
        [sys.executable, "-c", DAGBAG_PROBE, str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr[-4000:]
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    print(
        f"\nDagBag: {result['files']} files, {result['dags']} DAGs, {result['tasks']} tasks, "
        f"{len(result['import_errors'])} import errors, {len(result['invalid'])} invalid, "
        f"loaded in {result['seconds']:.1f} s"
    )
    assert result["import_errors"] == {}
    assert result["invalid"] == {}
    assert result["dags"] == len(report.files)


def test_acyclic_loop_free_playbooks_get_one_task_per_step(compiled) -> None:
    from noetl_compile.check import check_paths
    from noetl_compile.lower import lower

    results = [r for project in corpus_projects() for r in check_paths([str(project)])[0]]
    checked = 0
    for result in results:
        if result.has_errors or result.playbook is None:
            continue
        ir = lower(result.playbook, source=result.path, source_sha256="")
        if ir.regions or any(step.loop for step in result.playbook.steps if step.name in ir.graph):
            continue
        checked += 1
        tasks = [t for u in ir.units for t in u.tasks]
        # One task per reachable step, nothing added: no routers, no joins, no helper tasks.
        assert len(tasks) == ir.graph.number_of_nodes(), result.path
        assert all(len(u.steps) == 1 and len(u.tasks) == 1 for u in ir.units), result.path
        edges = {(a, b) for u in ir.units for a in u.upstream for b in [u.id]}
        step_edges = {(ir.unit_of_step(a).id, ir.unit_of_step(b).id) for a, b in ir.graph.edges}
        assert edges == step_edges, result.path
    print(f"\nstructure: {checked} acyclic loop-free playbooks, one task per step")
    assert checked > 100


def _noetlc(args: list[str], cwd: Path, seed: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=seed)
    return subprocess.run(
        [sys.executable, "-m", "noetl_compile", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.py"))}


def test_compiling_twice_from_another_directory_is_byte_identical(tmp_path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    # Absolute paths from the filesystem root vs relative paths from the corpus' parent, with
    # different hash seeds: set iteration order must not leak into the output.
    run1 = _noetlc(["compile", str(CORPUS), "-o", str(first)], Path("/"), "1")
    run2 = _noetlc(["compile", CORPUS.name, "-o", str(second)], CORPUS.parent, "2")
    assert run1.stdout.splitlines()[-1] == run2.stdout.splitlines()[-1]
    one, two = _tree(first), _tree(second)
    assert one and one.keys() == two.keys()
    different = [name for name in one if one[name] != two[name]]
    assert not different, different[:5]
    # ... and a third run over an up-to-date folder rewrites nothing.
    run3 = _noetlc(["compile", str(CORPUS), "-o", str(first), "--check"], tmp_path, "3")
    assert "up to date" in run3.stdout
