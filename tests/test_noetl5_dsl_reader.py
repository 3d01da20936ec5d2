"""How the reader takes NoETL 5 playbooks: typos in its keys positioned with a suggestion, every
property of NoETL's playbook JSON Schema known, other document kinds skipped, the generation
detected by a marker or a construct only NoETL 5 reads (S118 at it)."""

from __future__ import annotations

import pytest
import yaml

from noetl_compile.check import check_text, read_file
from noetl_compile.read import detect_dialect
from noetl_compile.read.noetl5 import NOT_EXECUTED, SCHEMA_READ
from tests.noetl5_dsl_support import (
    PLAYBOOKS,
    SCHEMA,
    code_counts,
)

_TYPO_BASE = [
    "apiVersion: noetl.io/v2",
    "kind: Playbook",
    "metadata: {name: t, path: t}",
    "workflow:",
    "  - step: start",
    "    tool: {kind: noop}",
    "    next: {spec: {on_no_match: quiet}, arcs: [{step: done}]}",
    "  - step: done",
]


@pytest.mark.parametrize(
    ("where", "fragment", "word", "suggestion"),
    [
        (
            "metadata",
            "metadata: {name: t, path: t, exposes_as_mpc: true}",
            "exposes_as_mpc",
            "exposes_as_mcp",
        ),
        (
            "executor",
            "executor: {profile: auto, spec: {final_stp: done}}",
            "final_stp",
            "final_step",
        ),
        (
            "next",
            "    next: {spec: {on_no_mach: quiet}, arcs: [{step: done}]}",
            "on_no_mach",
            "on_no_match",
        ),
        (
            "done",
            "    loop: {in: '{{ [1] }}', iterator: i, spec: {frame: {lease_second: 5}}}",
            "lease_second",
            "lease_seconds",
        ),
        ("done", "    tool: {kind: noop, output: {selct: []}}", "selct", "select"),
        ("done", "    spec: {policy: {admitt: {}}}", "admitt", "admit"),
    ],
)
def test_typos_in_noetl5_keys_are_positioned_with_a_suggestion(
    where: str, fragment: str, word: str, suggestion: str
) -> None:
    lines = list(_TYPO_BASE)
    if where == "metadata":
        lines[2] = fragment
    elif where == "executor":
        lines.insert(3, fragment)
    elif where == "next":
        lines[6] = fragment
    else:
        lines.append(fragment)
    text = "\n".join(lines) + "\n"
    result = check_text(text, "typo.yaml", dialect="noetl5")
    found = [d for d in result.diagnostics if d.code == "S103" and word in d.message]
    assert len(found) == 1, [d.message for d in result.diagnostics]
    line = next(i for i, t in enumerate(lines, 1) if word in t)
    assert found[0].position.line == line
    assert found[0].position.col == lines[line - 1].index(word) + 1
    assert f"did you mean {suggestion!r}" in found[0].message


def test_every_schema_property_is_known_to_the_reader() -> None:
    """Each property of each object of NoETL's schema is in the key set the reader checks that
    object against; the recorded objects are exactly the schema's."""
    assert set(SCHEMA["objects"]) == set(SCHEMA_READ)
    missing = [
        f"{obj}.{key}"
        for obj, keys in SCHEMA["objects"].items()
        for key in keys
        if key not in SCHEMA_READ[obj]
    ]
    assert not missing, f"schema keys the reader does not know: {missing}"
    for entry in NOT_EXECUTED:  # no stale reason: each names a schema key (or the local guard)
        obj, key = entry.split(".")
        assert key in SCHEMA["objects"].get(obj, []) or entry == "Step.when", entry


def _paths(value, prefix: str = "") -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            found.add(path)
            found |= _paths(item, path)
    elif isinstance(value, list):
        for item in value:
            found |= _paths(item, prefix + "[]")
    return found


def test_schema_keys_playbook_uses_every_schema_path_and_each_is_read_or_reported() -> None:
    """schema_keys.yaml holds every property path of the schema; checking it gives no unknown-key
    or foreign-form diagnostic, and an S116 for each key the Airflow runtime does not execute."""
    text = (PLAYBOOKS / "schema_keys.yaml").read_text(encoding="utf-8")
    used = _paths(yaml.safe_load(text))
    missing = sorted(set(SCHEMA["paths"]) - used)
    assert not missing, f"schema paths the test playbook does not use: {missing}"
    result = check_text(text, str(PLAYBOOKS / "schema_keys.yaml"))
    assert not {"S103", "S114"} & set(code_counts(result))
    reported = {d.message.split("`")[1] for d in result.diagnostics if d.code == "S116"}
    expected = {entry.split(".")[1] for entry in NOT_EXECUTED if entry != "Step.when"}
    # Reported only for the value the runtime does not follow: `no_next_is_error: true` and
    # `on_no_match: quiet` (the file holds false and `complete`, which is the runtime's behaviour).
    expected -= {"no_next_is_error", "on_no_match"}
    assert expected <= reported, sorted(expected - reported)


def test_other_document_kinds_are_skipped_with_a_note() -> None:
    for name, kind in (("orders.subscription.yaml", "Subscription"), ("tools.mcp.yaml", "Mcp")):
        result = read_file(str(PLAYBOOKS / name))
        assert result.playbook is None and not result.has_errors
        (note,) = result.diagnostics
        assert note.code == "E003" and f"kind: {kind}" in note.message
        assert note.position.line == 3


def test_detection_needs_a_marker_or_a_construct_only_noetl5_reads() -> None:
    """The generations share apiVersion and shape: only a NoETL 5 marker, or a construct only
    NoETL 5 reads (below and test_a_construct_only_noetl5_reads_decides_...), makes a file
    NoETL 5."""
    plain = {"apiVersion": "noetl.io/v2", "workflow": [{"step": "start", "tool": {"kind": "noop"}}]}
    assert detect_dialect(plain) == "canonical"
    assert detect_dialect({**plain, "executor": {"profile": "local"}}) == "noetl5"
    assert detect_dialect({**plain, "executor": {"profile": "auto"}}) == "canonical"
    assert detect_dialect({**plain, "metadata": {"exposes_as_mcp": True}}) == "noetl5"
    piped = {
        "apiVersion": "noetl.io/v2",
        "workflow": [{"step": "start", "tool": [{"kind": "noop", "set": {"x": 1}}]}],
    }
    assert detect_dialect(piped) == "noetl5"
    scoped = {
        "apiVersion": "noetl.io/v2",
        "workflow": [{"step": "start", "tool": [{"kind": "noop", "set": {"ctx.x": 1}}]}],
    }
    assert detect_dialect(scoped) == "canonical"
    by_file = {
        "apiVersion": "noetl.io/v2",
        "workflow": [{"step": "start", "tool": {"kind": "playbook", "path": "./child.yaml"}}],
    }
    assert detect_dialect(by_file) == "noetl5"
    by_catalog = {
        "apiVersion": "noetl.io/v2",
        "workflow": [{"step": "start", "tool": {"kind": "playbook", "path": "tests/child"}}],
    }
    assert detect_dialect(by_catalog) == "canonical"
    # Values of any shape: a list as a kind is the reader's S102, never a crash of detection.
    odd = {"apiVersion": "noetl.io/v2", "workflow": [{"step": "s", "tool": {"kind": []}}]}
    assert detect_dialect(odd) == "canonical"


_HEAD = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: t}\nworkflow:\n"
_END = "        - step: end\n  - step: end\n    tool: {kind: noop}\n"
CONSTRUCTS = {
    "when": (
        "  - step: start\n    when: '{{ 1 > 2 }}'\n    tool: {kind: noop}\n"
        "    next:\n      arcs:\n" + _END,
        (6, 5),
        "S114",
    ),
    "args": (
        "  - step: start\n    args: {n: 3}\n    tool: {kind: noop}\n"
        "    next:\n      arcs:\n" + _END,
        (6, 5),
        "S114",
    ),
    "return": (
        "  - step: start\n    tool:\n      kind: python\n      code: |\n"
        "        n = len(args)\n        return {'n': n}\n"
        "    next:\n      arcs:\n" + _END,
        (8, 7),
        "C501",
    ),
    "label form": (
        "  - step: start\n    tool:\n      - fetch: {kind: noop}\n    next:\n      arcs:\n" + _END,
        (7, 9),
        "S102",
    ),
    "next_mode": (
        "  - step: start\n    spec: {next_mode: inclusive}\n    tool: {kind: noop}\n"
        "    next: [{step: end}]\n  - step: end\n    tool: {kind: noop}\n",
        (6, 12),
        "S114",
    ),
    # Alone, a `next` list target's `args` is case-v2's form (read so); beside a canonical mark
    # (a scoped `set`) it is NoETL 5's NextSpec::Targets.
    "next target args": (
        "  - step: start\n    tool: {kind: noop}\n    set: {ctx.x: 1}\n"
        "    next: [{step: end, args: {n: 1}}]\n  - step: end\n    tool: {kind: noop}\n",
        (8, 24),
        "S114",
    ),
    "tool key": (
        "  - step: start\n    tool: {kind: postgres, host: db.internal, command: select 1}\n"
        "    next:\n      arcs:\n" + _END,
        (6, 28),
        "C503",  # NoETL 5's postgres connects by `host`; the April one needs `auth`
    ),
}


@pytest.mark.parametrize("construct", sorted(CONSTRUCTS))
def test_a_construct_only_noetl5_reads_decides_and_s118_says_so_at_it(construct: str) -> None:
    """Without --dialect, a file whose only NoETL 5 mark is the construct is read as NoETL 5 and
    checks clean, with S119 (info) at the construct; `--dialect canonical` still forces the April
    engine's reading, which rejects it (the false reject this detection removes)."""
    body, (line, col), april = CONSTRUCTS[construct]
    result = check_text(_HEAD + body, "t.yaml")
    assert result.playbook.generation == "noetl5"
    assert [(d.code, d.position.line, d.position.col) for d in result.diagnostics] == [
        ("S119", line, col)
    ]
    assert "read as NoETL 5" in result.diagnostics[0].message
    forced = check_text(_HEAD + body, "t.yaml", dialect="canonical")
    assert forced.playbook.generation is None
    assert april in {d.code for d in forced.diagnostics}, code_counts(forced)
    assert "S119" not in code_counts(forced)


def test_on_no_match_quiet_is_reported_and_complete_is_not() -> None:
    text = "\n".join(_TYPO_BASE).replace("quiet", "VALUE") + "\n"
    quiet = check_text(text.replace("VALUE", "quiet"), "q.yaml", dialect="noetl5")
    (s116,) = [d for d in quiet.diagnostics if d.code == "S116"]
    assert (s116.position.line, s116.position.col) == (7, 19)
    assert "NoETL 5's engines do not read it" in s116.message
    assert "which is `complete`" in s116.message
    complete = check_text(text.replace("VALUE", "complete"), "c.yaml", dialect="noetl5")
    assert not [d for d in complete.diagnostics if d.code == "S116"]
    assert complete.playbook.step("start").router.on_no_match == "complete"
