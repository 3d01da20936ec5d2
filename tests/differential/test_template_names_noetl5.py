"""Table (b) for NoETL 5 (docs/semantics.md section 6): NoETL 5 cannot run here (its engine is
Rust; there is no cargo build), so every name its render contexts bind (the scan of
template_names_noetl5.py, stored in tests/data/noetl-template-names.json with repo:path:line)
is pinned on noetlc instead: one `noetlc run` of noetl5/template_names_run.yaml reads each name
in its place, and template_name_rows.yaml's `noetl5` entries say where the run shows it,
noetlc's value, and whether that is what the cited Rust line binds."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.differential.template_name_cases import load_spec, row_key
from tests.differential.template_names import stored
from tests.differential.template_names_noetl5 import RUST_BUILDERS, function_text, names_in

HERE = Path(__file__).parent
PLAYBOOK = HERE / "noetl5" / "template_names_run.yaml"
PINS = load_spec()["noetl5"]
DATA = stored()
ROWS = [r for r in DATA["rows"] if r["engine"] == "noetl5"]
# Git directories of noetl/server and noetl/worker holding the profile's commits (a clone's
# .git, or a bare mirror); the line check runs where both are given.
MIRRORS = {
    "noetl/server": Path(os.environ.get("NOETL5_SERVER_GIT", "/nonexistent")),
    "noetl/worker": Path(os.environ.get("NOETL5_WORKER_GIT", "/nonexistent")),
}


def test_every_noetl5_row_is_pinned_and_every_pin_is_a_row():
    keys = {row_key(r).removeprefix("noetl5 ") for r in ROWS}
    assert len(ROWS) >= 25 and keys == set(PINS), sorted(keys ^ set(PINS))
    for key, pin in PINS.items():
        assert pin.get("same") is True or pin.get("differs"), key


def test_the_scan_reads_inserts_entries_and_nested_maps():
    source = (
        "fn build(x: &X) -> Map {\n"
        "    let mut ctx = Map::new();\n"
        '    ctx.insert("a".to_string(), json!(1));\n'
        '    // ctx.insert("commented".to_string(), 0); }\n'
        '    let s = "} not a brace";\n'
        "    ns.insert(name.clone(), v.clone());\n"
        '    ctx.entry("b".to_string()).or_insert(v);\n'
        '    other.insert("c".to_string(), 3);\n'
        "}\n"
        "fn after() {}\n"
    )
    first, body = function_text(source, "build")
    assert first == 1 and body.endswith("}") and "after" not in body
    found = {
        r["name"]: (r["reads"], r["line"]) for r in names_in(body, first, {"ctx": "", "ns": "n."})
    }
    assert found == {
        "a": ("json!(1)", 3),
        "commented": ("0", 4),  # a comment's text is still scanned: reviewed rows, not proof
        "n.<name>": ("v.clone()", 6),
        "b": ("entry().or_insert (kept when already bound)", 7),
    }


@pytest.mark.skipif(
    not all((p / "HEAD").exists() for p in MIRRORS.values()),
    reason="NOETL5_SERVER_GIT / NOETL5_WORKER_GIT not set",
)
def test_each_cited_rust_line_binds_its_name():
    """Re-read each cited line at the profile's commit: the key the row names is inserted there.
    (The full re-scan: `python -m tests.differential.template_names ... --noetl5 ...`.)"""
    commits = DATA["noetl5_commits"]
    texts: dict[str, list[str]] = {}
    for row in ROWS:
        repo, path, line = row["where"].rsplit(":", 2)
        if (repo, path) not in texts:
            texts[(repo, path)] = subprocess.run(
                ["git", "--git-dir", str(MIRRORS[repo]), "show", f"{commits[repo]}:{path}"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.splitlines()
        # The key is on the insert's line or, for a call split over lines, one of the next two.
        text = " ".join(texts[(repo, path)][int(line) - 1 : int(line) + 2])
        leaf = row["name"].rsplit(".", 1)[-1]
        word = leaf.strip("<>").rsplit(".", 1)[-1]
        assert re.search(rf"\b{re.escape(word)}\b", text), (row["where"], row["name"], text)
    assert {b[3] for b in RUST_BUILDERS} >= {"build_context", "build_iteration_command"}


def _at(report: dict, at: str):
    step, _, rest = at.partition(".")
    state = report["steps"][step]
    if not rest:
        return state["state"]
    value = state["result"]
    for part in rest.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def test_noetlc_reads_each_noetl5_name_as_pinned(tmp_path_factory):
    pytest.importorskip("airflow")
    from tests.harness.run_cli import noetlc_run, report_of

    home = tmp_path_factory.mktemp("noetl5-names-home")
    result = noetlc_run(home, PLAYBOOK, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = report_of(result)
    moved = {
        key: {"pinned": pin["value"], "now": _at(report, pin["at"])}
        for key, pin in PINS.items()
        if _at(report, pin["at"]) != pin["value"]
    }
    assert not moved, (
        f"noetlc's value of a NoETL 5 name changed (update the pin and its verdict): {moved}"
    )
