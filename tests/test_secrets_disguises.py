"""Generated secrets test for the disguises of issue 35 (token formats and random-looking keys
under neutral keys, look-alike and `pin` keys, constant templates, auth lists, header pairs,
argv flags, URL token users, quoted DSN passwords), in every dialect at the workload, a tool's
input, a pipeline task, a loop, a sink and a nested call: each found at its position and in no
compiled DAG file. The seed is printed on failure (``NOETLC_SECRETS_SEED`` replays it).
"""

from __future__ import annotations

import random
import re
import string
import textwrap
from pathlib import Path

from noetl_compile.compile import compile_paths
from tests.secret_tokens import SEED, token
from tests.test_secrets_suite import HEADERS

# -- disguises (issue 35) ----------------------------------------------------------------------
# Each class of disguise in every dialect and position: the workload, a tool's input, a pipeline
# task, a loop's tool, a sink (v1's `save`), a nested playbook call's input; tool fields in a
# step's tool, a pipeline task and a loop. Fragments are mappings (`kv`) or tool fields (`tool`).

B64 = string.ascii_letters + string.digits + "+/"
HEX = "0123456789abcdef"
ALNUM = string.ascii_letters + string.digits


def _draw(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _aws_secret(rng: random.Random) -> str:
    """40 base64 characters, as AWS draws them. A draw the entropy rule reads as text (a run of
    letters or too few distinct ones: about one in 300) is drawn again, so the test pins the
    rule's threshold rather than the luck of the seed."""
    from noetl_compile.check.tokens import random_token

    while True:
        text = _draw(rng, B64, 40)
        if random_token(text) and not any(w in text.lower() for w in ("example", "test")):
            return text


SHAPES = (
    lambda r: "AIza" + _draw(r, ALNUM + "_-", 35),
    _aws_secret,
    lambda r: "ghp_" + _draw(r, ALNUM, 36),
    lambda r: f"xoxb-{_draw(r, string.digits, 11)}-{_draw(r, ALNUM, 24)}",
    lambda r: "shpat_" + _draw(r, HEX, 32),
    lambda r: "dapi" + _draw(r, HEX, 32),
    lambda r: "hvs." + _draw(r, ALNUM, 28),
    lambda r: _draw(r, HEX, 32) + "-us12",
    lambda r: f"{_draw(r, '123456789', 10)}:AA{_draw(r, ALNUM + '_-', 33)}",
    lambda r: "lin_api_" + _draw(r, ALNUM, 40),
    lambda r: _draw(r, ALNUM, 3) + "8Q~" + _draw(r, ALNUM + "_~.-", 34),
    lambda r: "sk_live_" + _draw(r, ALNUM, 24),
)
NEUTRAL_KEYS = ("gkey", "value", "vendor", "conn_id", "cfg", "x", "mc", "bot", "lin", "az", "k")
DISGUISES = {
    # a known format or a random-looking key under a neutral key, alone or in a list
    "shape": [f"{NEUTRAL_KEYS[i % len(NEUTRAL_KEYS)]}: «{{s{i}}}»" for i in range(len(SHAPES))]
    + ["keys:\n  - first\n  - «{s2}»", "values: [plain, «{s1}»]"],
    # keys spelled with look-alike letters (Cyrillic а, Greek ο, Cyrillic ѕ, fullwidth) and `pin`
    "lookalike": [
        "p\u0430ssword: «{t}»",
        "t\u03bfken: «{t}»",
        "\u0455ecret: «{t}»",
        "\uff41\uff50\uff49_\uff4b\uff45\uff59: «{t}»",
        "db_p\u0430ss: '«{t}»'",
    ],
    "pin": ["pin: «{t}»", "card_pin: '«{t}»'", "PIN_CODE: «{t}»"],
    # a literal beside templates that render constants
    "constant_template": [
        "password: \"«{t}»{{{{ '' }}}}\"",
        "api_key: \"{{{{ '' }}}}«{t}»\"",
        "token: '«{t}»{{{{ \"\" }}}}'",
        "secret: \"«{t}»{{{{- '' -}}}}\"",
    ],
    # credentials by position, not by name
    "auth_block": [
        "auth:\n  basic: [etl, «{t}»]",
        "auth: {{basic: [etl, «{t}»]}}",
        "basic_auth:\n  - etl\n  - «{t}»",
        "auth: [etl, «{t}»]",
    ],
    "header_pairs": [
        "headers:\n  - [X-Api-Key, «{t}»]",
        'headers:\n  - {{name: Authorization, value: "Bearer «{t}»"}}',
        'headers: [[Cookie, "«sid={t}»"]]',
        "params:\n  - [access_token, «{t}»]",
        "headers:\n  - key: X-Auth-Token\n    value: «{t}»",
        'headers: ["X-Api-Key: «{t}»", "Accept: text/csv"]',
        "headers:\n  - 'Authorization: Bearer «{t}»'",
    ],
    "argv": [
        "argv: [psql, --password, «{t}»]",
        "command:\n  - mysql\n  - --password\n  - «{t}»",
        "flags: [-token, «{t}»]",
        "cmd: [vault, login, --api-key, «{t}»]",
    ],
    "url_user": [
        "repo: https://«{t}»@git.x.org/team/repo.git",
        'endpoint: "https://«{t}»@api.x.org/v1"',
        "remote: 'git+https://«{t}»@gitlab.x.org/a.git'",
    ],
    "dsn_quote": [
        'dsn: "postgresql://etl:«{t}\'q»@db/app"',
        "db_url: 'mysql://root:«{t}\"q»@db/x'",
        "dsn: \"postgresql://etl:'«{t} @x»'@db/app\"",
        "conn: \"host=db user=etl password='«{t}'s»' dbname=x\"",
    ],
}
# Tool fields: the same disguises where a tool reads them.
TOOL_DISGUISES = {
    "header_pairs": [
        "kind: http\nurl: https://api.x.org/v1\nheaders:\n  - [X-Api-Key, «{t}»]",
        'kind: http\nurl: https://api.x.org/v1\nheaders:\n  - {{name: Authorization, value: "Bearer «{t}»"}}',
    ],
    "auth_block": ["kind: http\nurl: https://api.x.org/v1\nauth:\n  basic: [etl, «{t}»]"],
    "url_user": ["kind: http\nurl: https://«{t}»@api.x.org/v1"],
    "shape": ["kind: http\nurl: https://api.x.org/v1\nparams:\n  q: «{s0}»"],
    "constant_template": [
        "kind: http\nurl: https://api.x.org/v1\nheaders:\n  X-Api-Key: \"«{t}»{{{{ '' }}}}\""
    ],
    "dsn_quote": [
        'kind: python\ncode: |\n  import os\n  engine = create_engine("postgresql://etl:«{t}\'q»@db/app")\n  result = {{}}'
    ],
}
KV_POSITIONS = ("workload", "input", "task", "loop", "sink", "nested")
TOOL_POSITIONS = ("tool", "task", "loop")


def _indent(text: str, spaces: int) -> str:
    return textwrap.indent(text, " " * spaces)


def _disguised(dialect: str, position: str, fragment: str, kv: bool) -> str:
    """A playbook of ``dialect`` with ``fragment`` at ``position`` (see KV_POSITIONS and
    TOOL_POSITIONS). v1 has no pipelines: its `task` is a step's own tool, as `tool`."""
    workload = "  items: [1, 2]\n"
    python = "kind: python\ncode: |\n  result = {}\n"
    body = ""  # the step's lines after `- step: start`
    if position == "workload":
        workload += _indent(fragment, 2) + "\n"
    kv = kv and position != "workload"
    if dialect == "v1":
        if position == "workload":
            tool = python
        elif kv and position != "sink":
            kind = "playbook\npath: secrets/child" if position == "nested" else "python"
            tool = f"kind: {kind}\n" + ("" if position == "nested" else "code: |\n  result = {}\n")
            tool += "args:\n" + _indent(fragment, 2) + "\n"
        elif position == "sink":
            tool = python
        else:
            tool = fragment + "\n"
        tool = re.sub(r"^kind:", "type:", tool, flags=re.MULTILINE)
        body = _indent(tool, 4)
        if position == "loop":
            body = '    loop:\n      in: "{{ workload.items }}"\n      iterator: item\n' + body
        if position == "sink":
            save = "storage:\n  type: postgres\n  table: t\n  auth: pg_local\n  args:\n"
            body += "    save:\n" + _indent(save + _indent(fragment, 4), 6) + "\n"
        route, end = "    next:\n      - step: end\n", "  - step: end\n"
    else:
        if position == "workload":
            tool = "tool: {kind: noop}\n"
        elif position in ("input", "loop") and kv:
            tool = "tool:\n" + _indent(python + "input:\n" + _indent(fragment, 2), 2) + "\n"
        elif position == "nested":
            call = "kind: playbook\npath: secrets/child\ninput:\n" + _indent(fragment, 2)
            tool = "tool:\n" + _indent(call, 2) + "\n"
        elif position == "task":
            task = fragment if not kv else python + "input:\n" + _indent(fragment, 2)
            first = "- name: first\n" + _indent(python, 2)
            tool = "tool:\n" + _indent(first, 2) + _indent("- name: t\n" + _indent(task, 2), 2)
            tool += "\n"
        elif position == "sink" and dialect == "case_v2":
            sink = "tool: {kind: postgres, auth: pg_local, table: t}\ndata:\n" + _indent(
                fragment, 2
            )
            tool = "tool:\n" + _indent(python, 2) + "sink:\n" + _indent(sink, 2) + "\n"
        elif position == "sink":  # canonical has no sink: a pipeline task writes the rows
            save = "- name: save\n  kind: postgres\n  auth: pg_local\n  command: INSERT INTO t SELECT 1\n  args:\n"
            tool = "tool:\n" + _indent("- name: first\n" + _indent(python, 2), 2)
            tool += _indent(save + _indent(fragment, 4), 2) + "\n"
        else:
            tool = "tool:\n" + _indent(fragment, 2) + "\n"
        body = _indent(tool, 4)
        if position == "loop":
            body = '    loop:\n      in: "{{ workload.items }}"\n      iterator: item\n' + body
        if dialect == "canonical":
            route = "    next:\n      arcs:\n        - step: end\n"
        else:
            route = "    next:\n      - step: end\n"
        end = "  - step: end\n    tool: {kind: noop}\n"
    return (
        HEADERS[dialect]
        + "workload:\n"
        + workload
        + "workflow:\n  - step: start\n"
        + body
        + route
        + end
    )


def disguises(rng: random.Random) -> list[tuple[str, str, str, str, str]]:
    """(class, name, dialect, position, marked playbook text) for every fragment in every
    dialect, the positions taken in turn so that each class meets most of them."""
    out = []
    n = 0
    for table, positions in ((DISGUISES, KV_POSITIONS), (TOOL_DISGUISES, TOOL_POSITIONS)):
        kv = table is DISGUISES
        for cls, fragments in table.items():
            for i, template in enumerate(fragments):
                for d, dialect in enumerate(HEADERS):
                    values = {"t": token(rng)} | {f"s{j}": f(rng) for j, f in enumerate(SHAPES)}
                    fragment = template.format(**values)
                    position = positions[(n + d) % len(positions)]
                    text = _disguised(dialect, position, fragment, kv)
                    out.append((cls, f"{cls}-{i}", dialect, position, text))
                n += 1
    return out


def test_every_disguise_is_found_in_every_position_and_never_compiled(tmp_path: Path):
    rng = random.Random(SEED)
    generated = disguises(rng)
    seen = {(cls, position) for cls, _, _, position, _ in generated}
    for cls in DISGUISES:
        assert len({p for c, p in seen if c == cls}) >= 3, cls
    assert {(d, p) for _, _, d, p, _ in generated} >= {
        (d, p) for d in HEADERS for p in KV_POSITIONS + TOOL_POSITIONS
    }
    cases: dict[str, tuple[str, tuple[int, int], str]] = {}
    for index, (cls, name, dialect, position, marked) in enumerate(generated):
        match = re.search("«(.+?)»", marked, re.DOTALL)
        secret = match.group(1)
        text = marked[: match.start()] + secret + marked[match.end() :]
        line = marked.count("\n", 0, match.start()) + 1
        col = match.start() - (marked.rfind("\n", 0, match.start()) + 1) + 1
        text = re.sub(r"path: secrets/(\w+)", rf"path: secrets/\1/{index}", text, count=1)
        path = tmp_path / "in" / f"{index:03d}_{dialect}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        cases[str(path)] = (f"{dialect}:{position}:{name}", (line, col), secret)

    paths = sorted(cases)
    out = tmp_path / "dags"
    report = compile_paths(paths, str(out), check_only=False)
    found: dict[str, set[tuple[int, int]]] = {path: set() for path in paths}
    for d in report.diagnostics:
        if d.code == "X601":
            found[d.path].add((d.position.line, d.position.col))
    missed = [
        f"{cases[path][0]}: X601 expected at {cases[path][1]}, got {sorted(found[path])}"
        for path in paths
        if cases[path][1] not in found[path]
    ]
    assert not missed, f"seed {SEED}: {len(missed)} of {len(cases)} missed:\n" + "\n".join(missed)
    assert sorted(report.failed) == paths

    # With X601 ignored, no DAG file holds a secret: the literal is left out (X602) or the file
    # is refused. The secret's longest run without quotes is what a DAG file would hold.
    report = compile_paths(paths, str(out), check_only=False, ignore=["X601"])
    refused = {d.path for d in report.diagnostics if d.message.startswith("not compiled")}
    compiled = set(paths) - set(report.failed)
    assert refused | compiled == set(paths) and not refused & compiled  # no other error
    written = list(out.rglob("*.py")) if out.exists() else []
    assert len(written) == len(compiled) > 0  # credential-named keys: their literal left out
    secrets_ = {max(re.split("['\" ]", s), key=len) for _, _, s in cases.values()}
    leaked = [(p.name, s) for p in written for s in secrets_ if s in p.read_text(encoding="utf-8")]
    assert not leaked, f"seed {SEED}: DAG files hold secrets: {leaked[:10]}"
