"""The docs site: the tool pages are what the checker's catalogue generates (a field added to
the catalogue without regenerating the docs fails here), every kind the checker knows has a page,
gates and quantum keep one key list, the site builds with `mkdocs build --strict` (which fails on
a broken link between pages or a page missing from the nav), the README's links to docs/ exist,
and the guide's playbooks pass `noetlc check`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from noetl_compile.check import check_paths
from noetl_compile.check.gates import ALL_GATE_KEYS, COMMON_KEYS
from noetl_compile.check.quantum import KEYS as QUANTUM_KEYS
from noetl_compile.diagnostics import Severity
from noetl_compile.read.base import NOETL5_KINDS, TOOL_KINDS
from noetl_compile.runtime_support import NEEDS, runtime_executes
from noetl_compile.shell_surface import CONFIG_KEYS as SHELL_KEYS
from noetl_compile.tool_catalogue import CATALOGUE, COMMON_FIELDS
from noetl_compile.tool_docs import page_name, render_pages

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_the_committed_tool_pages_are_what_the_catalogue_generates():
    pages = render_pages()
    committed = {p.name: p.read_text(encoding="utf-8") for p in (DOCS / "tools").glob("*.md")}
    stale = sorted(name for name in pages if committed.get(name) != pages[name])
    extra = sorted(set(committed) - set(pages))
    assert not stale and not extra, (
        f"docs/tools is out of date ({stale or extra}): python -m noetl_compile.tool_docs docs/tools"
    )


def test_every_catalogue_field_has_a_docs_entry():
    for kind, entry in CATALOGUE.items():
        text = (DOCS / "tools" / page_name(kind)).read_text(encoding="utf-8")
        for field in entry.fields:
            assert f"| `{field.name}` |" in text, f"{kind}.{field.name} has no row in its page"
    index = (DOCS / "tools" / "index.md").read_text(encoding="utf-8")
    for field in COMMON_FIELDS:
        assert f"| `{field.name}` |" in index


def test_every_tool_kind_the_checker_knows_has_a_page():
    known = set().union(TOOL_KINDS["canonical"], TOOL_KINDS["case-v2"], NOETL5_KINDS)
    assert known <= set(CATALOGUE), sorted(known - set(CATALOGUE))
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = re.findall(r"tools/([a-z_]+)\.md", str(nav["nav"]))
    assert set(listed) == {"index"} | set(CATALOGUE)


def test_every_kind_the_runtime_cannot_run_has_its_decision_on_its_page():
    """The canonical and NoETL 5 kinds without an executor: C515's decision (an Airflow
    provider to install, an equivalent tool, or NoETL) is on the kind's page, word for word."""
    known = set().union(TOOL_KINDS["canonical"], NOETL5_KINDS)
    for kind in sorted(k for k in known if not runtime_executes(k)):
        assert kind in NEEDS, f"{kind}: no decision in runtime_support.NEEDS"
        text = " ".join((DOCS / "tools" / page_name(kind)).read_text(encoding="utf-8").split())
        assert "## On Airflow" in text and NEEDS[kind][1:] in text, kind
    for kind, provider in (
        ("snowflake", "apache-airflow-providers-snowflake"),
        ("gcs", "apache-airflow-providers-google"),
        ("container", "apache-airflow-providers-cncf-kubernetes"),
    ):
        assert provider in NEEDS[kind], kind


def test_gate_quantum_and_shell_keys_are_the_catalogue_fields():
    common = {f.name for f in COMMON_FIELDS}
    gate = {f.name for f in CATALOGUE["gate"].fields}
    assert gate == (ALL_GATE_KEYS | COMMON_KEYS) - common
    quantum = {f.name for f in CATALOGUE["quantum"].fields}
    assert quantum == QUANTUM_KEYS - common
    # The shell tool's page lists the keys its own check (C516) and the runtime read.
    shell = {f.name for f in CATALOGUE["shell"].fields}
    assert shell == SHELL_KEYS - {"kind"}
    assert not CATALOGUE["shell"].open


def test_the_site_builds_strict(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "tools" / "http" / "index.html").is_file()
    assert (tmp_path / "site" / "writing-playbooks" / "index.html").is_file()


def test_readme_links_to_the_docs_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#\s]+)", readme)
    assert "docs/writing-playbooks.md" in links
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_no_pointer_to_a_document_outside_the_repository():
    readmes = [ROOT / "README.md", ROOT / "airflow_plugin" / "README.md"]
    for path in [*readmes, *DOCS.rglob("*.md"), *(ROOT / "playbooks").glob("*.yaml")]:
        assert "spec-extensions" not in path.read_text(encoding="utf-8"), path


def test_the_guides_playbooks_check_clean(tmp_path):
    text = (DOCS / "writing-playbooks.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if "apiVersion" in b]
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        path = tmp_path / f"guide{i}.yaml"
        path.write_text(block)
        results, problems = check_paths([str(path)])
        found = [
            f"{d.code} {d.message}"
            for d in results[0].diagnostics
            if d.severity >= Severity.WARNING
        ]
        assert not problems and found == [], (block, found)


def test_explain_links_to_pages_that_exist():
    from noetl_compile.rules import RULES, docs_page, explain

    linked = [code for code in RULES if docs_page(code)]
    assert "C516" in linked and "C510" in linked
    for code in linked:
        assert (ROOT / docs_page(code)).is_file(), code
        assert f"Docs: {docs_page(code)}" in explain(code)


def test_every_bundled_example_says_what_it_needs_and_the_readme_lists_it():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "playbooks").glob("*.yaml")):
        header = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                break
            header.append(line)
        assert any(line.startswith("# Needs: ") for line in header), path.name
        assert f"| `{path.stem}` | " in readme, path.name
