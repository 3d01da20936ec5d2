"""The wheel a platform installs (docs/deploy.md) holds what a non-editable install needs: the
expression grammar that lives in grammar/ but ships as noetl_compile.grammar (without it
`noetlc compile` fails with ModuleNotFoundError), the execution view's static files, and the
Airflow plugin's entry point. An editable install reads the checkout and cannot show this."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_the_grammar_the_static_files_and_the_plugin(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    [wheel] = tmp_path.glob("noetlc-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        declared = archive.read(entry_points).decode()
    assert {"noetl_compile/grammar/__init__.py", "noetl_compile/grammar/jinja_expr.lark"} <= names
    assert any(n.startswith("airflow_plugin/web/static/") and n.endswith(".js") for n in names)
    assert "[airflow.plugins]\nnoetl = airflow_plugin.plugin:NoetlPlugin" in declared
    packages = {
        p.parent.relative_to(ROOT).as_posix()
        for top in ("noetl_compile", "airflow_plugin")
        for p in (ROOT / top).rglob("__init__.py")
    }
    shipped = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    assert packages | {"noetl_compile/grammar"} <= shipped
