"""The hostile-input suite's parts (tests/test_hostile.py): the case record, the builders of big
and strange playbooks, the credential shapes, and how a case's files are made and the CLI run."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_CASES = 60
HEADER = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: hostile, path: hostile}\n"
STEPS = "workflow:\n  - step: start\n    tool: {kind: noop}\n"
FINDING_LINE = re.compile(r"^.+:\d+:\d+: [A-Z]\d{3} \[(?:error|warning|info)\] \S.*$")
SUMMARY_LINE = re.compile(
    r"^(All checks passed: \d+ playbooks?|Found \d+ .* in \d+ playbooks?)\.$|^\d+ of \d+ playbook"
)


def playbook(body: str = "", steps: str = STEPS) -> str:
    return HEADER + body + steps


def python_step(code: str) -> str:
    lines = "\n".join("        " + line for line in code.split("\n"))
    return f"workflow:\n  - step: start\n    tool:\n      kind: python\n      code: |\n{lines}\n"


def http_step(url: str) -> str:
    return f"workflow:\n  - step: start\n    tool:\n      kind: http\n      url: {url}\n"


def chain(n: int) -> str:
    steps = ["workflow:\n"]
    for i in range(n):
        name = "start" if i == 0 else f"s{i}"
        steps.append(f"  - step: {name}\n    tool: {{kind: noop}}\n")
        if i + 1 < n:
            steps.append(f"    next:\n      - step: s{i + 1}\n")
    return HEADER + "".join(steps)


def fan_out(n: int) -> str:
    steps = ["workflow:\n  - step: start\n    tool: {kind: noop}\n    next:\n"]
    steps += [f"      - step: b{i}\n" for i in range(n)]
    for i in range(n):
        steps.append(f"  - step: b{i}\n    tool: {{kind: noop}}\n    next:\n      - step: join\n")
    steps.append("  - step: join\n    tool: {kind: noop}\n")
    return HEADER + "".join(steps)


def ctx_chain(n: int) -> str:
    """A chain whose every step writes `ctx.vN` and reads the previous step's variable."""
    steps = ["workflow:\n"]
    for i in range(n):
        name = "start" if i == 0 else f"s{i}"
        reads = f"{{{{ ctx.v{i - 1} }}}}" if i else "1"
        steps.append(
            f"  - step: {name}\n    tool: {{kind: python, args: {{x: '{reads}'}}, code: 'result = x'}}\n"
            f"    set: {{ctx.v{i}: '{{{{ {name}.result }}}}'}}\n"
        )
        if i + 1 < n:
            steps.append(f"    next:\n      - step: s{i + 1}\n")
    return HEADER + "".join(steps)


def postgres_chain(n: int) -> str:
    steps = ["workflow:\n"]
    for i in range(n):
        name = "start" if i == 0 else f"s{i}"
        steps.append(
            f"  - step: {name}\n    tool: {{kind: postgres, auth: pg, query: 'select {i}'}}\n"
        )
        if i + 1 < n:
            # A case rule's `next` passes args (a plain `next` drops them in case-v2: S117).
            steps.append(
                "    case:\n      - when: \"{{ event.name == 'call.done' }}\"\n"
                f"        then: {{next: [{{step: s{i + 1}, args: {{n: {i}}}}}]}}\n"
            )
    return HEADER + "".join(steps)


def joined_writers(n: int) -> str:
    """A fork into `a` and `b`, joined in `c0`, then a chain `c0 -> c1 -> ...` all writing ctx.x."""
    steps = [
        "workflow:\n  - step: start\n    tool: {kind: noop}\n    next:\n"
        "      spec: {mode: inclusive}\n      arcs:\n        - step: a\n        - step: b\n"
        "  - step: a\n    tool: {kind: noop}\n    next:\n      - step: c0\n"
        "  - step: b\n    tool: {kind: noop}\n    next:\n      - step: c0\n"
    ]
    for i in range(n):
        steps.append(f"  - step: c{i}\n    tool: {{kind: noop}}\n    set: {{ctx.x: {i}}}\n")
        if i + 1 < n:
            steps.append(f"    next:\n      - step: c{i + 1}\n")
    return HEADER + "".join(steps)


def branch_writer_chains(n: int) -> str:
    """A fork into chains `a0 -> a1 -> ...` and `b0 -> b1 -> ...` of n steps each, all writing
    ctx.x: every `b` races every `a`."""
    steps = [
        "workflow:\n  - step: start\n    tool: {kind: noop}\n    next:\n"
        "      spec: {mode: inclusive}\n      arcs:\n        - step: a0\n        - step: b0\n"
    ]
    for branch in "ab":
        for i in range(n):
            steps.append(
                f"  - step: {branch}{i}\n    tool: {{kind: noop}}\n    set: {{ctx.x: 1}}\n"
            )
            if i + 1 < n:
                steps.append(f"    next:\n      - step: {branch}{i + 1}\n")
    return HEADER + "".join(steps)


def deep_tree(levels: int, text: str) -> Callable[[Path], None]:
    """Folders ``levels`` deep from ``path`` with ``text`` as p.yaml at the bottom (made in a
    loop: pathlib's and os.makedirs' parents=True recurse once per level)."""

    def make(path: Path) -> None:
        folder = str(path)
        for _ in range(levels):
            os.mkdir(folder)
            folder = os.path.join(folder, "a")
        Path(folder).parent.joinpath("p.yaml").write_text(text, encoding="utf-8")

    return make


def typo_chain(n: int) -> str:
    """A chain whose every arc misspells the next step's name."""
    steps = ["workflow:\n"]
    for i in range(n):
        name = "start" if i == 0 else f"step_number_{i}"
        steps.append(f"  - step: {name}\n    tool: {{kind: noop}}\n")
        steps.append(f"    next:\n      - step: step_numbr_{i + 1}\n")
    return HEADER + "".join(steps)


def typo_templates(n: int) -> str:
    """Steps each naming an unknown `stp_N` (two edits from the step `sN`: a runtime name?)."""
    steps = ["workflow:\n  - step: start\n    tool: {kind: noop}\n"]
    steps += [
        f"  - step: s{i}\n    tool: {{kind: python, code: 'x = 1', args: {{a: '{{{{ stp_{i}.x }}}}'}}}}\n"
        for i in range(n)
    ]
    return HEADER + "".join(steps)


def racing_writers(n: int) -> str:
    steps = ["workflow:\n  - step: start\n    tool: {kind: noop}\n    next:\n"]
    steps.append("      spec: {mode: inclusive}\n      arcs:\n")
    steps += [f"        - step: b{i}\n" for i in range(n)]
    for i in range(n):
        steps.append(f"  - step: b{i}\n    tool: {{kind: noop}}\n    set: {{ctx.x: {i}}}\n")
    return HEADER + "".join(steps)


def laughs(levels: int = 9, width: int = 9, merge: bool = False) -> str:
    lines = ["workload:\n", f"  l0: &l0 [{', '.join(['lol'] * width)}]\n"]
    for i in range(1, levels):
        if merge:
            lines.append(f"  l{i}: &l{i}\n    x{i}: [{', '.join([f'*l{i - 1}'] * width)}]\n")
        else:
            lines.append(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]\n")
    return playbook("".join(lines))


Files = dict[str, "str | bytes | Callable[[Path], None]"]


@dataclass
class Case:
    name: str
    files: Callable[[], Files]
    argv: list[str]
    status: int
    expect: list[str] = field(default_factory=list)  # regexes, each must match a line of stdout
    absent: list[str] = field(default_factory=list)  # strings that must not be printed anywhere
    seconds: float = 20.0
    env: dict[str, str] = field(default_factory=dict)
    after: Callable[[Path], None] | None = None  # more assertions on the folder afterwards
    one_line: bool = True  # every stdout line is a finding or the summary (concise format)


def fifo(path: Path) -> None:
    os.mkfifo(path)


def symlink_to(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def one(code: str, where: str = r"\d+:\d+", file: str = "p.yaml") -> str:
    return rf"^{re.escape(file)}:{where}: {code} \[(?:error|warning|info)\] "


SECRET = "Zq9-very-secret-value"
BEARER_SPACES = (
    "workflow:\n  - step: start\n    tool:\n      kind: http\n      url: http://127.0.0.1/x\n"
    '      headers:\n        Authorization: "Bearer x' + " " * 40_000 + 'y"\n'
)
# One line per credential shape of noetl_compile/check/secrets.py, with {run} where a pattern
# meets whitespace it may repeat over.
CREDENTIAL_SHAPES = (
    "Authorization: Bearer{run}x",
    "Authorization:{run}Bearer Zq9abcdefghijklmnop",
    "Bearer{run}Zq9abcdefghijklmnop",
    "headers = {{'Authorization': 'Bearer{run}x'}}",
    "password{run}= 'x'",
    "password ={run}'x'",
    "PASSWORD{run}=",
    "CREATE USER u IDENTIFIED BY{run}x",
    "SET PASSWORD{run}FOR 'u' ={run}PASSWORD({run}'x')",
    "curl{run}-u user:{run}x",
    "mysql{run}-p{run}x",
    "sshpass{run}-p{run}x",
    "machine{run}h login{run}u password{run}x",
    "auth ={run}({run}'u',{run}'x')",
    "jdbc:oracle:thin:{run}u/x@h",
    "postgresql://u:{run}@h",
    "h:5432:db:u:{run}x",
    "--password{run}x",
    "password:{run}x1",
    "x = '{{{{{run}'x' }}}}'",
    "api_key=x{run}y&",
    "AKIA{run}ABCDEFGHIJKLMNOP",
    "-----BEGIN{run}PRIVATE KEY-----",
    "eyJ{run}.eyJ{run}.x",
    # issue 23's classes: SQL options, IDENTIFIED WITH, free text, slashed and quoted URL
    # passwords, `?key=`
    "CREATE SECRET (TYPE s3, KEY_ID{run}'x', SECRET{run}'y', SESSION_TOKEN{run}'z')",
    "CREATE USER u IDENTIFIED{run}WITH{run}p{run}BY{run}'x'",
    "the password is{run}Zq9abcdefg1",
    "creds:{run}admin{run}/{run}Zq9abcdefg1",
    "the secret key is{run}'Zq9abcdefg1' and the access token{run}\"Zq9abcdefg2\"",
    "postgresql://u:'{run}x'@h",
    "postgresql://u:ab/{run}cd@h",
    "https://h/x?key={run}x&token=x{run}y",
)
# The same classes as YAML values a playbook holds (workload keys, headers, cookies, params,
# query strings, SQL, URLs, descriptions), with runs inside each credential-shaped value.
CLASS_VALUES = (
    '  description: "the API key is{run}Zq9abcdefg1 and the password is Zq9abcdefg2"',
    '  X-Auth-Token{i}: "x{run}y"',
    '  Cookie{i}: "sid={run}x; theme={run}dark"',
    '  endpoint{i}: "https://h/x?token={run}x&api_key=x{run}y&key={run}z"',
    "  dsn{i}: \"postgresql://u:'{run}x'@h/db\"",
    '  dsn_slashed{i}: "postgresql://u:ab/{run}cd@h/db"',
    "  sql{i}: \"CREATE SECRET (TYPE s3, KEY_ID{run}'x', SECRET{run}'y'); "
    "ALTER USER u IDENTIFIED{run}WITH p{run}BY{run}'z'\"",
    '  passwords{i}: ["a{run}b", "c{run}d"]',
)
CLASS_STEP = (
    "workflow:\n  - step: start\n    tool:\n      kind: http\n      url: http://127.0.0.1/x\n"
    '      headers: {{X-Custom-Secret: "Bearer{run}x", Cookie: "a={run}b"}}\n'
    '      params: {{token: "x{run}y", q: "password is{run}Zq9abcdefg1"}}\n'
    "  - step: sql\n    tool:\n      kind: duckdb\n"
    "      query: \"SELECT 1; CREATE SECRET (TYPE gcs, KEY_ID{run}'k', SECRET{run}'s')\"\n"
)


def classes_with_runs() -> str:
    lines = ["workload:"]
    for i, run in enumerate((" " * 20_000, "\t" * 20_000)):
        lines += [value.format(run=run, i=i) for value in CLASS_VALUES if i == 0 or "{i}" in value]
    return playbook("\n".join(lines) + "\n", CLASS_STEP.format(run=" " * 20_000))


def shapes_with_runs() -> str:
    lines = []
    for run in (" " * 10_000, "\t" * 10_000, "\n" * 10_000):
        lines.extend(shape.format(run=run) for shape in CREDENTIAL_SHAPES)
    # and one literal the detector must still find after all of them
    return "\n".join(lines) + f"\npassword = '{SECRET}'"


def assert_no_dag(out: Path) -> None:
    assert not out.exists() or not list(out.rglob("*.py")), "a DAG file was written"


def assert_text(path: Path, text: str) -> None:
    assert path.read_text() == text, f"{path} was changed"


def assert_only(folder: Path, names: set[str]) -> None:
    assert {p.name for p in folder.iterdir()} == names, f"something was written into {folder}"


def two_sources(folder: Path) -> None:
    """The second folder's compile keeps the first folder's DAG (same folder name `playbooks`),
    and removing a playbook of the first folder removes only its own DAG."""
    second = run_cli(["compile", "b/playbooks", "-o", "out"], folder, {})
    assert second.returncode == 0, second.stdout
    assert (folder / "out/one.py").exists() and (folder / "out/two.py").exists()
    (folder / "a/playbooks/one.yaml").unlink()
    (folder / "a/playbooks/three.yaml").write_text(playbook())
    third = run_cli(["compile", "a/playbooks", "-o", "out"], folder, {})
    assert third.returncode == 0, third.stdout
    assert not (folder / "out/one.py").exists(), "the first folder's orphan stays"
    assert (folder / "out/two.py").exists(), "the second folder's DAG was removed as an orphan"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, "-m", "noetl_compile", *argv],
        cwd=cwd,
        env={k: v for k, v in environment.items() if v != ""},
        capture_output=True,
        timeout=300,
        check=False,
        text=True,
        errors="backslashreplace",
    )


def build(folder: Path, files: Files) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
