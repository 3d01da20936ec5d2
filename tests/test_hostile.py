"""Hostile inputs: `noetlc check` and `compile` never crash, hang, leak or lie.

One case per kind of attack, grouped by the items of issue 10 (1 YAML loader limits, 2 linear
time, 3 template truth, 4 secrets in output, 6 file system, 7 output escaping). Each case builds
its files in a fresh folder, runs the real CLI in a child process (a segfault or a hang must not
take the test run with it) and asserts the exit status, the diagnostics (code, line and column)
and a generous time bound; and for every case: no traceback, no death by signal, and every line
of concise output is one `path:line:col: CODE message` finding or the summary.
"""

from __future__ import annotations

import base64
import os
import re
import resource
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MIN_CASES = 60
HEADER = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: hostile, path: hostile}\n"
STEPS = "workflow:\n  - step: start\n    tool: {kind: noop}\n"
_FINDING = re.compile(r"^.+:\d+:\d+: [A-Z]\d{3} \[(?:error|warning|info)\] \S.*$")
_SUMMARY = re.compile(
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


def _classes_with_runs() -> str:
    lines = ["workload:"]
    for i, run in enumerate((" " * 20_000, "\t" * 20_000)):
        lines += [value.format(run=run, i=i) for value in CLASS_VALUES if i == 0 or "{i}" in value]
    return playbook("\n".join(lines) + "\n", CLASS_STEP.format(run=" " * 20_000))


def _shapes_with_runs() -> str:
    lines = []
    for run in (" " * 10_000, "\t" * 10_000, "\n" * 10_000):
        lines.extend(shape.format(run=run) for shape in CREDENTIAL_SHAPES)
    # and one literal the detector must still find after all of them
    return "\n".join(lines) + f"\npassword = '{SECRET}'"


CASES: list[Case] = [
    # -- 1. YAML loader limits -----------------------------------------------------------------
    Case(
        "deep_flow_sequence",
        lambda: {"p.yaml": "a: " + "[" * 200_000 + "]" * 200_000 + "\n"},
        ["check", "p.yaml"],
        1,
        [one("Y001", "1:103") + "invalid YAML: nesting deeper than 100"],
    ),
    Case(
        "deep_flow_mapping",
        lambda: {"p.yaml": "a: " + "{a: " * 100_000 + "1" + "}" * 100_000},
        ["check", "p.yaml"],
        1,
        [one("Y001", "1:400") + "invalid YAML: nesting deeper"],
    ),
    Case(
        "deep_mixed_flow",
        lambda: {"p.yaml": "a: " + "[{a: " * 50_000 + "1" + "}]" * 50_000},
        ["check", "p.yaml"],
        1,
        [one("Y001") + "invalid YAML: nesting deeper"],
    ),
    Case(
        "deep_block_mapping",
        lambda: {"p.yaml": "".join(" " * i + "a:\n" for i in range(3000)) + " " * 3000 + "b: 1\n"},
        ["check", "p.yaml"],
        1,
        [one("Y001", "101:101") + "invalid YAML: nesting deeper"],
    ),
    Case(
        # libyaml >= 0.2.6 trips its own 1000-level limit in its look-ahead before its parser
        # meets the stray `}`: the first mistake in the text is still the one reported.
        "syntax_error_before_deep_nesting",
        lambda: {"p.yaml": "a: " + "[" * 50 + "}" + "[" * 5000 + "]" * 5000 + "\n"},
        ["check", "p.yaml"],
        1,
        [one("Y001", "1:54") + "invalid YAML: while parsing a flow node"],
        absent=["nesting"],
    ),
    Case(
        "deep_block_sequence",
        lambda: {"p.yaml": "a: " + "- " * 20_000 + "x\n"},
        ["check", "p.yaml"],
        1,
        [one("Y001")],
    ),
    Case(
        "billion_laughs",
        lambda: {"p.yaml": laughs()},
        ["check", "p.yaml"],
        1,
        [one("Y008") + "aliases expand this document"],
    ),
    Case(
        "billion_laughs_compile",
        lambda: {"p.yaml": laughs()},
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("Y008")],
        after=lambda d: _assert_no_dag(d / "out"),
    ),
    Case(
        "laughs_through_mappings",
        lambda: {"p.yaml": laughs(merge=True)},
        ["check", "p.yaml"],
        1,
        [one("Y008")],
    ),
    Case(
        "wide_alias_reuse",
        lambda: {
            "p.yaml": playbook(
                "workload:\n  big: &big ["
                + ", ".join(["x"] * 5000)
                + "]\n  uses: ["
                + ", ".join(["*big"] * 2000)
                + "]\n"
            )
        },
        ["check", "p.yaml"],
        1,
        [one("Y008")],
    ),
    Case(
        "tag_bool_maybe",
        lambda: {"p.yaml": playbook("workload:\n  flag: !!bool maybe\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:9") + "invalid !!bool value: 'maybe'"],
    ),
    Case(
        "tag_timestamp_junk",
        lambda: {"p.yaml": playbook("workload:\n  at: !!timestamp junk\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:7") + "invalid !!timestamp value"],
    ),
    Case(
        "tag_float_junk",
        lambda: {"p.yaml": playbook("workload:\n  f: !!float abc\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:6") + "invalid !!float value"],
    ),
    Case(
        "tag_map_on_scalar",
        lambda: {"p.yaml": playbook("workload:\n  m: !!map x\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:6") + "unsupported YAML tag '!!map' on a scalar"],
    ),
    Case(
        "tag_seq_on_mapping",
        lambda: {"p.yaml": playbook("workload:\n  s: !!seq {a: 1}\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:6") + "tag '!!seq' does not fit a mapping"],
    ),
    Case(
        "tag_str_on_sequence",
        lambda: {"p.yaml": playbook("workload:\n  s: !!str [1, 2]\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:6") + "tag '!!str' does not fit a sequence"],
    ),
    Case(
        "tag_binary",
        lambda: {"p.yaml": playbook("workload:\n  b: !!binary aGVsbG8=\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:6") + "unsupported YAML tag '!!binary'"],
    ),
    Case(
        "tag_python_object",
        lambda: {"p.yaml": playbook("workload:\n  o: !!python/object:os.system id\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:6") + "unsupported YAML tag"],
    ),
    Case(
        "huge_decimal_int",
        lambda: {"p.yaml": playbook("workload:\n  n: " + "9" * 5000 + "\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:6") + "invalid !!int value: 5000 digits"],
    ),
    Case(
        "huge_hex_int",
        lambda: {"p.yaml": playbook("workload:\n  n: 0x" + "f" * 5000 + "\n")},
        ["check", "p.yaml"],
        1,
        [one("Y005", "5:6") + "invalid !!int value"],
    ),
    Case(
        "huge_int_compile",
        lambda: {"p.yaml": playbook("workload:\n  n: 0b" + "1" * 20_000 + "\n")},
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("Y005", "5:6")],
    ),
    Case(
        "nul_byte",
        lambda: {"p.yaml": playbook("workload:\n  a: x\x00y\n")},
        ["check", "p.yaml"],
        1,
        [one("Y001", "5:7") + "invalid YAML: control character U\\+0000"],
    ),
    Case(
        "bell_character",
        lambda: {"p.yaml": playbook("workload:\n  a: \x07\n")},
        ["check", "p.yaml"],
        1,
        [one("Y001", "5:6") + "invalid YAML: control character U\\+0007"],
    ),
    Case(
        "nul_byte_full_format",
        lambda: {"p.yaml": playbook("workload:\n  a: x\x00y\n")},
        ["check", "p.yaml", "--format", "full"],
        1,
        [r"^5 \|   a: x\\x00y$"],
        one_line=False,
    ),
    Case(
        "not_utf8",
        lambda: {"p.yaml": (HEADER + "workload:\n  a: caf").encode() + b"\xe9\n" + STEPS.encode()},
        ["check", "p.yaml"],
        1,
        [one("Y001", "5:9") + "not UTF-8 text"],
    ),
    # A document of nothing (`---` alone, `~`): once "all checks passed" while compile failed
    # the file without a word.
    Case(
        "document_marker_only",
        lambda: {"p.yaml": "---\n", "q.yaml": "--- ~\n"},
        ["check", "p.yaml", "q.yaml"],
        1,
        [one("Y006", "2:1") + "empty document", one("Y006", "1:5", "q.yaml") + "empty document"],
    ),
    Case(
        "document_marker_only_compile",
        lambda: {"p.yaml": "# nothing here\n---\n...\n"},
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("Y006") + "empty document"],
        after=lambda d: _assert_no_dag(d / "out"),
    ),
    # `step:` with no name: the step was dropped without a word and the rest compiled.
    Case(
        "step_name_null_or_blank",
        lambda: {
            "p.yaml": HEADER
            + "workflow:\n  - step: start\n    tool: {kind: noop}\n"
            + "  - step:\n    tool: {kind: noop}\n  - step: ' '\n    tool: {kind: noop}\n"
        },
        ["check", "p.yaml"],
        1,
        [
            one("S101", "7:5") + "workflow item 2 needs a `step` name: it is empty",
            one("S101", "9:11") + "workflow item 3 needs a `step` name: it is empty",
        ],
    ),
    # A key written with nothing after it (`kind:`, `step:`, `in:`, `code:`) where a value is
    # needed: each once dropped its tool, arc or loop without a word and the playbook passed.
    Case(
        "null_where_a_value_is_needed",
        lambda: {
            "p.yaml": HEADER
            + "workflow:\n  - step: start\n    tool: {kind: python, code: ~}\n"
            + "    next:\n      - step:\n      - step: b\n"
            + "  - step: b\n    loop: {in: ~, iterator: ~}\n    tool: {kind: ~}\n"
        },
        ["check", "p.yaml"],
        1,
        [
            one("C501", "6:26") + "the python tool of step 'start' has no code",
            one("S101", "8:9") + "`step` of arc 1 of `next` of step 'start' is empty",
            one("S108", "11:12") + "`in` of the loop of step 'b' is empty",
            one("S108", "11:19") + "loop `iterator` of step 'b' is empty",
            one("S101", "12:12") + "`kind` of the tool of step 'b' is empty",
        ],
    ),
    Case(
        "byte_order_mark",
        lambda: {"p.yaml": "\ufeff" + playbook()},
        ["check", "p.yaml"],
        0,
        [r"^All checks passed"],
    ),
    Case(
        "five_megabyte_line",
        lambda: {"p.yaml": playbook('workload:\n  a: "' + "x" * 5_000_000 + '"\n')},
        ["check", "p.yaml"],
        0,
        [r"^All checks passed"],
        seconds=60,
    ),
    Case(
        "crash_isolation_jobs",
        lambda: {
            **{f"ok{i:02}.yaml": playbook() for i in range(40)},
            "z_deep.yaml": "a: " + "[" * 100_000 + "]" * 100_000,
            "z_laughs.yaml": laughs(),
        },
        ["check", ".", "-j", "2"],
        1,
        [
            one("Y001", file="./z_deep.yaml"),
            one("Y008", file="./z_laughs.yaml"),
            r"in 42 playbooks",
        ],
    ),
    # -- 2. linear time ------------------------------------------------------------------------
    Case(
        "chain_10k_check",
        lambda: {"p.yaml": chain(10_000)},
        ["check", "p.yaml"],
        0,
        [r"^All checks passed"],
        seconds=60,
    ),
    Case(
        "chain_10k_compile",
        lambda: {"p.yaml": chain(10_000)},
        ["compile", "p.yaml", "-o", "out"],
        0,
        [r"^1 of 1 playbook"],
        seconds=90,
    ),
    # Every step writes a ctx variable the next one reads: reaching definitions once carried
    # every variable to every later step (10k steps: 30 s, 20k: about 2 minutes; now 3 and 6 s).
    Case(
        "ctx_write_chain_20k_compile",
        lambda: {"p.yaml": ctx_chain(20_000)},
        ["compile", "p.yaml", "-o", "out"],
        0,
        [r"^1 of 1 playbook"],
        seconds=60,
    ),
    # Thousands of postgres steps, each routed to by an arc: finding the args passed into a
    # step once scanned every arc of the playbook for each tool (10k steps: 70 s; now 1.5 s).
    Case(
        "postgres_steps_10k_check",
        lambda: {"p.yaml": postgres_chain(10_000)},
        ["check", "p.yaml"],
        0,
        # The chain is case-v2 by `case` alone, so D941 says once (not 9,999 times) that the
        # canonical engine would route none of these rules.
        [
            r"^p\.yaml:9:16: D941 \[info\] .*and 9998 more such rules",
            r"^Found 1 info in 1 playbook",
        ],
        seconds=30,
    ),
    Case(
        "fan_out_10k_compile",
        lambda: {"p.yaml": fan_out(10_000)},
        ["compile", "p.yaml", "-o", "out"],
        0,
        [r"^1 of 1 playbook"],
        seconds=90,
    ),
    Case(
        "racing_ctx_writers_5k",  # F404 compares writers pairwise: must stay near-linear
        lambda: {"p.yaml": racing_writers(5000)},
        ["check", "p.yaml", "--select", "F404"],
        0,
        [one("F404") + "`ctx.x` is written by steps 'b0' and 'b1'"],
        seconds=60,
    ),
    # Writers of one variable after a join are compared pair by pair: a chain of 3,000 such
    # writers (4.5 million pairs) stops at the budget with F405, in seconds, instead of minutes.
    Case(
        "joined_ctx_writers_3k",
        lambda: {"p.yaml": joined_writers(3000)},
        ["check", "p.yaml", "--select", "F404,F405"],
        0,
        [
            one("F405", "22:11") + "the search for parallel writes stopped at `ctx.x` after "
            "200,000 comparisons"
        ],
        seconds=30,
    ),
    # Writers in different branches of one fork race without a comparison: a chain of 20,000
    # writers in each of two branches (once 2 x 200 million comparisons).
    Case(
        "branch_ctx_writer_chains_20k",
        lambda: {"p.yaml": branch_writer_chains(20_000)},
        ["check", "p.yaml", "--select", "F404,F405"],
        0,
        [one("F404") + "`ctx.x` is written by steps 'a0' and 'b0'"],
        seconds=60,
    ),
    Case(
        "many_unknown_names",
        lambda: {
            "p.yaml": playbook(
                steps=http_step('"{{ [' + ", ".join(f"u{i}" for i in range(20_000)) + '] }}"')
            )
        },
        ["check", "p.yaml", "--select", "T302"],
        0,
        [one("T302", "8:17") + "unknown name 'u0'", one("T302") + "unknown name 'u19999'"],
        seconds=60,
    ),
    # One unknown name per step among thousands of step names: each did-you-mean once compared
    # with every name of similar length (5k arcs: over 300 s; 10k templates: 200 s).
    Case(
        "unknown_step_in_every_arc",
        lambda: {"p.yaml": typo_chain(5_000)},
        ["check", "p.yaml", "--select", "R201"],
        1,
        [
            one("R201", "8:15") + "step 'start' routes to unknown step 'step_numbr_1'; "
            "did you mean 'step_number_1'",
            # No step is close to the last one: a warning, the engine skips that arc.
            one("R201")
            + "step 'step_number_4999' routes to unknown step 'step_numbr_5000'; the engine "
            "skips this arc",
        ],
        seconds=30,
    ),
    Case(
        "unknown_name_in_every_step",
        lambda: {"p.yaml": typo_templates(10_000)},
        ["check", "p.yaml", "--select", "T302,T307"],
        0,
        [one("T302", "8:55") + "unknown name 'stp_0'", one("T302") + "unknown name 'stp_9999'"],
        seconds=30,
    ),
    Case(
        "many_templates_in_block",
        lambda: {"p.yaml": playbook(steps=python_step("{{ u }}\n" * 20_000))},
        ["check", "p.yaml", "--select", "T302"],
        0,
        [one("T302", "9:12"), one("T302", "20008:12")],
        seconds=60,
    ),
    Case(
        "spaces_in_expression",
        lambda: {
            "p.yaml": playbook('workload:\n  a: "{{ nothing_like_it' + " " * 200_000 + '}}"\n')
        },
        ["check", "p.yaml", "--select", "T"],
        0,
        [one("T302", "5:10")],
    ),
    Case(
        "unclosed_comments_in_code",
        lambda: {"p.yaml": playbook(steps=python_step("x = 1 {#" * 20_000))},
        ["check", "p.yaml"],
        1,
        [one("T301", "9:15") + ".*Missing end of comment tag"],
    ),
    Case(
        "unclosed_expressions_in_code",
        lambda: {"p.yaml": playbook(steps=python_step("x = {{" * 20_000))},
        ["check", "p.yaml"],
        1,
        [one("T301")],
    ),
    Case(
        "braces_run",
        lambda: {"p.yaml": playbook(steps=python_step("{" * 100_000))},
        ["check", "p.yaml"],
        1,
        [one("T301")],
    ),
    Case(
        "secret_pattern_runs",
        lambda: {
            "p.yaml": playbook(
                steps=python_step("password=" * 30_000 + "\n" + "a://" + "b" * 100_000 + "@")
            )
        },
        ["check", "p.yaml", "--select", "X"],
        1,
        [one("X601", "9:18")],
    ),
    *[
        Case(
            f"bearer_header_space_run_{command}",
            lambda: {"p.yaml": playbook(steps=BEARER_SPACES)},
            [command, "p.yaml", *(["-o", "out"] if command == "compile" else [])],
            1,
            [one("X601", "10:32") + "`Authorization` holds a literal secret"],
            after=(lambda d: _assert_no_dag(d / "out")) if command == "compile" else None,
        )
        for command in ("check", "compile")
    ],
    Case(
        # Every credential shape the detector reads, with a 10,000-character run of spaces (and
        # one of tabs and newlines) where its pattern scans: each is read once, not once per
        # character of the run.
        "credential_shapes_whitespace_runs",
        lambda: {"p.yaml": playbook(steps=python_step(_shapes_with_runs()))},
        ["check", "p.yaml", "--select", "X"],
        1,
        [one("X601")],
        seconds=30.0,
    ),
    *[
        Case(
            # Whitespace runs inside every credential-shaped YAML value of the classes above:
            # read in linear time, the literals still found, nothing compiled.
            f"credential_classes_whitespace_runs_{command}",
            lambda: {"p.yaml": _classes_with_runs()},
            [command, "p.yaml", "--select", "X", *(["-o", "out"] if command == "compile" else [])],
            1,
            # the description's password after the runs, then one finding per class
            [one("X601", "5:20063"), one("X601", "11:100089"), one("X601", "26:24")],
            seconds=30.0,
            after=(lambda d: _assert_no_dag(d / "out")) if command == "compile" else None,
        )
        for command in ("check", "compile")
    ],
    Case(
        "long_code_spaces",
        lambda: {
            "p.yaml": playbook(
                steps=python_step("x = 1" + " " * 200_000 + "\ny = (" + " " * 100_000)
            )
        },
        ["check", "p.yaml"],
        1,
        [one("C501", "10:13")],
    ),
    # -- 3. template truth ---------------------------------------------------------------------
    Case(
        "comment_without_template",
        lambda: {"p.yaml": playbook('workload:\n  a: "note {# not closed"\n')},
        ["check", "p.yaml"],
        1,
        [one("T301", "5:12") + ".*Missing end of comment tag"],
    ),
    Case(
        "comment_in_when",
        lambda: {
            "p.yaml": playbook(
                steps='workflow:\n  - step: start\n    tool: {kind: noop}\n    next:\n      - step: end\n        when: "{{ x }} {# y"\n  - step: end\n    tool: {kind: noop}\n'
            )
        },
        ["check", "p.yaml"],
        1,
        [one("T301", r"9:\d+")],
    ),
    Case(
        "nested_parentheses",
        lambda: {
            "p.yaml": playbook('workload:\n  a: "{{ ' + "(" * 3000 + "1" + ")" * 3000 + ' }}"\n')
        },
        ["check", "p.yaml"],
        1,
        [one("T301", "5:7") + ".*nested too deeply"],
    ),
    Case(
        "nested_lists",
        lambda: {"p.yaml": playbook('workload:\n  a: "{{ ' + "[" * 500 + "]" * 500 + ' }}"\n')},
        ["check", "p.yaml"],
        1,
        [one("T301", "5:7")],
    ),
    Case(
        "not_chain",
        lambda: {
            "p.yaml": playbook('workload:\n  a: "{% if ' + "not " * 3000 + 'x %}y{% endif %}"\n')
        },
        ["check", "p.yaml"],
        1,
        [one("T301", "5:7")],
    ),
    Case(
        "unary_minus_chain",
        lambda: {"p.yaml": playbook('workload:\n  a: "{{ ' + "-" * 3000 + '1 }}"\n')},
        ["check", "p.yaml"],
        1,
        [one("T301", "5:7")],
    ),
    Case(
        "nested_if_blocks",
        lambda: {
            "p.yaml": playbook(
                'workload:\n  a: "' + "{% if a %}" * 400 + "x" + "{% endif %}" * 400 + '"\n'
            )
        },
        ["check", "p.yaml"],
        1,
        [one("T301", "5:7")],
    ),
    Case(
        "conditional_chain",
        lambda: {"p.yaml": playbook('workload:\n  a: "{{ ' + "a if b else " * 600 + 'c }}"\n')},
        ["check", "p.yaml"],
        1,
        [one("T301", "5:7")],
    ),
    Case(
        "long_addition_chain",  # Jinja's generated code nests one level per `+`
        lambda: {"p.yaml": playbook(steps=http_step('"{{ ' + " + ".join(["x"] * 5000) + ' }}"'))},
        ["check", "p.yaml"],
        1,
        [one("T301", "8:13") + ".*nested too deeply"],
    ),
    Case(
        # Each `.name` nests one Getattr node, which Jinja compiles by recursion; the scan's own
        # parse of a dotted name is flat, so only asking Jinja finds it.
        "attribute_chain",
        lambda: {"p.yaml": playbook('workload:\n  a: "{{ workload' + ".b" * 3000 + ' }}"\n')},
        ["check", "p.yaml"],
        1,
        [one("T301", "5:7") + ".*nested too deeply"],
    ),
    Case(
        # Python refuses more than 20 nested loops in the code Jinja generates.
        "nested_for_blocks",
        lambda: {
            "p.yaml": playbook(
                'workload:\n  a: "'
                + "".join(f"{{% for x{i} in y %}}" for i in range(21))
                + "x"
                + "{% endfor %}" * 21
                + '"\n'
            )
        },
        ["check", "p.yaml"],
        1,
        [one("T301", "5:7") + ".*too many statically nested blocks"],
    ),
    Case(
        # Depth is per tag: 200,000 small tags in one string are no deeper than one, and are not
        # handed to Jinja's compiler as a whole (that took ~20 s).
        "many_small_templates_in_one_string",
        lambda: {
            "p.yaml": playbook('workload:\n  x: 1\n  a: "' + "{{ workload.x }} " * 200_000 + '"\n')
        },
        ["check", "p.yaml"],
        0,
        [r"^All checks passed: 1 playbook\.$"],
        seconds=10,
    ),
    Case(
        "shallow_nesting_is_fine",
        lambda: {
            "p.yaml": playbook(
                'workload:\n  x: 1\n  a: "{{ ' + "(" * 20 + "x" + ")" * 20 + ' }}"\n'
            )
        },
        ["check", "p.yaml"],
        0,
        [r"^All checks passed"],
    ),
    # A task with no kind where one is needed: check passed it, and the DAG file failed to
    # import (the operator validates its payload when the file is parsed).
    Case(
        "task_without_kind",
        lambda: {
            "v1.yaml": "apiVersion: noetl.io/v1\nkind: Playbook\nname: a\npath: a\n"
            "workflow:\n  - step: start\n    type: iterator\n    collection: [1]\n"
            "    element: x\n    task:\n      code: 'def main(): return 1'\n",
            "wb.yaml": HEADER + "workbook:\n  - name: t\n    tool: {code: 'result = 1'}\n"
            "workflow:\n  - step: start\n    tool: {kind: workbook, name: t}\n",
        },
        ["check", "v1.yaml", "wb.yaml"],
        1,
        [
            one("S101", "11:7", "v1.yaml") + "the task of step 'start' needs `type`",
            one("S101", "6:11", "wb.yaml") + "the tool of workbook task 't' needs `kind`",
        ],
    ),
    # What Jinja parses but the runtime can never render: a template loaded from elsewhere (no
    # loader) and an attribute the sandbox refuses; check passed both, every run failed.
    Case(
        "template_loads_another_template",
        lambda: {
            "p.yaml": playbook(
                "workload:\n  a: \"{% include 'x.j2' %}\"\n  b: \"{% from 'm' import f %}{{ f() }}\"\n"
            )
        },
        ["check", "p.yaml"],
        1,
        [
            one("T301", "5:10") + "`{% include %}` in workload.a loads another template",
            one("T301", "6:10") + "`{% from %}` in workload.b",
        ],
    ),
    Case(
        "template_escapes_the_sandbox",
        lambda: {"p.yaml": playbook('workload:\n  a: "{{ workload.__class__.__mro__ }}"\n')},
        ["check", "p.yaml"],
        1,
        [one("T301", "5:10") + "`__class__` in workload.a: the runtime renders in Jinja's sandbox"],
    ),
    # What Python's parser or compiler gives up on (nesting past its stack or recursion limit,
    # no line named) is C501 too: the worker's compile() fails the same way.
    Case(
        "python_operator_chain_past_recursion_limit",
        lambda: {"p.yaml": playbook(steps=python_step("a = 1\nb = a" + " + a" * 100_000))},
        ["check", "p.yaml"],
        1,
        [one("C501", "10:9") + r".*nested too deeply .*\(RecursionError\)"],
    ),
    Case(
        "python_unary_chain_past_parser_stack",
        lambda: {"p.yaml": playbook(steps=python_step("b = " + "-" * 100_000 + "1"))},
        ["check", "p.yaml"],
        1,
        [one("C501", "9:9") + r".*nested too deeply .*\(MemoryError\)"],
    ),
    Case(
        "python_attribute_chain_in_code_b64",
        lambda: {
            "p.yaml": playbook(
                steps="workflow:\n  - step: start\n    tool:\n      kind: python\n"
                "      code_b64: "
                + base64.b64encode(("import os\nx = os" + ".sep" * 60_000).encode()).decode()
                + "\n"
            )
        },
        ["check", "p.yaml"],
        1,
        [one("C501", "8:17") + r".*nested too deeply"],
    ),
    # The full form quoted the whole source line under each finding: 3,000 findings on a line
    # of a megabyte printed 2 GB. It quotes a window around the column now.
    Case(
        "full_format_long_line_many_findings",
        lambda: {
            "p.yaml": playbook(
                'workload:\n  a: "'
                + " ".join(f"{{{{ u{i} }}}}" for i in range(3000))
                + "x" * 1_000_000
                + '"\n'
            )
        },
        ["check", "p.yaml", "--format", "full"],
        0,
        [
            r"^5 \|   a: \"\{\{ u0 \}\} .{100,130}\.\.\.$",
            r"^5 \| \.\.\..{0,130}u2999 .{0,80}\.\.\.$",
            r"^Found 3000 warnings in 1 playbook\.$",
        ],
        seconds=20,
        one_line=False,
    ),
    # -- 4. secrets never printed --------------------------------------------------------------
    *[
        Case(
            f"secret_masked_{fmt}",
            lambda: {
                "p.yaml": playbook(
                    f'workload:\n  password: {SECRET}\n  dsn: "postgresql://u:{SECRET}@h/x"\n'
                )
            },
            ["check", "p.yaml", "--format", fmt],
            1,
            [r"X601"],
            absent=[SECRET, "Zq9"],
            one_line=fmt == "concise",
        )
        for fmt in ("concise", "full", "json", "github", "sarif")
    ],
    Case(
        "secret_not_compiled",
        lambda: {"p.yaml": playbook(f"workload:\n  api_key: {SECRET}\n")},
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("X601", "5:12")],
        absent=[SECRET],
        after=lambda d: _assert_no_dag(d / "out"),
    ),
    # -- 6. file system and output safety ------------------------------------------------------
    Case(
        "fifo_in_folder",
        lambda: {"ok.yaml": playbook(), "pipe.yaml": fifo},
        ["check", "."],
        0,
        [one("E003", "1:1", "./pipe.yaml") + "skipped: a FIFO", r"in 1 playbook"],
    ),
    Case(
        "fifo_given",
        lambda: {"pipe.yaml": fifo},
        ["check", "pipe.yaml"],
        0,
        [one("E003", "1:1", "pipe.yaml") + "skipped: a FIFO"],
    ),
    Case(
        "symlink_to_device",
        lambda: {"ok.yaml": playbook(), "zero.yaml": symlink_to("/dev/zero")},
        ["check", "."],
        0,
        [one("E003", "1:1", "./zero.yaml") + "skipped: a device file"],
    ),
    # /proc files pass for empty regular files: /proc/kmsg blocked check for ever, and
    # /proc/self/environ would have been read (and quoted by --format full) with its secrets.
    Case(
        "symlink_to_proc_files",
        lambda: {
            "ok.yaml": playbook(),
            "kmsg.yaml": symlink_to("/proc/kmsg"),
            "env.yaml": symlink_to("/proc/self/environ"),
        },
        ["check", ".", "--format", "full"],
        0,
        [
            r"^\./kmsg\.yaml:1:1: E003 \[info\] skipped: a file of /proc or /sys",
            r"^\./env\.yaml:1:1: E003 \[info\] skipped: a file of /proc or /sys",
        ],
        absent=["PATH="],
        seconds=20,
        one_line=False,
    ),
    Case(
        "symlink_to_fifo",
        lambda: {"pipe": fifo, "link.yaml": symlink_to("pipe")},
        ["check", "."],
        0,
        [one("E003", "1:1", "./link.yaml") + "skipped: a FIFO"],
    ),
    Case(
        "dangling_symlink",
        lambda: {"gone.yaml": symlink_to("nowhere.yaml")},
        ["check", "."],
        1,
        [one("E001", "1:1", "./gone.yaml")],
    ),
    Case(
        "compile_fifo_folder",
        lambda: {"in/ok.yaml": playbook(), "in/pipe.yaml": fifo},
        ["compile", "in", "-o", "out"],
        0,
        [one("E003", "1:1", "in/pipe.yaml")],
        one_line=False,
    ),
    Case(
        "compile_missing_input",
        dict,
        ["compile", "nope.yaml", "-o", "out"],
        2,  # a path that does not exist is a usage error (issue 11)
        [one("E001", "1:1", "nope.yaml") + "no such file or directory"],
    ),
    Case(
        "compile_output_is_a_file",
        lambda: {"p.yaml": playbook(), "out": "not a folder\n"},
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("E004", "1:1") + "output out is not a folder"],
    ),
    Case(
        "compile_target_is_symlink",
        lambda: {
            "p.yaml": playbook(),
            "victim.txt": "keep\n",
            "out/p.py": symlink_to("../victim.txt"),
        },
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("E004", "1:1") + "cannot write out/p.py: it is a symlink"],
        after=lambda d: _assert_text(d / "victim.txt", "keep\n"),
    ),
    Case(
        "compile_subfolder_symlink_out",
        lambda: {
            "in/sub/p.yaml": playbook(),
            "elsewhere/.keep": "",
            "out/sub": symlink_to("../elsewhere"),
        },
        ["compile", "in", "-o", "out"],
        1,
        [one("E004", "1:1", "in/sub/p.yaml") + ".*leads outside the output folder"],
        after=lambda d: _assert_only(d / "elsewhere", {".keep"}),
    ),
    Case(
        "compile_target_is_fifo",
        lambda: {"p.yaml": playbook(), "out/p.py": fifo},
        ["compile", "p.yaml", "-o", "out"],
        1,
        [one("E004", "1:1") + "cannot write out/p.py: it is not a regular file"],
    ),
    # Python 3.11's os.walk recurses once per level: a tree 1,100 folders deep ended check with
    # a RecursionError traceback.
    Case(
        "deep_folder_tree",
        lambda: {"a": deep_tree(1100, playbook()), "q.yaml": playbook().replace("hostile", "q")},
        ["check", "."],
        0,
        [r"^All checks passed: 2 playbooks\.$"],
    ),
    Case(
        "deep_folder_tree_compile",  # and os.makedirs recursed once per level of the output
        lambda: {"a": deep_tree(1100, playbook())},
        ["compile", ".", "-o", "out"],
        0,
        [r"^1 of 1 playbook\(s\) compiled; 1 written"],
    ),
    Case(
        "two_sources_one_output",
        lambda: {
            "a/playbooks/one.yaml": playbook(),
            "b/playbooks/two.yaml": playbook(),
        },
        ["compile", "a/playbooks", "-o", "out"],
        0,
        [r"^1 of 1"],
        one_line=False,
        after=lambda d: _two_sources(d),
    ),
    Case(
        "non_ascii_under_c_locale",
        lambda: {"p.yaml": playbook("né: 1\n")},
        ["check", "p.yaml"],
        0,
        [one("S103", "4:1") + r"unknown key 'n\\xe9'"],
        env={"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
    ),
    Case(
        "dev_null_given",
        dict,
        ["check", "/dev/null"],
        0,
        [one("E003", "1:1", "/dev/null") + "skipped: a device file"],
    ),
    # -- 7. output that cannot be forged -------------------------------------------------------
    Case(
        "newline_in_file_name",
        lambda: {"a\nb.yaml": playbook("bad: 1\n")},
        ["check", "."],
        0,
        [one("S103", "4:1", "./a\\nb.yaml")],
    ),
    Case(
        "carriage_return_in_file_name",
        lambda: {"a\rb.yaml": playbook("bad: 1\n")},
        ["check", "."],
        0,
        [one("S103", "4:1", "./a\\rb.yaml")],
    ),
    Case(
        "escape_in_file_name",
        lambda: {"a\x1b[2Jb.yaml": playbook("bad: 1\n")},
        ["check", "."],
        0,
        [one("S103", "4:1", "./a\\x1b[2Jb.yaml")],
    ),
    Case(
        "newline_in_key",
        lambda: {"p.yaml": playbook('"x\\nfake.yaml:1:1: X601 forged": 1\n')},
        ["check", "p.yaml"],
        0,
        [one("S103", "4:1") + r"unknown key 'x\\nfake"],
    ),
    Case(
        "github_properties",
        lambda: {"a,b:c%.yaml": playbook("bad: 1\n")},
        ["check", "a,b:c%.yaml", "--format", "github"],
        0,
        [r"^::warning file=a%2Cb%3Ac%25\.yaml,line=4,col=1,title=S103::S103 unknown key"],
        one_line=False,
    ),
    Case(
        "github_message_newline",
        lambda: {"p.yaml": playbook('"x\\ny": 1\n')},
        ["check", "p.yaml", "--format", "github"],
        0,
        [r"^::warning file=p\.yaml,line=4,col=1,title=S103::S103 unknown key 'x\\ny'"],
        one_line=False,
    ),
]


def _assert_no_dag(out: Path) -> None:
    assert not out.exists() or not list(out.rglob("*.py")), "a DAG file was written"


def _assert_text(path: Path, text: str) -> None:
    assert path.read_text() == text, f"{path} was changed"


def _assert_only(folder: Path, names: set[str]) -> None:
    assert {p.name for p in folder.iterdir()} == names, f"something was written into {folder}"


def _two_sources(folder: Path) -> None:
    """The second folder's compile keeps the first folder's DAG (same folder name `playbooks`),
    and removing a playbook of the first folder removes only its own DAG."""
    second = _run(["compile", "b/playbooks", "-o", "out"], folder, {})
    assert second.returncode == 0, second.stdout
    assert (folder / "out/one.py").exists() and (folder / "out/two.py").exists()
    (folder / "a/playbooks/one.yaml").unlink()
    (folder / "a/playbooks/three.yaml").write_text(playbook())
    third = _run(["compile", "a/playbooks", "-o", "out"], folder, {})
    assert third.returncode == 0, third.stdout
    assert not (folder / "out/one.py").exists(), "the first folder's orphan stays"
    assert (folder / "out/two.py").exists(), "the second folder's DAG was removed as an orphan"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
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


def _build(folder: Path, files: Files) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def test_suite_size():
    assert len(CASES) >= MIN_CASES
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.fixture
def case_folder(tmp_path: Path):
    """The case's folder, removed afterwards in a loop: pytest removes old temporary folders
    with shutil.rmtree, which recurses once per level and fails on a deep_tree."""
    yield tmp_path
    try:
        _remove_tree(tmp_path)
    except OSError:
        pass  # something the case made unremovable: pytest's own clean-up gets the rest


def _remove_tree(top: Path) -> None:
    stack, folders = [str(top)], []
    while stack:
        folder = stack.pop()
        folders.append(folder)
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    os.unlink(entry.path)
    for folder in reversed(folders[1:]):
        os.rmdir(folder)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_input(case: Case, case_folder: Path) -> None:
    tmp_path = case_folder
    _build(tmp_path, case.files())
    # The bound is on the CPU the command used, not its wall time: a quadratic walk or a
    # backtracking pattern burns CPU, while a loaded CI machine only stretches the wall clock.
    # A hang that burns nothing is the 300 s wall timeout.
    before = _children_cpu()
    try:
        done = _run(case.argv, tmp_path, case.env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case.name}: no answer within 300 s (a hang)")
    elapsed = _children_cpu() - before
    output = done.stdout + done.stderr
    assert done.returncode >= 0, f"killed by signal {-done.returncode}"
    assert "Traceback" not in output, output[-3000:]
    assert done.returncode == case.status, output[-3000:]
    assert elapsed < case.seconds, f"used {elapsed:.1f} s of CPU (bound {case.seconds} s)"
    lines = done.stdout.splitlines()
    for pattern in case.expect:
        assert any(re.search(pattern, line) for line in lines), (pattern, lines[:20])
    for secret in case.absent:
        assert secret not in output
    if case.one_line:
        strays = [line for line in lines if not (_FINDING.match(line) or _SUMMARY.match(line))]
        assert not strays, strays[:5]
    if case.after is not None:
        case.after(tmp_path)


# Root reads and writes whatever the permission bits say: the two tests below run the CLI with
# the capabilities that let it do so dropped (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so that
# it meets permissions as any user does. A non-root run needs nothing.
_PR_CAPBSET_DROP, _CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 24, 1, 2


def _drop_permission_override() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) refused")


def _run_honouring_permissions(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    if os.geteuid() != 0:
        return _run(argv, cwd, {})
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        return subprocess.run(
            [sys.executable, "-m", "noetl_compile", *argv],
            cwd=cwd,
            env={k: v for k, v in environment.items() if v != ""},
            capture_output=True,
            timeout=300,
            check=False,
            text=True,
            preexec_fn=_drop_permission_override,
        )
    except subprocess.SubprocessError as error:  # the drop itself was refused (a container)
        pytest.skip(f"root here cannot give up its permission override: {error}")


def test_unreadable_folder_and_file(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "p.yaml").write_text(playbook())
    (tmp_path / "q.yaml").write_text(playbook())
    (tmp_path / "q.yaml").chmod(0)
    locked.chmod(0)
    try:
        done = _run_honouring_permissions(["check", "."], tmp_path)
    finally:
        locked.chmod(0o755)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(
        r"^\./locked:1:1: E001 \[error\] cannot read folder", done.stdout, re.MULTILINE
    )
    assert re.search(r"^\./q\.yaml:1:1: E001 \[error\] cannot read file", done.stdout, re.MULTILINE)


def test_read_only_output_folder(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(playbook())
    (tmp_path / "out").mkdir()
    (tmp_path / "out").chmod(0o555)
    try:
        done = _run_honouring_permissions(["compile", "p.yaml", "-o", "out"], tmp_path)
    finally:
        (tmp_path / "out").chmod(0o755)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(
        r"^p\.yaml:1:1: E004 \[error\] cannot write out/p\.py", done.stdout, re.MULTILINE
    )
    assert not (tmp_path / "out" / "p.py").exists()
