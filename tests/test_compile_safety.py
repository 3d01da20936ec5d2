"""No playbook string can inject code into a generated DAG file.

Hypothesis generates playbooks whose every name and value is hostile (quotes, triple quotes,
backslashes, newlines and other line breaks, ``{{ }}``, ``__import__``, unicode, very long
text) and asserts that each generated file parses, contains only the statements, names and
calls the emitter is allowed to write, imports with Airflow, and carries every payload value
through verbatim.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
from pathlib import Path

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from noetl_compile.check import read_file
from noetl_compile.compile import compile_result

HOSTILE = [
    '"',
    "'",
    '"""',
    "'''",
    "\\",
    "\\n",
    "\n",
    "\r\n",
    "\u2028",
    "\x00",
    "\t",
    "#",
    "# comment",
    "{{ x }}",
    "{% raw %}{{ y }}{% endraw %}",
    "}}",
    "{{",
    "__import__('os').system('id')",
    "\"); import os; os.system('id'); (\"",
    "'''; raise SystemExit; '''",
    '"""\nimport os\n"""',
    "${HOME}",
    "PAYLOADS",
    "READS",
    "dag",
    "DAG",
    "__doc__",
    "params",
    "run_id",
    "ti",
    "class",
    "def",
    "None",
    "é",
    "日本語",
    "\U0001f600",
    "a" * 300,
    ".",
    "/",
    "a/b.c d",
    "-",
    "0",
    "1e9",
]
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)
hostile = st.one_of(
    st.sampled_from(HOSTILE),
    _text,
    st.lists(st.sampled_from(HOSTILE), min_size=2, max_size=4).map("".join),
)
scalar = st.one_of(hostile, st.integers(), st.floats(allow_nan=True), st.booleans(), st.none())
value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(hostile, inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def playbooks(draw):
    names = draw(st.lists(hostile, min_size=2, max_size=5, unique=True))
    names = ["start", *[n for n in names if n != "start"]]
    steps = []
    for index, name in enumerate(names):
        step = {
            "step": name,
            "desc": draw(hostile),
            "tool": {
                "kind": "python",
                "code": draw(hostile),
                "input": draw(st.dictionaries(hostile, value, max_size=3)),
            },
        }
        if draw(st.booleans()):
            step["set"] = {f"ctx.{draw(hostile)}": draw(value)}
        targets = names[index + 1 : index + 3]
        if index > 0 and draw(st.booleans()):
            targets.append(names[index - 1])  # a back edge: a cyclic region
        arcs = [{"step": t, "when": draw(st.one_of(st.none(), hostile))} for t in targets]
        if arcs:
            step["next"] = {
                "spec": {"mode": draw(st.sampled_from(["exclusive", "inclusive"]))},
                "arcs": arcs,
            }
        if index > 0 and draw(st.integers(0, 4)) == 0:
            step["loop"] = {
                "in": draw(hostile),
                "iterator": "item",
                "spec": {"mode": draw(st.sampled_from(["sequential", "parallel"]))},
            }
        steps.append(step)
    return {
        "apiVersion": "noetl.io/v2",
        "kind": "Playbook",
        "metadata": {"name": draw(hostile), "path": draw(hostile), "description": draw(hostile)},
        "workload": draw(st.dictionaries(hostile, value, max_size=4)),
        "workflow": steps,
    }


ALLOWED_CALLS = {"DAG", "Param", "TaskGroup", "float"}
ALLOWED_ATTRIBUTES = {"partial", "expand", "output"}


def _literal_only(node: ast.AST) -> bool:
    """Dict/List/Constant trees (and float("nan"/"inf"), unary minus) — plain data, nothing else."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal_only(k) for k in node.keys) and all(
            map(_literal_only, node.values)
        )
    if isinstance(node, ast.List):
        return all(map(_literal_only, node.elts))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _literal_only(node.operand)
    if isinstance(node, ast.Call):
        return (
            isinstance(node.func, ast.Name)
            and node.func.id == "float"
            and not node.keywords
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in ("nan", "inf")
        )
    return False


def assert_only_allowed_code(text: str) -> None:
    tree = ast.parse(text)
    body = tree.body
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)  # docstring
    imported: set[str] = set()
    assigned: set[str] = set()
    for statement in body[1:]:
        if isinstance(statement, ast.ImportFrom):
            assert statement.module == "airflow.sdk" or statement.module.startswith(
                "airflow_plugin.operators."
            ), statement.module
            imported |= {alias.name for alias in statement.names}
            assert all(alias.asname is None for alias in statement.names)
        elif isinstance(statement, ast.Assign):
            assert [t.id for t in statement.targets if isinstance(t, ast.Name)] in (
                ["PAYLOADS"],
                ["READS"],
            )
            assert _literal_only(statement.value)
        else:
            assert isinstance(statement, ast.With), ast.dump(statement)[:200]
    for node in ast.walk(tree):
        if isinstance(
            node,
            (
                ast.Import,
                ast.FunctionDef,
                ast.Lambda,
                ast.ClassDef,
                ast.AsyncFunctionDef,
                ast.Global,
                ast.Nonlocal,
                ast.Delete,
                ast.Try,
                ast.Raise,
                ast.JoinedStr,
            ),
        ):
            raise AssertionError(f"forbidden statement {type(node).__name__}")  # noqa: TRY004
        if isinstance(node, ast.Assign):
            assigned |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            assigned.add(node.optional_vars.id)
        if isinstance(node, ast.Attribute):
            assert node.attr in ALLOWED_ATTRIBUTES, node.attr
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                assert func.id in ALLOWED_CALLS | imported, func.id
            else:
                assert isinstance(func, ast.Attribute) and func.attr in ("partial", "expand"), (
                    ast.dump(func)
                )
        if isinstance(node, ast.Subscript):
            assert isinstance(node.value, ast.Name) and node.value.id in ("PAYLOADS", "READS")
            assert isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            assert node.id in ALLOWED_CALLS | imported | assigned | {
                "__doc__",
                "None",
                "True",
                "False",
            }, node.id


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"noetlc_safety_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@settings(
    max_examples=int(os.environ.get("NOETLC_SAFETY_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(playbooks())
def test_hostile_playbooks_compile_to_safe_files(tmp_path_factory, playbook) -> None:
    importlib.import_module("airflow")
    folder = tmp_path_factory.mktemp("hostile")
    source = folder / "playbook.yaml"
    source.write_text(
        yaml.safe_dump(playbook, allow_unicode=True, sort_keys=False), encoding="utf-8"
    )
    result = read_file(str(source))
    assume(result.playbook is not None and result.playbook.steps)
    text, ir = compile_result(result, "hostile/playbook.yaml")
    assert_only_allowed_code(text)
    target = folder / "dag.py"
    target.write_text(text, encoding="utf-8")
    module = _import(target)
    # Compared as JSON text so that NaN (never equal to itself) compares too.
    assert json.dumps(module.PAYLOADS) == json.dumps({unit.id: unit.payload for unit in ir.units})
    assert json.dumps(module.READS) == json.dumps({unit.id: unit.reads for unit in ir.units})
    assert module.dag.dag_id == ir.dag_id
    outcome = {ir.outcome_task} if ir.outcome_watch else set()  # lower/outcome.py
    assert {t.task_id for t in module.dag.tasks} == {
        unit.full_id(t.task_id) for unit in ir.units for t in unit.tasks
    } | outcome


def test_a_loop_limit_past_a_sql_integer_is_clamped(tmp_path) -> None:
    # The scheduler binds max_active_tis_per_dagrun into SQL: 10**23 would overflow the column.
    source = tmp_path / "p.yaml"
    source.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: p}\nworkflow:\n"
        "  - step: start\n    loop:\n      in: [1, 2]\n      iterator: x\n"
        "      spec: {mode: parallel, max_in_flight: 100000000000000000000000}\n"
        "    tool: {kind: noop}\n",
        encoding="utf-8",
    )
    _, ir = compile_result(read_file(str(source)), "p.yaml")
    (body,) = [t for u in ir.units for t in u.tasks if "max_active_tis_per_dagrun" in t.kwargs]
    assert body.kwargs["max_active_tis_per_dagrun"] == 2**31 - 1
