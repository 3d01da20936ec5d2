"""What a DAG file's parse loads: the operators and the typed step's decode, never the runtime
that only a task's run needs (the engine profiles, the step runner, the interpreter, the tools,
the template renderer). Each of those is a cost on every parse that is not pre-imported; two
had crept in (the loop operators' module loaded the engine profiles, a nested call's
constructor loaded runtime.nested with the interpreter's events and the tool registry)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from noetl_compile.compile import compile_paths

ROOT = Path(__file__).resolve().parents[2]

# Modules a parse must not load (a name, or a package: its modules too).
RUN_ONLY = (
    "noetl_compile.engine_profiles",
    "noetl_compile.engine_behaviours",
    "airflow_plugin.runtime.step",
    "airflow_plugin.runtime.nested",
    "airflow_plugin.runtime.interpreter",
    "airflow_plugin.runtime.loop",
    "airflow_plugin.tools",
    "airflow_plugin.templating.render",
    "jinja2",
)

PARSE = """
import json, runpy, sys
import airflow
before = set(sys.modules)
for path in json.loads(sys.argv[1]):
    runpy.run_path(path)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_a_dag_parse_loads_no_runtime(tmp_path: Path) -> None:
    report = compile_paths([str(ROOT / "playbooks")], str(tmp_path / "dags"))
    files = sorted(str(f.output) for f in report.files)
    sources = {Path(f).read_text(encoding="utf-8") for f in files}
    # The playbooks hold every operator a DAG file can name: the check covers each constructor.
    for operator in ("Step", "Loop", "Cursor", "Region", "Playbook", "Approval", "Outcome"):
        assert any(f"Noetl{operator}" in text for text in sources), operator
    env = dict(os.environ, PYTHONPATH=str(ROOT), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    ran = subprocess.run(
        [sys.executable, "-c", PARSE, json.dumps(files)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    loaded = json.loads(ran.stdout.strip().splitlines()[-1])
    assert "noetl_compile.step_decode" in loaded  # the constructors ran their decode
    wrong = [m for m in loaded if any(m == n or m.startswith(n + ".") for n in RUN_ONLY)]
    assert not wrong, f"a DAG parse loaded what only a run needs: {wrong}"
