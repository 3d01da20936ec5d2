"""The Airflow matrix: constraints kept for every supported version, and the pieces of its smoke
suite that run without a version's virtualenv.

The smoke suite itself (scripts/smoke-airflow.sh X.Y.Z: compile every example, import every DAG,
`noetlc run` each README example, one deployed run per executor, in that version's own cached
virtualenv) runs from scripts/test.sh beside pytest when NOETLC_AIRFLOW_MATRIX=1 (.ci/run sets
it), for every version with constraints other than the project's own minor and 3.0
(scripts/matrix-versions.sh; 3.0 is smoked by hand).
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = sorted(p.stem.removeprefix("airflow-") for p in (ROOT / "constraints").glob("*.txt"))


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"noetlc_{name}", ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


examples = _module("readme_examples")


def test_constraints_are_kept_for_the_supported_versions() -> None:
    minors = {".".join(v.split(".")[:2]) for v in VERSIONS}
    assert {"3.0", "3.1", "3.2", "3.3"} <= minors, VERSIONS


def _matrix(own: str, root: Path = ROOT) -> list[str]:
    done = subprocess.run(
        ["bash", str(root / "scripts" / "matrix-versions.sh"), own],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.split()


def test_ci_matrix_smokes_the_supported_minors_but_the_own_and_3_0() -> None:
    # scripts/test.sh's selection: 3.1 and 3.2 beside the full suite on 3.3; 3.0 (constraints
    # kept, all but gates) is smoked by hand, not in CI's 45 minutes.
    assert "3.0.6" in VERSIONS
    assert _matrix("3.3.2") == ["3.1.8", "3.2.2"]
    # the project's own minor, whichever it is, gets the full suite instead of a smoke
    assert _matrix("3.2.0") == ["3.1.8", "3.3.2"]


def test_ci_matrix_takes_a_new_constraints_file(tmp_path: Path) -> None:
    copy = tmp_path / "checkout"
    (copy / "scripts").mkdir(parents=True)
    (copy / "constraints").mkdir()
    (copy / "scripts" / "matrix-versions.sh").write_bytes(
        (ROOT / "scripts" / "matrix-versions.sh").read_bytes()
    )
    for version in ("3.0.7", "3.1.9", "3.3.2", "3.4.0"):
        (copy / "constraints" / f"airflow-{version}.txt").write_text(f"apache-airflow=={version}\n")
    assert _matrix("3.3.2", copy) == ["3.1.9", "3.4.0"]


def test_constraints_pin_every_package_once() -> None:
    for version in VERSIONS:
        lines = (ROOT / "constraints" / f"airflow-{version}.txt").read_text().splitlines()
        pins = [line.split("==")[0].lower() for line in lines if line and not line.startswith("#")]
        assert all("==" in line for line in lines if line and not line.startswith("#")), version
        assert len(pins) == len(set(pins)), version
        assert f"apache-airflow=={version}" in lines, version


def test_the_readme_block_lists_every_bundled_playbook_once() -> None:
    lines = examples.examples_block()
    runs = [examples.command(line)[1] for line in lines]
    assert runs[0] == ["demo", "up"] and runs[-1] == ["demo", "down"]
    shown = sorted(Path(args[1]).name for args in runs if args[0] == "run")
    assert shown == sorted(p.name for p in (ROOT / "playbooks").glob("*.yaml"))


def test_readme_reader_refuses_a_missing_or_doubled_block(tmp_path: Path) -> None:
    block = "```sh\nnoetlc demo up\nnoetlc run a.yaml\n```\n"
    for text, count in (("# nothing\n", 0), (block + block, 2)):
        readme = tmp_path / "README.md"
        readme.write_text(text)
        with pytest.raises(examples.ReadmeError, match=f"{count} ```sh blocks"):
            examples.examples_block(readme)
    with pytest.raises(examples.ReadmeError, match="not a noetlc command"):
        examples.command("A=1 python x.py")
    assert examples.command("AIRFLOW_VAR_T=x noetlc run p.yaml  # c") == (
        {"AIRFLOW_VAR_T": "x"},
        ["run", "p.yaml"],
    )


def test_broken_promises_compares_the_report_with_the_header(tmp_path: Path) -> None:
    playbook = tmp_path / "p.yaml"
    playbook.write_text('# Result: end {"n": 2}\n# Result: total 5\nkind: Playbook\n')
    report = 'success in 1.0s\nresults:\n  end    {"n": 2, "extra": 1}\n  total  5\n'
    assert examples.broken_promises(playbook, report) == []
    wrong = report.replace('"n": 2', '"n": 3').replace("total  5", "total  6")
    assert examples.broken_promises(playbook, wrong) == [
        "end = {'n': 3}, the header promises {'n': 2}",
        "total = 6, the header promises 5",
    ]
    assert examples.broken_promises(playbook, "failed\n") == [
        "end: not in the report's results",
        "total: not in the report's results",
    ]
    # A nested object promises only the keys it names, at every level.
    playbook.write_text('# Result: read {"command_0": {"rows": [1]}}\nkind: Playbook\n')
    nested = 'success in 1.0s\nresults:\n  read  {"command_0": {"rows": [1], "row_count": 1}}\n'
    assert examples.broken_promises(playbook, nested) == []
    assert examples.broken_promises(playbook, nested.replace("[1]", "[2]")) == [
        "read = {'command_0': {'rows': [2]}}, the header promises {'command_0': {'rows': [1]}}"
    ]
    playbook.write_text('# Result: read {"rows": [1], ...}\nkind: Playbook\n')
    with pytest.raises(examples.ReadmeError, match=r"p\.yaml: its `# Result: read` is no JSON"):
        examples.broken_promises(playbook, nested)
    playbook.write_text("kind: Playbook\n")
    assert examples.broken_promises(playbook, report) == ["p.yaml promises no result in its header"]


def test_smoke_venv_is_keyed_by_constraints_extras_and_checkout(tmp_path: Path) -> None:
    # The cached virtualenv scripts/smoke-airflow.sh uses (NOETLC_SMOKE_PRINT_VENV=1 prints it
    # and stops): the same path for the same inputs; another for other pins, other extras, or
    # another checkout (a copy of the script and its inputs in tmp_path).
    copy = tmp_path / "checkout"
    (copy / "scripts").mkdir(parents=True)
    (copy / "constraints").mkdir()
    for name in (
        "scripts/smoke-airflow.sh",
        "pyproject.toml",
        f"constraints/airflow-{VERSIONS[0]}.txt",
    ):
        (copy / name).write_bytes((ROOT / name).read_bytes())

    def venv(root: Path) -> str:
        done = subprocess.run(
            ["bash", str(root / "scripts" / "smoke-airflow.sh"), VERSIONS[0]],
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NOETLC_SMOKE_PRINT_VENV": "1"},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout.strip()

    first = venv(copy)
    assert first == venv(copy)
    assert first.startswith(f"{tmp_path}/.cache/noetlc/venvs/af-{VERSIONS[0]}-")
    assert venv(ROOT) != first  # another checkout
    pins = copy / "constraints" / f"airflow-{VERSIONS[0]}.txt"
    pins.write_text(pins.read_text() + "# one more line\n")
    repinned = venv(copy)
    assert repinned != first
    (copy / "pyproject.toml").write_text("# other extras\n")
    assert venv(copy) not in (first, repinned)
    assert not (tmp_path / ".cache").exists()  # printing the path makes nothing
