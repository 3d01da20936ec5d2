"""`noetlc schema`: the JSON Schema of each generation, held against the readers.

The corpus and the invalid suite decide: a corpus playbook fails its generation's schema exactly
when check reports a structural error the schema models, and every case of the invalid suite
whose mistake is structural fails it. Validation uses jsonschema (draft 2020-12), the validator
the YAML language server's schemas are written for.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from noetl_compile.check import check_text
from noetl_compile.cli import main
from noetl_compile.load import load_text
from noetl_compile.read import canonical as canonical_reader
from noetl_compile.read import case_v2 as case_v2_reader
from noetl_compile.read import detect_dialect
from noetl_compile.read import v1 as v1_reader
from noetl_compile.read.base import TOOL_KINDS
from noetl_compile.schema import schema_for, schema_text
from tests.corpus import corpus_files

# The corpus and invalid-suite generations, and NoETL 5 (what a construct only it reads selects).
DIALECTS = ("v1", "case-v2", "canonical", "noetl5")
SUITE = Path(__file__).resolve().parent / "invalid"

# Structural codes the schema models: a shape, a type, a value set or a required key of one
# mapping. Each invalid-suite case of these codes must fail the schema; a corpus playbook fails
# it exactly when check reports one of them as an error.
STRUCTURAL = {
    "S101": "required key missing",
    "S102": "wrong type",
    "S104": "empty workflow",
    "S107": "step without tool/next/case",
    "S108": "incomplete loop",
    "S109": "conflicting loop forms",
    "S110": "unknown tool kind",
    "S111": "conditional `next` in case-v2",
    "S112": "value outside its set",
    "S113": "unsupported document",
    "S114": "key of another generation",
}
# S and Y classes of the suite the schema does not decide, and why.
NOT_STRUCTURAL = {
    "S103": "unknown keys are warnings: the engine drops them and the playbook runs, so the "
    "schema allows them and check suggests the key meant",
    "S105": "the entry step is a step *named* start (or entry_step naming a step): a relation "
    "between values, which JSON Schema cannot state",
    "S106": "duplicate step or task names: uniqueness of one field across items (uniqueItems "
    "compares whole items)",
    "S115": "a warning: the playbook runs from its first step",
    "S116": "a warning: a NoETL 5 key that is read but not executed on Airflow is valid structure",
    "S117": "a warning: `result` beside `next` in one case-v2 action is valid structure the engine ignores",
    "S118": "routing in the wrong place (`next` under `tool:` or `loop:`, `arcs` beside `next`): "
    "a tool's and a loop's settings are the checker's (the schema stops at `kind`), and an "
    "unknown step key is one the schema allows (S103)",
    "S119": "an info: the file is read as NoETL 5, and its structure is that generation's",
    "S125": "a warning: step `args` beside a tool's own `args` is valid structure; NoETL 5 drops "
    "the step's where noetlc lays them over (a relation between two keys' values)",
    "Y001": "not YAML: there is no document to validate",
    "Y002": "a duplicate key is gone once the YAML is a JSON value",
    "Y003": "a non-scalar key has no JSON form",
    "Y004": "a recursive alias has no JSON form",
    "Y005": "a tag that does not fit its node is decided while loading",
    "Y006": "an empty document has no mapping to validate",
    "Y007": "a second document: a schema validates one",
    "Y008": "alias expansion is refused while loading",
}
# S101 raised by the tool checks for a tool's own settings (a nested call's empty `path`):
# tools' settings are the checker's, the schema stops at `kind`.
TOOL_SETTING_CASES = {"canonical/042_S101_empty_nested_path"}


@pytest.fixture(scope="module")
def validators() -> dict[str, jsonschema.Draft202012Validator]:
    out = {}
    for dialect in DIALECTS:
        schema = schema_for(dialect)
        jsonschema.Draft202012Validator.check_schema(schema)
        out[dialect] = jsonschema.Draft202012Validator(schema)
    return out


def _errors(validator, data) -> list[str]:
    return [f"{e.json_path}: {e.message[:120]}" for e in validator.iter_errors(data)]


@pytest.mark.corpus
def test_corpus_validates_exactly_when_check_finds_no_structural_error(validators) -> None:
    files = corpus_files()
    assert len(files) >= 250, "the corpus is missing (NOETLC_CORPUS)"
    counts = {"valid": 0, "invalid": 0}
    disagreements = []
    for path in files:
        result = check_text(path.read_text(encoding="utf-8"), str(path))
        data = result.document.data
        if not isinstance(data, dict):
            continue
        dialect = detect_dialect(data)
        errors = _errors(validators[dialect], data)
        structural = [
            f"{d.code} {d.message}"
            for d in result.diagnostics
            if d.code in STRUCTURAL and d.severity.name == "ERROR"
        ]
        counts["invalid" if errors else "valid"] += 1
        if bool(errors) != bool(structural):
            disagreements.append((str(path), dialect, errors[:2], structural[:2]))
    print(f"corpus against its generation's schema: {counts}")
    assert not disagreements
    assert counts["valid"] >= 240


def _suite_cases() -> list[Path]:
    return sorted(p for d in ("v1", "case_v2", "canonical") for p in (SUITE / d).glob("*.yaml"))


def test_every_structural_class_of_the_invalid_suite_fails(validators) -> None:
    failing, passing = {}, {}
    for path in _suite_cases():
        code = path.stem.split("_")[1]
        if code[0] not in "SY":
            continue
        case = f"{path.parent.name}/{path.stem}"
        assert code in STRUCTURAL or code in NOT_STRUCTURAL, f"{case}: classify {code}"
        document = load_text(path.read_text(encoding="utf-8"), str(path))
        data = document.data
        dialect = path.parent.name.replace("_", "-")
        errors = _errors(validators[dialect], data) if isinstance(data, dict) else []
        (failing if errors else passing).setdefault(code, []).append(case)
        if code in STRUCTURAL and case not in TOOL_SETTING_CASES:
            assert errors, f"{case}: a structural mistake the schema accepts"
    print(f"structural classes failing the schema: {sorted(failing)}")
    print(f"classes passing it (not structural): {sorted(passing)}")
    assert set(STRUCTURAL) <= set(failing)


def test_schema_follows_the_readers_tables() -> None:
    from noetl_compile.ast import DIALECTS as READ_DIALECTS
    from noetl_compile.schema import BUILDERS

    # Every dialect the readers know, and NoETL 5 (a generation of the canonical dialect).
    assert tuple(BUILDERS) == (*READ_DIALECTS, "noetl5"), "a generation without a schema builder"
    for dialect, reader in (
        ("v1", v1_reader),
        ("case-v2", case_v2_reader),
        ("canonical", canonical_reader),
    ):
        schema = schema_for(dialect)
        step = schema["$defs"]["step"]["properties"]
        for key in reader.STEP_FOREIGN:
            assert step[key].get("not") == {}, (dialect, key)
        kinds = schema["$defs"]["kind"]["anyOf"][0]["enum"]
        assert set(kinds) == TOOL_KINDS[dialect]
    assert canonical_reader.STEP_KEYS <= set(schema_for("canonical")["$defs"]["step"]["properties"])
    from noetl_compile.read import noetl5 as noetl5_reader
    from noetl_compile.read.base import NOETL5_KINDS

    noetl5 = schema_for("noetl5")["$defs"]
    assert set(noetl5["kind"]["anyOf"][0]["enum"]) == TOOL_KINDS["canonical"] | NOETL5_KINDS
    local = set(noetl5["local_step"]["properties"])
    assert noetl5_reader.STEP_KEYS | noetl5_reader.LOCAL_STEP_KEYS <= local
    assert set(noetl5["tool"]["properties"]["output"]["properties"]) == set(
        noetl5_reader.OUTPUT_KEYS
    )


def test_a_templated_kind_and_a_typo(validators) -> None:
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\nworkflow:\n"
        "  - step: start\n    tool: {kind: '%s'}\n"
    )
    good = load_text(text % "{{ workload.kind }}", "t.yaml").data
    bad = load_text(text % "pyhton", "t.yaml").data
    assert not _errors(validators["canonical"], good)
    assert any("kind" in e for e in _errors(validators["canonical"], bad))


def test_cli_prints_each_schema(capsys) -> None:
    for dialect in DIALECTS:
        assert main(["schema", "--dialect", dialect]) == 0
        out = capsys.readouterr().out
        assert out == schema_text(dialect)
        title = "NoETL 5" if dialect == "noetl5" else dialect
        assert json.loads(out)["title"] == f"NoETL playbook ({title} generation)"
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out)["$id"] == "urn:noetlc:schema:canonical"


NOETL5_FOLDERS = (
    Path(__file__).resolve().parent / "noetl5_dsl" / "playbooks",
    Path(__file__).resolve().parent / "noetl5_dsl" / "server_forms",
    Path(__file__).resolve().parent / "noetl5" / "playbooks",
)


def test_noetl5_playbooks_validate_exactly_when_check_finds_no_structural_error() -> None:
    validator = jsonschema.Draft202012Validator(schema_for("noetl5"))
    jsonschema.Draft202012Validator.check_schema(validator.schema)
    counts = {"valid": 0, "invalid": 0}
    disagreements = []
    for path in sorted(p for folder in NOETL5_FOLDERS for p in folder.rglob("*.yaml")):
        result = check_text(path.read_text(encoding="utf-8"), str(path))
        if result.playbook is None or result.playbook.generation != "noetl5":
            continue  # a Subscription or Mcp document (E003), or a file of another generation
        errors = _errors(validator, result.document.data)
        structural = [d.code for d in result.diagnostics if d.code in STRUCTURAL]
        counts["invalid" if errors else "valid"] += 1
        if bool(errors) != bool(structural):
            disagreements.append((str(path), errors[:2], structural))
    print(f"NoETL 5 playbooks against the noetl5 schema: {counts}")
    assert not disagreements
    assert counts["valid"] >= 7


NOETL5 = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, exposes_as_mcp: false}
%s
workflow:
  - step: start
    tool: {kind: sink}
    next:
      spec: {mode: exclusive, on_no_match: complete}
      arcs: [{step: done}]
  - step: done
"""


@pytest.mark.parametrize(
    "executor, change, code",
    [
        ("", None, None),
        # The local runtime's step `vars`, `when` and `next` list with `args`/`then` entries.
        (
            "executor: {profile: local}",
            ("  - step: done\n", "  - step: done\n    vars: {n: 1}\n    when: '{{ true }}'\n"),
            None,
        ),
        ("", ("on_no_match: complete", "on_no_match: finish"), "S112"),
        # `vars` is the local runtime's: NoETL 5's server has no such step key.
        ("", ("  - step: done\n", "  - step: done\n    vars: {n: 1}\n"), "S114"),
        ("", ("kind: sink", "kind: sinkk"), "S110"),
    ],
)
def test_noetl5_schema_and_check_agree_on_each_shape(executor, change, code) -> None:
    validator = jsonschema.Draft202012Validator(schema_for("noetl5"))
    text = NOETL5 % executor
    if change:
        text = text.replace(*change)
    result = check_text(text, "t.yaml")
    assert result.playbook is not None and result.playbook.generation == "noetl5"
    errors = _errors(validator, result.document.data)
    codes = {d.code for d in result.diagnostics if d.severity.name == "ERROR"}
    assert (code in codes) if code else not codes, result.diagnostics
    assert bool(errors) == bool(code), errors
    if code is None and not executor:
        # NoETL 5's own kinds and a step without a tool or `next` are not canonical.
        assert _errors(
            jsonschema.Draft202012Validator(schema_for("canonical")), result.document.data
        )
