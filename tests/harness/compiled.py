"""One playbook text compiled the way a user compiles it (``noetlc compile``), for the tests that
then run the DAG file with ``dag.test()`` (the ``run_dag`` fixture of tests/conftest.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from noetl_compile.cli import main


def compile_playbook(yaml_text: str, folder: Path, name: str) -> tuple[str, str]:
    """``yaml_text`` (dedented) as ``folder/<name>.yaml``, compiled into ``folder/dags``, which
    must then hold exactly one DAG file: (that file's source, the DAG id it declares)."""
    source = folder / f"{name}.yaml"
    source.write_text(textwrap.dedent(yaml_text))
    out = folder / "dags"
    assert main(["compile", str(source), "-o", str(out)]) == 0
    (dag_file,) = out.glob("*.py")
    text = dag_file.read_text()
    return text, text.split('dag_id="', 1)[1].split('"', 1)[0]


def playbook_runner(run_dag: Callable[..., Any], folder: Path, catalog: str) -> Callable[..., Any]:
    """``run(name, yaml_text, conf=None)``: compile the playbook and run DAG ``<catalog>.<name>``
    (its ``metadata.path`` must be ``<catalog>/<name>``: a DAG id the compiler did not give
    fails the run)."""

    def run(name: str, yaml_text: str, conf: Any = None) -> Any:
        source, _ = compile_playbook(yaml_text, folder, name)
        return run_dag(source, f"{catalog}.{name}", conf)

    return run
