"""A gate field the operators read when the DAG file is parsed (assignees, on_timeout, the approve
default, the input form's params and every part of each param) is validated by check with the
operator's rule: for at least 200 generated values per field, many of them templates in every
place a template fits, a playbook that checks clean compiles to a DAG file Airflow imports and
serializes, and every value holding a template is refused (C510) instead of kept as text.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from noetl_compile.check import check_results, read_file
from noetl_compile.compile import compile_result
from tests.test_compiles_imports import _dagbag

pytest.importorskip("airflow")

PER_FIELD = 200
HEAD = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {{name: {name}, path: {name}}}\n"
TEMPLATES = ("{{ approvers }}", "{{ x }}", "{%- if a %}b{% endif %}", "x{{ y }}", "{{ 'a' }}")
LOOKALIKES = ("{ {x} }", "{x}", "{#", "approve", "reject", "fail", "default", "alice", 1, 0.5, None)


def _value(rng: random.Random, depth: int = 0):
    choice = rng.random()
    if choice < 0.4:
        return rng.choice(TEMPLATES)
    if choice < 0.6 and depth < 2:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if choice < 0.7 and depth < 2:
        return {rng.choice(("type", "default", "x", "{{ k }}")): _value(rng, depth + 1)}
    return rng.choice(LOOKALIKES)


def _param(rng: random.Random, part: str):
    spec = {"type": "number", "default": 0.1, "minimum": 0, "maximum": 1, "description": "d"}
    spec[part] = _value(rng)
    return {"discount": spec}


def _gate(field: str, value) -> dict:
    if field in ("assignees", "on_timeout", "default"):
        tool = {"kind": "gate", "gate": "approve", "subject": "ok?", "timeout": "1d", field: value}
    else:
        tool = {"kind": "gate", "gate": "input", "subject": "how much?", "timeout": "1d"}
        tool["params"] = value
    return tool


FIELDS = ("assignees", "on_timeout", "default", "params") + tuple(
    f"params.{part}" for part in ("type", "default", "enum", "minimum", "maximum", "description")
)


def _contains_template(value) -> bool:
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, list):
        return any(_contains_template(v) for v in value)
    if isinstance(value, dict):
        return any(_contains_template(k) or _contains_template(v) for k, v in value.items())
    return False


def test_gate_fields_check_clean_imports(tmp_path: Path) -> None:
    rng = random.Random(23)
    out = tmp_path / "dags"
    out.mkdir()
    clean, refused_templates, per_field = 0, 0, dict.fromkeys(FIELDS, 0)
    for field in FIELDS:
        for index in range(PER_FIELD):
            if field.startswith("params."):
                value = _param(rng, field.split(".", 1)[1])
            elif field == "params":
                value = _value(rng)
            else:
                value = _value(rng)
            tool = _gate(field, value)
            name = f"g_{field.replace('.', '_')}_{index}"
            text = (
                HEAD.format(name=name)
                + "workflow:\n  - step: start\n    tool: "
                + json.dumps(tool)
                + "\n"
            )
            source = tmp_path / f"{field}_{index}.yaml"
            source.write_text(text, encoding="utf-8")
            per_field[field] += 1
            result = read_file(str(source))
            check_results([result])
            templated = _contains_template(value)
            if result.playbook is None or result.has_errors:
                if templated:
                    codes = {d.code for d in result.diagnostics}
                    assert "C510" in codes, (text, codes)
                    refused_templates += 1
                continue
            assert not templated, f"a template in {field} checked clean:\n{text}"
            dag, _ = compile_result(result, source.name)
            (out / f"{field.replace('.', '_')}_{index}.py").write_text(dag, encoding="utf-8")
            clean += 1
    assert min(per_field.values()) >= PER_FIELD
    assert clean >= 100 and refused_templates >= 500, (clean, refused_templates)
    bag = _dagbag(out)
    assert not bag.import_errors, "\n".join(
        f"{path}: {error.strip().splitlines()[-1]}" for path, error in bag.import_errors.items()
    )
    assert len(bag.dags) == clean
