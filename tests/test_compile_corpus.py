"""The whole shared corpus through `noetlc compile`: every playbook `check` accepts compiles,
all generated files load in one DagBag with zero import errors and pass validation, acyclic
loop-free playbooks get one task per step, and compiling is byte-for-byte deterministic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noetl_compile.compile import compile_paths

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("NOETLC_CORPUS", ROOT.parent / "shared" / "corpus"))

# Loads every DAG file of a folder in ONE DagBag under a throwaway AIRFLOW_HOME.
DAGBAG_PROBE = r"""
import json, os, sys, tempfile, time
home = tempfile.mkdtemp(prefix="noetlc-dagbag-")
os.environ.update(AIRFLOW_HOME=home, AIRFLOW__CORE__LOAD_EXAMPLES="False",
                  AIRFLOW__CORE__DAGS_FOLDER=sys.argv[1], AIRFLOW__CORE__UNIT_TEST_MODE="True",
                  AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db")
from airflow.dag_processing.dagbag import DagBag
started = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1], safe_mode=False)
seconds = time.perf_counter() - started
invalid = {}
for dag_id, dag in bag.dags.items():
    try:
        dag.validate()
    except Exception as exc:
        invalid[dag_id] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"dags": len(bag.dags), "tasks": sum(len(d.tasks) for d in bag.dags.values()),
                  "files": len(bag.dagbag_stats), "import_errors": bag.import_errors,
                  "invalid": invalid, "seconds": seconds}))
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("dags")
    report = compile_paths([str(CORPUS)], str(out))
    return report, out


def test_every_accepted_playbook_compiles(compiled) -> None:
    report, _ = compiled
    lowering_failures = [d for d in report.diagnostics if d.code == "L701"]
    assert not lowering_failures, lowering_failures
    failed = set(report.failed)
    with_errors = {d.path for d in report.diagnostics if d.severity.label == "error"}
    assert failed == with_errors  # only files `check` rejects are left out
    assert len(report.files) + len(report.failed) == report.playbooks
    print(
        f"\ncorpus: {report.playbooks} playbooks, {len(report.files)} compiled, "
        f"{len(report.failed)} rejected by check"
    )


def test_all_generated_files_load_in_one_dagbag(compiled) -> None:
    report, out = compiled
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

    results, _ = check_paths([str(CORPUS)])
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
