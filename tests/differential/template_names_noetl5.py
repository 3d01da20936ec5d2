"""NoETL 5's template names (table b), scanned from its Rust sources (issue 33).

NoETL 5 (github.com/noetl/server, noetl/worker) builds each render context in a few Rust
functions (:data:`RUST_BUILDERS`, one per place a template is rendered). The scan reads each
function's text at the commit noetlc's noetl5 profile cites and lists every
``<map>.insert("key".to_string(), ...)``, ``<map>.insert(var.clone(), ...)`` (a key computed at
run time, shown ``<var>``) and ``<map>.entry("key".to_string()).or_insert...`` on the maps the
builder names, each with its ``repo:path:line``. Nothing is compiled or run: NoETL 5 cannot be
built here (no cargo), so each row's noetlc side is pinned by ``test_template_names_noetl5.py``,
whose expected values cite these lines.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

# (place, repository, path, function, {map receiver: the name prefix its keys get})
RUST_BUILDERS: tuple[tuple[str, str, str, str, dict[str, str]], ...] = (
    (
        "guards, set, tool inputs (server)",
        "noetl/server",
        "orchestrate-core/src/state.rs",
        "build_context",
        {"context": ""},
    ),
    (
        "arc guards, step set (server)",
        "noetl/server",
        "orchestrate-core/src/orchestrator.rs",
        "with_ctx_shims",
        {"render_ctx": ""},
    ),
    (
        "arc guards, step set: output (server)",
        "noetl/server",
        "orchestrate-core/src/orchestrator.rs",
        "output_namespace",
        {"o": "output."},
    ),
    (
        "step set (server)",
        "noetl/server",
        "orchestrate-core/src/orchestrator.rs",
        "evaluate_state",
        {"shimmed": ""},
    ),
    (
        "arc guards (server)",
        "noetl/server",
        "orchestrate-core/src/orchestrator.rs",
        "process_in_progress",
        {"shimmed": ""},
    ),
    (
        "loop item (server)",
        "noetl/server",
        "orchestrate-core/src/commands.rs",
        "build_iteration_command",
        {"iter_context": "", "iter_ns": "iter.", "render_ctx": ""},
    ),
    (
        "tool inputs (worker)",
        "noetl/worker",
        "src/executor/command.rs",
        "execute_with_server_url",
        {"ctx.variables": ""},
    ),
)
# `.insert(` / `.entry(` and the key's first token: a literal (`"key"`) or a name (`var`, read
# on as `var.clone()`). Nothing follows a greedy part, so no match backtracks: linear.
_CALL = re.compile(r"\.\s*(insert|entry)\(\s*(\"?)([\w.]*)")
_FN = re.compile(r"\bfn\s+(\w+)")


def _calls(text: str):
    """(receiver, op, key or None, variable or None, offset of op, end of the key) per call."""
    for match in _CALL.finditer(text):
        op, quote, token = match.groups()
        before = text[: match.start()].rstrip()
        i = len(before)
        while i > 0 and (before[i - 1].isalnum() or before[i - 1] in "_."):
            i -= 1
        receiver = before[i:]
        end = match.end()
        if quote:
            if not text.startswith('".to_string()', end):
                continue
            yield receiver, op, token, None, match.start(1), end + len('".to_string()')
        elif token.endswith(".clone") and text.startswith("()", end):
            yield receiver, op, None, token[: -len(".clone")], match.start(1), end + 2


def function_text(text: str, name: str) -> tuple[int, str]:
    """(first line number, text) of the Rust function ``name``: from ``fn name`` to the brace
    that closes its body."""
    for match in _FN.finditer(text):
        if match.group(1) != name or text[match.end() :].lstrip()[:1] not in ("(", "<"):
            continue
        open_at = text.index("{", match.end())
        depth, i = 0, open_at
        while i < len(text):
            c = text[i]
            if c == "/" and text.startswith("//", i):  # a comment runs to the line's end
                i = text.find("\n", i)
                i = len(text) if i < 0 else i
                continue
            if c == '"':  # a string literal: skip it (escapes included)
                i += 1
                while i < len(text) and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    start = match.start()
                    return text.count("\n", 0, start) + 1, text[start : i + 1]
            i += 1
    raise LookupError(f"no fn {name}")


def _argument(text: str, start: int) -> str:
    """The value argument of an insert call whose key ends at ``start``: up to the call's
    closing parenthesis, one line."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                break
            depth -= 1
        i += 1
    value = " ".join(text[start:i].split()).lstrip(", ").strip().rstrip(",")
    return value if len(value) <= 70 else value[:67] + "..."


def names_in(text: str, first_line: int, receivers: dict[str, str]) -> list[dict]:
    found: dict[str, dict] = {}
    for recv, op, key, var, at, end in _calls(text):
        if recv not in receivers:
            continue
        name = receivers[recv] + (key if key is not None else f"<{var}>")
        line = first_line + text.count("\n", 0, at)
        if op == "entry":
            reads = "entry().or_insert (kept when already bound)"
        else:
            reads = _argument(text, end)
        found.setdefault(name, {"name": name, "reads": reads, "line": line})
    return sorted(found.values(), key=lambda r: r["name"])


def git_text(gitdir: Path, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(gitdir), "show", f"{commit}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def scan(gitdirs: dict[str, Path], commits: dict[str, str]) -> list[dict]:
    rows = []
    for place, repo, path, function, receivers in RUST_BUILDERS:
        text = git_text(gitdirs[repo], commits[repo], path)
        first, body = function_text(text, function)
        for row in names_in(body, first, receivers):
            rows.append(
                {
                    "engine": "noetl5",
                    "place": place,
                    "name": row["name"],
                    "reads": row["reads"],
                    "aliases": [],
                    "where": f"{repo}:{path}:{row['line']}",
                }
            )
    return rows
