"""DAG files leave out payload keys that hold only their default; the runtime reads an absent
key as that default, so the compact payload runs exactly like the full one."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_plugin.runtime import payload as runtime_payload
from airflow_plugin.runtime.payload import (
    PAYLOAD_DEFAULTS,
    arc_task_id,
    with_defaults,
)
from airflow_plugin.runtime.step import execute_step
from noetl_compile import step_contract, step_model
from noetl_compile.check import check_paths
from noetl_compile.lower import lower
from noetl_compile.lower.payload import STEP_DEFAULTS, compact_step
from noetl_compile.step_decode import decode_reads, decode_step
from tests.corpus import CORPUS

ROOT = Path(__file__).resolve().parents[1]


def test_compiler_and_runtime_read_one_defaults_table() -> None:
    # One table, not two kept equal: a copy on either side would drift.
    assert PAYLOAD_DEFAULTS is STEP_DEFAULTS is step_contract.STEP_DEFAULTS
    # The runtime's key tables are the step model's; the lowering's TypedDicts (the wire shape)
    # spell the same keys.
    assert runtime_payload.PAYLOAD_KEYS is step_contract.PAYLOAD_KEYS is step_model.PAYLOAD_KEYS
    assert runtime_payload.PAYLOAD_EXTENSIONS is step_contract.EXTENSION_KEYS
    assert step_contract.PAYLOAD_KEYS == set(step_contract.ContractPayload.__annotations__)
    assert step_contract.EXTENSION_KEYS == (
        set(step_contract.StepPayload.__annotations__) - step_contract.PAYLOAD_KEYS
    )
    assert step_model.ARC_KEYS == set(step_contract.Arc.__annotations__)
    assert step_model.READS_KEYS == tuple(step_contract.Reads.__annotations__)
    assert step_model.LOOP_KEYS == set(step_contract.LoopSpec.__annotations__)
    assert step_model.REGION_KEYS == set(step_contract.RegionPayload.__annotations__)
    assert set(STEP_DEFAULTS) < step_contract.PAYLOAD_KEYS
    assert step_contract.EXTENSION_KEYS == {
        "sink",
        "retry",
        "loop",
        "playbook",
        "generation",
        "guard",
        "guard_walks_on",
    }


def test_a_key_added_to_the_contract_is_one_the_runtime_accepts() -> None:
    # Every key the contract names passes validation with a value of its declared shape; a key
    # it does not name is refused, naming the key.
    sample = {"desc": "d", "input": {}, "set": {}, "vars": {}, "case": [], "generation": "noetl5"}
    sample["guard"] = "{{ workload.enabled }}"
    sample["guard_walks_on"] = True
    for key in sorted(step_contract.PAYLOAD_KEYS | step_contract.EXTENSION_KEYS):
        if key in sample:
            decode_step({"step": "s", key: sample[key]})
    with pytest.raises(ValueError, match="unknown key.s. lopo"):
        decode_step({"step": "s", "lopo": {}})
    # The reads table is the contract's too.
    assert decode_reads({key: {} for key in step_contract.READS_KEYS if key != "args"}, "s")
    with pytest.raises(ValueError, match="unknown key.s. other"):
        decode_reads({"other": {}}, "s")
    with pytest.raises(ValueError, match="`reads` has unknown key.s. args"):
        decode_reads({"args": []}, "s", args=False)


def _meaning(payload: dict) -> dict:
    """What the runtime reads from a payload: absent keys as defaults, arcs' `when`/`task_id`."""
    full = with_defaults(payload)
    full["routing"]["arcs"] = [
        {**arc, "when": arc.get("when"), "task_id": arc_task_id(arc)}
        for arc in full["routing"]["arcs"]
    ]
    full["case"] = [{**rule, "when": rule.get("when")} for rule in full["case"]]
    full.pop("loop", None)  # loop payloads are compared by the loop tests and corpus runs
    return full


@pytest.mark.corpus
def test_every_compact_payload_means_the_full_one() -> None:
    results, _ = check_paths(
        [str(ROOT / "playbooks"), str(CORPUS / "seeds"), str(CORPUS / "canonical")]
    )
    compared = dropped = 0
    for result in results:
        if result.has_errors or result.playbook is None:
            continue
        ir = lower(result.playbook, source=result.path, source_sha256="")
        for name in ir.graph:
            full = ir.graph.nodes[name]["payload"]
            if "region" in full:
                continue  # a region member's node payload is its own step payload below
            compact = compact_step(full)
            # What the compiler emits is what the operators decode (loops and v1 bodies too).
            assert decode_step(compact).name == name, (result.path, name)
            dropped += len(full) - len(compact)
            assert _meaning(compact) == _meaning(full), (result.path, name)
            compared += 1
    assert compared > 500 and dropped > 1000


def test_the_generated_file_holds_no_default_valued_key() -> None:
    text = (ROOT / "dags" / "hello_world.py").read_text()
    payloads = text.split("PAYLOADS = ", 1)[1].split("\n\n", 1)[0]
    for needle in ('"pipeline": None', '"set": {}', '"vars": {}', '"case": []', '"when": None'):
        assert needle not in payloads


def test_a_compact_payload_runs_like_the_full_one() -> None:
    full = {
        "step": "s",
        "dialect": "canonical",
        "input": {},
        "tool": {"kind": "python", "code": "result = {'n': 2}"},
        "pipeline": None,
        "set": {},
        "vars": {},
        "case": [],
        "routing": {
            "mode": "exclusive",
            "arcs": [
                {"step": "big", "task_id": "big", "when": "{{ s.n > 1 }}"},
                {"step": "small", "task_id": "small", "when": None},
            ],
        },
    }
    compact = compact_step(full)
    assert compact == {
        "step": "s",
        "dialect": "canonical",
        "tool": {"kind": "python", "code": "result = {'n': 2}"},
        "routing": {"arcs": [{"step": "big", "when": "{{ s.n > 1 }}"}, {"step": "small"}]},
    }
    inputs = {"workload": {}, "results": {}, "ctx": {}, "vars": {}, "execution_id": 1}
    one, two = execute_step(full, dict(inputs)), execute_step(compact, dict(inputs))
    assert (one.result, one.next_steps, one.next_task_ids) == (
        two.result,
        two.next_steps,
        two.next_task_ids,
    )
    assert two.next_steps == ["big"] and two.next_task_ids == ["big"]
