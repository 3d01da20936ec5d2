"""What a compiled DAG shows in the Airflow UI: tool kinds, edge labels, item names, docs."""

from __future__ import annotations

import ast
from pathlib import Path

from noetl_compile.cli import main
from noetl_compile.lower import presentation

ROOT = Path(__file__).resolve().parents[1]


def _compile(tmp_path: Path, name: str) -> str:
    out = tmp_path / "dags"
    assert main(["compile", str(ROOT / "playbooks" / f"{name}.yaml"), "-o", str(out)]) == 0
    return (out / f"{name}.py").read_text()


def _calls(source: str, func: str) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == func
    ]


def _kwargs(call: ast.Call) -> dict:
    return {
        k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg not in ("payload", "reads")
    }


def test_every_step_names_its_tool_kind_and_branches_carry_their_guard(tmp_path):
    source = _compile(tmp_path, "branching")
    steps = {(_kwargs(c))["task_id"]: _kwargs(c) for c in _calls(source, "NoetlStepOperator")}
    assert steps["start"]["task_display_name"] == "start (python)"
    assert all(s["tool_kind"] == "python" for s in steps.values())
    labels = sorted(ast.literal_eval(c.args[0]) for c in _calls(source, "Label"))
    assert labels == ["amount > 200", "else", "region == 'us'", "start.large"]
    assert 'start >> Label("start.large") >> large_order' in source
    # An unguarded inclusive arc has no label and stays in the plain dependency lines.
    assert "large_order >> notify_sales\n" in source


def test_loop_instances_are_named_by_item_and_loop_done_labels_the_exit(tmp_path):
    source = _compile(tmp_path, "loop_parallel")
    assert f'map_index_template="{presentation.MAP_INDEX_TEMPLATE}"' in source
    assert 'measure >> Label("loop.done") >> report' in source
    assert 'task_display_name="body (python)"' in source


def test_doc_md_tags_and_owner_come_from_the_playbook(tmp_path):
    source = _compile(tmp_path, "gates")
    tree = ast.parse(source)
    dag = next(
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "DAG"
    )
    kw = {k.arg: k.value for k in dag.keywords}
    doc = ast.literal_eval(kw["doc_md"])
    assert doc.startswith("# gates\n\nInput, sleep and approval gates\n")
    assert "- Catalog path: `examples/gates`" in doc and "- Source: `gates.yaml`" in doc
    assert ast.literal_eval(kw["tags"]) == ["noetl", "canonical", "examples/gates"]
    assert 'task_display_name="approve (gate: approve)"' in source


def test_owner_and_hostile_strings_stay_data(tmp_path):
    playbook = tmp_path / "p.yaml"
    playbook.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\n"
        'metadata:\n  name: p\n  path: a/p\n  owner: "data-team\\")\\nimport os #"\n'
        '  description: "\\"\\"\\" + __import__(\'os\').system(\'x\') #"\n'
        "workflow:\n"
        "  - step: start\n    tool: {kind: python, code: 'result = 1'}\n"
        "    next:\n      spec: {mode: exclusive}\n      arcs:\n"
        '        - step: b\n          when: "{{ 1 > 0 }}\\") >> __import__(\'os\')"\n'
        "        - step: c\n"
        "  - step: b\n    tool: {kind: noop}\n  - step: c\n    tool: {kind: noop}\n"
    )
    out = tmp_path / "dags"
    assert main(["compile", str(playbook), "-o", str(out)]) == 0
    source = next(out.glob("*.py")).read_text()
    tree = ast.parse(source)  # still valid Python
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert all((n.module or "").startswith(("airflow.sdk", "airflow_plugin")) for n in imports), (
        "a playbook string became an import"
    )
    dag = next(
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "DAG"
    )
    kw = {k.arg: k.value for k in dag.keywords}
    assert ast.literal_eval(kw["default_args"]) == {"owner": 'data-team") import os #'}
    labels = [ast.literal_eval(c.args[0]) for c in _calls(source, "Label")]
    assert labels == ["{{ 1 > 0 }}\") >> __import__('os')", "else"]


def test_the_compiler_and_the_plugin_agree_on_the_map_index_template():
    from airflow_plugin.operators import presentation as plugin_side

    assert presentation.MAP_INDEX_TEMPLATE == plugin_side.MAP_INDEX_TEMPLATE


def test_item_labels_prefer_a_name_and_never_show_a_secret():
    from airflow_plugin.operators.presentation import item_label, kind_color

    assert item_label(["Paris"]) == "Paris"
    assert item_label([{"id": 7, "city": "Oslo"}]) == "7"
    assert item_label([{"password": "hunter2", "x": 1}]) == '{"password": "***", "x": 1}'
    assert item_label([1, 2, 3]) == "1 .. 3 (3 items)"
    assert len(item_label(["x" * 500])) == 60
    assert kind_color("http+python") == kind_color("http") != kind_color("python")
