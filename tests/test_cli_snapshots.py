"""CLI snapshots in the style of ruff's: for each command line, the exit code, stdout and stderr
exactly, stored in ``tests/cli_snapshots/<name>.snap``.

Every command runs in-process from a small project written into a temporary folder, with
relative paths, so a snapshot does not depend on where the repository lives. Regenerate with
``NOETLC_REGEN=1 pytest tests/test_cli_snapshots.py`` and read the diff: a snapshot states what
a CI user sees.
"""

from __future__ import annotations

import gc
import json
import os
import pty
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from noetl_compile.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = ROOT / "tests" / "cli_snapshots"
REGEN = os.environ.get("NOETLC_REGEN") == "1"

OK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: ok, path: demo/ok}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'total': 1}"}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: python, auth: pg_prod, code: "result = {'total': start.total}"}
"""
# One warning (S103), no error.
WARN = OK.replace("demo/ok", "demo/warn").replace(
    "    next: {arcs: [{step: end}]}\n", "    next: {arcs: [{step: end}]}\n    nxt: end\n"
)
# One error (T307: a misspelt step name in a template) and one warning (S103).
BROKEN = WARN.replace("demo/warn", "demo/broken").replace(
    "  - step: end\n", '  - step: end\n    input: {total: "{{ strat.total }}"}\n'
)
# One of each typo that used to pass silently (tool fields, a misspelt url, namespace paths,
# a filter, a templated and a case-sink auth).
TYPOS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: typos, path: demo/typos}
workload: {base_url: "http://127.0.0.1:5555", pg_auth: pg_dev, amount: 5}
workflow:
  - step: start
    tool:
      kind: http
      mehtod: POST
      uri: "{{ workload.base_urll }}/items"
    next: [{step: load}]
  - step: load
    tool:
      kind: postgres
      auth: "{{ pg_auth }}"
      command: "SELECT '{{ ctx.amont | uppercase }}'"
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          sink:
            tool: {kind: postgres, auth: pg_prd, tabel: t}
"""
COMPOSE = """\
services:
  postgres:
    image: postgres:16
    ports: ["5432:5432"]
"""
# case-v2: one playbook the upgrade rewrites, one with a construct it leaves (U801).
LEGACY = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: legacy, path: demo/legacy}
workflow:
  - step: start  # entry
    tool: {kind: python, code: "result = {'total': 1}"}
    args: {seed: 1}
    case:
      - when: "{{ event.name == 'step.exit' and result.total > 0 }}"
        then:
          next: [{step: end}]
  - step: end
    tool: {kind: python, code: "result = 2"}
"""
LEGACY_SINK = LEGACY.replace("demo/legacy", "demo/legacy_sink").replace(
    "    args: {seed: 1}\n", "    sink: {tool: {kind: postgres, auth: pg, table: t}}\n"
)
AIRFLOW_EXPORT_JSON = {
    "pg_prod": {
        "conn_type": "postgres",
        "description": "",
        "login": "etl",
        "password": "secret",
        "host": "db",
        "port": 5432,
        "schema": "prod",
        "extra": "",
    }
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    files = {
        "playbooks/ok.yaml": OK,
        "playbooks/warn.yaml": WARN,
        "broken/broken.yaml": BROKEN,
        "with_compose/ok.yaml": OK.replace("demo/ok", "demo/composed"),
        "legacy/legacy.yaml": LEGACY,
        "legacy/sink.yaml": LEGACY_SINK,
        "with_compose/docker-compose.yml": COMPOSE,
        "ignored/.gitignore": "build/\n",
        "ignored/ok.yaml": OK.replace("demo/ok", "demo/kept"),
        "ignored/build/broken.yaml": BROKEN,
        "conns/airflow.json": json.dumps(AIRFLOW_EXPORT_JSON, indent=2),
        "conns/airflow.yaml": "pg_prod:\n  conn_type: postgres\n  host: db\n",
        "conns/airflow.env": "pg_prod=postgres://etl:secret@db:5432/prod\n",
        "conns/names.yaml": "[pg_prod]\n",
        "conns/other.yaml": "[pg_dev]\n",
        "conns/malformed.yaml": "connections: [pg_prod, pg_dev]\n",
        "conns/bad_list.yaml": "- [pg_prod]\n",
        "typos/typos.yaml": TYPOS,
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps usage lines at the terminal width
    return tmp_path


def _run(command: str, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    gc_was_enabled = gc.isenabled()
    try:
        code = main(shlex.split(command))
    except SystemExit as exc:  # argparse's own exits (--version, usage errors)
        code = exc.code if isinstance(exc.code, int) else 0
    finally:
        if gc_was_enabled:  # the CLI turns the cyclic collector off for its own process
            gc.enable()
    out = capsys.readouterr()
    return code, out.out, out.err


def _snapshot(command: str, code: int, out: str, err: str) -> str:
    return (
        f"args: noetlc {command}\n"
        f"exit_code: {code}\n"
        f"----- stdout -----\n{out}"
        f"----- stderr -----\n{err}"
    )


CASES = {
    # --version
    "version": "--version",
    # --select/--ignore: unknown codes or prefixes are usage errors with "did you mean"
    "select_unknown_prefix": "check playbooks --select ZZ",
    "select_typo": "check playbooks --select T32",
    "ignore_typo": "check playbooks --ignore F40l",
    "compile_select_typo": "compile playbooks -o dags --select X61",
    "select_known_prefix": "check playbooks --select S1 --quiet",
    # a missing path is exit 2 (E001 still says which path)
    "missing_path": "check playbooks nope.yaml --quiet",
    "compile_missing_path": "compile nope -o dags",
    # YAML that is not a playbook is skipped with a note; --exclude; .gitignore
    "non_playbook_yaml_skipped": "check with_compose",
    "exclude_glob": "check with_compose --exclude docker-compose.yml",
    "named_non_playbook_is_checked": "check with_compose/docker-compose.yml --quiet",
    "gitignore_respected": "check ignored",
    "exclude_folder": "check . --exclude broken --exclude typos --exclude 'docker-compose*.yml' --quiet",
    # concise output shows severity
    "concise_shows_severity": "check broken",
    # compile: --select/--ignore/--strict, warnings printed
    "compile_prints_warnings": "compile playbooks -o dags",
    "compile_strict": "compile playbooks -o dags --strict",
    "compile_strict_ignore": "compile playbooks -o dags --strict --ignore S103",
    "compile_error_file": "compile broken -o dags",
    # connections: airflow export formats accepted, malformed files are exit 2
    "connections_airflow_json": "check playbooks --connections conns/airflow.json --quiet",
    "connections_airflow_yaml": "check playbooks --connections conns/airflow.yaml --quiet",
    "connections_airflow_env": "check playbooks --connections conns/airflow.env --quiet",
    "connections_unknown_name": "check playbooks --connections conns/other.yaml --quiet",
    "connections_malformed": "check playbooks --connections conns/malformed.yaml",
    "connections_bad_list": "check playbooks --connections conns/bad_list.yaml",
    "connections_missing_file": "check playbooks --connections conns/nope.yaml",
    # typos: each with its position and the name meant
    "typos_check": "check typos --connections conns/names.yaml",
    "typos_explain_c516": "explain C516",
    "run_set_undeclared_key": "run typos/typos.yaml --set amont=50",
    "run_conf_undeclared_key": "run typos/typos.yaml --conf '{\"base_ulr\": 1}'",
    "run_set_new_declared_key": "run typos/typos.yaml --set-new amount=1",
    # graph: format from -o's extension, a folder is named as such
    "graph_folder": "graph playbooks",
    "graph_output_folder": "graph playbooks/ok.yaml -o playbooks",
    "graph_unknown_extension": "graph playbooks/ok.yaml -o ok.txt",
    "graph_format_mismatch": "graph playbooks/ok.yaml --format dot -o ok.svg",
    "graph_mermaid_file": "graph playbooks/ok.yaml -o ok.mmd",
    # upgrade: --check lists what would change (exit 1), --diff shows it, U801 is reported
    "upgrade_check": "upgrade legacy playbooks --check",
    "upgrade_check_current": "upgrade playbooks --check",
    "upgrade_diff": "upgrade legacy --diff",
    # demo: what runs where (nothing: exit 3), an unknown action names the three
    "demo_status_nothing_running": "demo status --home demo-home",
    "demo_unknown_action": "demo start",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_snapshot(name: str, project: Path, capsys) -> None:
    command = CASES[name]
    code, out, err = _run(command, capsys)
    text = _snapshot(command, code, out, err)
    path = SNAPSHOTS / f"{name}.snap"
    if REGEN:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path.relative_to(ROOT)} is missing (run with NOETLC_REGEN=1)"
    assert text == path.read_text(encoding="utf-8")


def test_every_snapshot_has_a_case() -> None:
    assert {p.stem for p in SNAPSHOTS.glob("*.snap")} == set(CASES)


def test_version_matches_the_package_metadata(capsys) -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert _run("--version", capsys)[1] == f"noetlc {version}\n"


def test_every_argument_has_help_text() -> None:
    parser = build_parser()
    missing = []

    def visit(command: str, node) -> None:
        for action in node._actions:
            if action.help is None or not action.help.strip():
                missing.append(f"{command} {'/'.join(action.option_strings) or action.dest}")
            choices = getattr(action, "choices", None)
            for sub_name, sub in choices.items() if isinstance(choices, dict) else []:
                visit(f"{command} {sub_name}", sub)

    visit("noetlc", parser)
    assert missing == []


def test_graph_svg_from_the_extension_is_svg(project: Path, capsys) -> None:
    if shutil.which("dot") is None:
        pytest.fail("graphviz `dot` is needed for this test (apt-get install graphviz)")
    code, _, err = _run("graph playbooks/ok.yaml -o ok.svg", capsys)
    assert code == 0 and err == ""
    text = (project / "ok.svg").read_text()
    assert "<svg" in text and "flowchart" not in text  # not Mermaid text in an .svg file


def test_png_is_never_written_to_a_terminal(project: Path) -> None:
    # A real terminal: the command's stdout is a pseudo-terminal.
    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "noetl_compile", "graph", "playbooks/ok.yaml", "--format", "png"],
        stdout=follower,
        stderr=subprocess.PIPE,
        cwd=project,
        env=env,
        timeout=120,
        check=False,
    )
    os.close(follower)
    written = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        written += chunk
    os.close(leader)
    assert done.returncode == 2
    assert b"PNG" not in written  # no binary on the terminal
    assert b"a PNG is binary: write it to a file with -o FILE.png" in done.stderr


def test_the_readme_connections_examples_load(tmp_path: Path) -> None:
    """The documented connections file forms are accepted as written in README.md."""
    import re

    from noetl_compile.connections import load_connections_file

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Connections file", 1)[1].split("Anything else", 1)[0]
    blocks = re.findall(r"```(yaml|sh)\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 3
    names = []
    for index, (kind, text) in enumerate(blocks):
        path = tmp_path / f"example{index}.{'env' if kind == 'sh' else 'yaml'}"
        path.write_text(text, encoding="utf-8")
        names.append(sorted(load_connections_file(str(path)).names))
    assert names == [["http_api", "pg_prod"], ["http_api", "pg_dev", "pg_prod"], ["pg_prod"]]


def test_help_names_every_command(capsys) -> None:
    code, out, _ = _run("--help", capsys)
    commands = set(COMMANDS)
    assert code == 0 and commands >= {"check", "compile", "run", "events", "status", "signal"}
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("    ")}
    assert commands <= listed, commands - listed
