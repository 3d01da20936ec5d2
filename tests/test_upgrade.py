"""`noetlc upgrade`: exact rewrites, constructs left with a comment, the corpus.

Runs of original against upgraded playbooks (step results, final status) are in
tests/test_upgrade_runs.py; here the rewrite itself is held: the text it produces, what it keeps
byte for byte, comments, and, over the corpus, that every upgraded playbook checks clean with
the same findings and the same step payloads (the runtime's whole input) apart from routing,
whose targets must stay the same.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from noetl_compile.check import check_text
from noetl_compile.lower.payload import loop_payload, step_payload
from noetl_compile.upgrade import ENGINE_DIFFERENCE_CODES, upgrade_text
from noetl_compile.upgrade.case_v2 import LOOP_BOUND, LOOP_CONCURRENCY
from noetl_compile.upgrade.edits import COMMENT_PREFIX
from noetl_compile.upgrade.guards import rebind
from tests.corpus import CORPUS
from tests.upgrade_support import blockers, corpus_upgrades, relative


def _findings(diagnostics) -> list[str]:
    """Codes of a check, less the D9xx infos: they say how NoETL's engine of the file's own
    generation differs, so an upgrade to another generation changes them by design."""
    return [d.code for d in diagnostics if d.code not in ENGINE_DIFFERENCE_CODES]


CASE_V2 = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: upgrade_demo   # the name stays
  path: demo/upgrade
workload:
  limit: 2
workflow:
  # entry step
  - step: start
    desc: "first"
    tool: {kind: python, args: {n: 1}, code: "result = {'n': n}"}
    args: { seed: 7 }
    case:
      # big numbers go to `big`
      - when: "{{ event.name == 'step.exit' and response is defined and start.n > 5 }}"
        then:
          next:
            - step: big
      - when: "{{ event.name == 'step.exit' }}"
        then:
          next:
            - step: fan   # the usual way
  - step: big
    tool: {kind: python, code: "result = {'big': True}"}
  - step: fan
    tool: {kind: python, code: "result = {'fan': True}"}
    next: [left, right]
  - step: left
    loop: {in: "{{ [1, 2] }}", iterator: i, mode: parallel}
    tool: {kind: python, args: {i: "{{ iter.i }}"}, code: "result = i"}
  - step: right
    tool: {kind: python, code: "result = 1"}
"""

EXPECTED = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: upgrade_demo   # the name stays
  path: demo/upgrade
workload:
  limit: 2
workflow:
  # entry step
  - step: start
    desc: "first"
    tool: {kind: python, args: {n: 1}, code: "result = {'n': n}"}
    input: { seed: 7 }
    # big numbers go to `big`
    # the usual way
    next:
      spec: {mode: exclusive}
      arcs:
        - {step: big, when: "{{ start.n > 5 }}"}
        - {step: fan}
  - step: big
    tool: {kind: python, code: "result = {'big': True}"}
  - step: fan
    tool: {kind: python, code: "result = {'fan': True}"}
    next:
      spec: {mode: inclusive}
      arcs:
        - {step: left}
        - {step: right}
  - step: left
    # noetlc upgrade: {LOOP_NOTE}
    loop:
      in: "{{ [1, 2] }}"
      iterator: i
      spec: {mode: parallel}
    tool: {kind: python, args: {i: "{{ iter.i }}"}, code: "result = i"}
  - step: right
    tool: {kind: python, code: "result = 1"}
"""
# The one condition a loop's rewrite holds under (U804, a warning: the upgrade is written).
LOOP_NOTE = f"loop of step 'left': {LOOP_BOUND}; {LOOP_CONCURRENCY.format(mode='parallel')}"
UPGRADED = EXPECTED.replace("{LOOP_NOTE}", LOOP_NOTE)


def test_each_exact_rewrite() -> None:
    upgrade = upgrade_text(CASE_V2, "demo.yaml")
    assert upgrade.dialect == "case-v2"
    assert [(d.code, d.position.line, d.message) for d in upgrade.diagnostics] == [
        ("U804", 30, LOOP_NOTE)
    ]
    assert upgrade.text == UPGRADED
    assert upgrade.writable
    again = check_text(upgrade.text, "demo.yaml")
    assert again.playbook.dialect == "canonical"
    assert _findings(again.diagnostics) == []
    # Idempotent: a canonical playbook is left alone.
    assert not upgrade_text(upgrade.text, "demo.yaml").changed


INEXACT = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: inexact, path: demo/inexact}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'id': 1}"}
    vars:
      id: "{{ result.id }}"
    case:
      - when: "{{ event.name == 'call.error' }}"
        then:
          next: [{step: end, args: {id: "{{ vars.id }}"}}]
  - step: end
    tool: {kind: python, code: "result = 1"}
    sink: {tool: {kind: postgres, auth: pg, table: t}}
"""


def test_a_construct_without_equivalent_is_commented_reported_and_not_writable() -> None:
    upgrade = upgrade_text(INEXACT, "inexact.yaml")
    codes = Counter(d.code for d in upgrade.diagnostics)
    assert codes == {"U801": 4}, upgrade.diagnostics
    lines = upgrade.text.splitlines()
    # A comment above each construct left as written, at the construct's own line.
    for diagnostic in upgrade.diagnostics:
        at = upgrade.original.splitlines()[diagnostic.position.line - 1]
        index = lines.index(at)
        assert COMMENT_PREFIX in lines[index - 1], (diagnostic, lines[index - 1])
    messages = " | ".join(d.message for d in upgrade.diagnostics)
    for word in ("`vars`", "`sink`", "`when`", "`vars` namespace"):
        assert word in messages
    assert not upgrade.writable  # nothing half-upgraded is ever written
    # Every original line is still there: the comments are the only change.
    assert [line for line in lines if COMMENT_PREFIX not in line] == upgrade.original.splitlines()


def test_an_http_response_read_is_written_body_first() -> None:
    """case-v2 reads an HTTP step's `response.k` from the body (`data`) when it holds `k`, else
    from the envelope; the arc guard says so by the step's name. Other reads of `response` stay
    refused with their U801."""
    from noetl_compile.upgrade.guards import rebind_body_first

    guard = "{{ response.status == 200 and x.response and response.data.id > 1 }}"
    assert rebind_body_first(guard, "s") == (
        "{{ (s.data.status if s.data is mapping and 'status' in s.data else s.status) == 200"
        " and x.response and (s.data.data if s.data is mapping and 'data' in s.data else s.data)"
        ".id > 1 }}"
    )
    for refused in ("{{ response }}", "{{ response['a'] }}", "{{ response.keys }}",
                    "{{ response._x }}", "{{ response.context }}", "{% for response in y %}{% endfor %}"):  # fmt: skip
        assert rebind_body_first(refused, "s") is None, refused
    text = CASE_V2.replace(
        "tool: {kind: python, args: {n: 1}, code: \"result = {'n': n}\"}",
        "tool: {kind: http, endpoint: http://127.0.0.1:9/x}",
    ).replace("start.n > 5", "response.n > 5")
    upgrade = upgrade_text(text, "http.yaml")
    assert upgrade.writable, upgrade.diagnostics
    assert (
        "when: \"{{ (start.data.n if start.data is mapping and 'n' in start.data else start.n) > 5 }}\""
        in upgrade.text
    )
    bare = upgrade_text(text.replace("response.n > 5", "response['n'] > 5"), "http.yaml")
    assert [d.code for d in bare.diagnostics if d.code == "U801"] == ["U801"]
    assert not bare.writable


FAN_OUT = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fan_out, path: demo/fan_out}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'n': 1}"}
    case:
      - when: "{{ event.name == 'step.exit' and start.n > 0 }}"
        then:
          next: [{step: a}, {step: b}]
  - step: a
    tool: {kind: python, code: "result = 1"}
  - step: b
    tool: {kind: python, code: "result = 2"}
"""


def test_a_rule_firing_several_steps_is_inclusive_only_as_the_one_way_on() -> None:
    upgrade = upgrade_text(FAN_OUT, "fan.yaml")
    assert upgrade.writable, upgrade.diagnostics
    assert (
        "    next:\n      spec: {mode: inclusive}\n      arcs:\n"
        '        - {step: a, when: "{{ start.n > 0 }}"}\n'
        '        - {step: b, when: "{{ start.n > 0 }}"}\n'
    ) in upgrade.text
    # Another rule, a plain `next` or a `set` after it: an inclusive router would also fire
    # what case-v2's first-match-wins skips, so it stays a U801.
    other = "          next: [{step: a}, {step: b}]\n"
    for extra in (
        other + "      - when: \"{{ event.name == 'step.exit' }}\"\n        then: {next: [a]}\n",
        other + "    next: [a]\n",
        other.replace("next:", "set: [{name: x, value: 1}]\n          next:"),
    ):
        left = upgrade_text(FAN_OUT.replace(other, extra), "fan.yaml")
        assert not left.writable
        assert any("routes to 2 steps at once" in d.message for d in left.diagnostics), extra


def test_a_playbook_check_rejects_is_left_alone() -> None:
    broken = CASE_V2.replace("- step: big\n    tool", "- step: big\n    tol", 1)
    upgrade = upgrade_text(broken, "broken.yaml")
    assert [d.code for d in upgrade.diagnostics] == ["U802"]
    assert upgrade.text == broken


def _payloads(text: str, path: str) -> dict[str, dict]:
    """Each step's payload, its routing as the set of targets, and the values passed along an
    arc laid over the target's input (as the runtime does; the upgrade moves them there when
    the arc is the target's only way in)."""
    playbook = check_text(text, path).playbook
    out = {}
    passed: dict[str, dict] = {}
    for step in playbook.steps:
        payload = step_payload(playbook, step, lambda name: name)
        arcs = payload.pop("routing")["arcs"]
        for arc in arcs:
            passed.setdefault(arc["step"], {}).update(arc.get("args") or {})
        targets = {arc["step"] for arc in arcs}
        for rule in payload.pop("case"):
            for target in rule["then"].get("next", []):
                targets.add(target["step"])
                # A case rule's args, rendered when it fires with the step's result as
                # `result`/`response`, read it by the step's name in the target's input.
                for key, value in (target.get("args") or {}).items():
                    own = rebind(value, frozenset({"result", "response"}), step.name)
                    passed.setdefault(target["step"], {})[key] = own or value
        payload.pop("dialect")
        payload["targets"] = sorted(targets)
        if step.loop is not None:
            payload["loop"] = loop_payload(step)
            if payload["loop"].get("mode") == "async":
                # case-v2 `async` is written `parallel` (the lowering gives both unbounded
                # concurrent instances); U804 states what NoETL's engines did with each.
                payload["loop"]["mode"] = "parallel"
        out[step.name] = payload
    for name, values in passed.items():
        if name in out:
            out[name]["input"] = {**(out[name].get("input") or {}), **values}
    for payload in out.values():
        if isinstance(payload.get("input"), dict):
            payload["input"] = {k: _plain_reads(v) for k, v in payload["input"].items()}
    return _vars_as_ctx(out)


# `(s.data.k if s.data is mapping and 'k' in s.data else s.k)`: how the upgrade writes a
# case-v2 `response.k` it cannot prove plain (upgrade/guards.py rebind_body_first); compared as
# `s.k`, the read it stands for (the runs compare the values).
_BODY_FIRST = re.compile(
    r"\((\w+)\.data\.(\w+) if \1\.data is mapping and '\2' in \1\.data else \1\.\2\)"
)


def _plain_reads(value):
    return _BODY_FIRST.sub(r"\1.\2", value) if isinstance(value, str) else value


def _vars_as_ctx(payloads: dict[str, dict]) -> dict[str, dict]:
    """case-v2 `vars` are the execution's variables (NoETL dc55c492 renders `vars` as its
    variable store): a step's `vars` and its canonical `set` compare as the names they write,
    and a template reads `vars.x` as `ctx.x`. The written values are compared by running both
    (tests/test_upgrade_runs.py)."""
    from noetl_compile.upgrade.guards import rebind

    def names(block) -> list[str]:
        return sorted(str(k).removeprefix("ctx.") for k in (block or {}))

    def reads(value):
        if isinstance(value, str):
            return rebind(value, frozenset({"vars"}), "ctx") or value
        if isinstance(value, dict):
            return {k: reads(v) for k, v in value.items()}
        if isinstance(value, list):
            return [reads(v) for v in value]
        return value

    out = {}
    for step, payload in payloads.items():
        payload = dict(payload)
        written = names(payload.pop("vars", None)) + names(payload.pop("set", None))
        out[step] = {**reads(payload), "writes": sorted(written)}
    return out


@pytest.fixture(scope="module")
def upgraded() -> dict[Path, object]:
    upgrades = corpus_upgrades()
    assert len(upgrades) >= 75, f"the corpus is missing ({CORPUS})"
    return upgrades


@pytest.mark.corpus
def test_corpus_upgrades(upgraded) -> None:
    counts = Counter()
    for path, upgrade in upgraded.items():
        counts[upgrade.dialect, "read"] += 1
        # Never an internal failure: what is not upgraded says why, at a position (U801), or is
        # refused because the rewrite would check differently (U803: the safety net, e.g. a v1
        # secrets task whose upgraded tool keys the per-kind field catalogue does not know).
        # A written upgrade may carry U804 warnings: exact within a bound it states.
        assert all(d.code in ("U801", "U803", "U804") for d in upgrade.diagnostics), (
            upgrade.diagnostics
        )
        if upgrade.writable:
            counts[upgrade.dialect, "upgraded"] += 1
            before = check_text(upgrade.original, str(path))
            after = check_text(upgrade.text, str(path))
            assert after.playbook.dialect == "canonical"
            assert Counter(_findings(after.diagnostics)) <= Counter(
                _findings(before.diagnostics)
            ), (path, after.diagnostics)
            counts[upgrade.dialect, "checked clean"] += 1
            assert _payloads(upgrade.text, str(path)) == _payloads(upgrade.original, str(path))
            counts[upgrade.dialect, "payloads equal"] += 1
        else:
            assert upgrade.diagnostics, path
            left = [d for d in upgrade.diagnostics if d.code == "U801"]
            counts[upgrade.dialect, "left with U801" if left else "refused, U803"] += 1
            lines = upgrade.text.splitlines()
            assert sum(COMMENT_PREFIX in line for line in lines) >= len(
                {d.position.line for d in left}
            )
    print(f"\ncorpus upgrade: {dict(sorted(counts.items()))}")
    assert counts["case-v2", "upgraded"] >= 11 and counts["v1", "upgraded"] >= 16


@pytest.mark.corpus
def test_the_ceiling(upgraded) -> None:
    """Which playbooks any exact upgrade could reach: those with no construct whose meaning the
    canonical generation lacks (retry, sink, ...: tests/upgrade_support.py BLOCKERS, evidence in
    docs/editor.md). Every playbook not written names its blockers, each in a known class."""
    written = [path for path, upgrade in upgraded.items() if upgrade.writable]
    hard: Counter = Counter()
    open_ = []
    for path, upgrade in upgraded.items():
        if upgrade.writable:
            continue
        classes = blockers(upgrade)
        assert classes, (path, upgrade.diagnostics)
        without = sorted(name for name, exists in classes.items() if not exists)
        hard.update(without)
        if not without:
            open_.append(relative(path))
    ceiling = len(written) + len(open_)
    print(
        f"\nupgrade ceiling: {len(written)} of {len(upgraded)} written, ceiling {ceiling}; "
        f"no equivalent (files): {dict(hard.most_common())}; open: {open_}"
    )
    assert len(written) >= 27
    # Every file the canonical generation can express is upgraded: the ceiling is reached.
    assert open_ == []
    # retry and sink, the two largest classes, stay unreachable by any exact rewrite.
    assert hard["retry"] >= 15 and hard["sink"] >= 8


@pytest.mark.corpus
def test_a_comment_on_each_step_survives(upgraded) -> None:
    survived = 0
    for path, upgrade in upgraded.items():
        if not upgrade.writable:
            continue
        lines = upgrade.original.splitlines(keepends=True)
        marked = []
        for line in lines:
            stripped = line.lstrip()
            if stripped.startswith("- step:"):
                indent = line[: len(line) - len(stripped)]
                name = stripped.split(":", 1)[1].split("#")[0].strip()
                marked.append(f"{indent}# before {name}\n")
                line = line.rstrip("\n") + f"  # on {name}\n"
            marked.append(line)
        text = "".join(marked)
        again = upgrade_text(text, str(path))
        assert again.writable, again.diagnostics
        for comment in (m.strip() for m in marked if "# before " in m or "  # on " in m):
            fragment = comment if comment.startswith("#") else comment.split("  ", 1)[1]
            assert fragment in again.text, (path, fragment)
        survived += 1
    assert survived >= 9


def test_an_upgrade_that_would_check_differently_is_not_written(monkeypatch) -> None:
    # The safety net behind every rewrite: break one (a misspelt key in what it writes) and the
    # re-check catches it, so the file is not written.
    from noetl_compile.upgrade import case_v2

    def misspelt(self, item, keys, end, key, value):
        line, column = item.lc.key(keys[0])
        self.edits.replace(line, line + 1, [" " * column + "nxt: fan\n"])

    monkeypatch.setattr(case_v2.CaseV2Upgrade, "replace_keys", misspelt)
    upgrade = upgrade_text(CASE_V2, "demo.yaml")
    assert [d.code for d in upgrade.diagnostics] == ["U804", "U803"]
    assert not upgrade.writable


def test_a_comment_above_the_next_step_stays_there_and_a_flow_step_is_left() -> None:
    text = CASE_V2.replace(
        "\n  - step: big\n", "\n\n  # big is the exception\n  - step: big\n", 1
    ).replace(
        '  - step: right\n    tool: {kind: python, code: "result = 1"}\n',
        '  - {step: right, tool: {kind: python, code: "result = 1"}, next: [left, big]}\n',
    )
    upgrade = upgrade_text(text, "demo.yaml")
    lines = upgrade.text.splitlines()
    at = lines.index("  # big is the exception")
    assert lines[at - 1] == "" and lines[at + 1] == "  - step: big"
    assert [d.code for d in upgrade.diagnostics] == ["U801"]
    assert "flow style" in upgrade.diagnostics[0].message


def test_write_rewrites_only_complete_upgrades(tmp_path: Path, capsys) -> None:
    from noetl_compile.cli import main

    done, left = tmp_path / "done.yaml", tmp_path / "left.yaml"
    done.write_text(CASE_V2, encoding="utf-8")
    left.write_text(INEXACT, encoding="utf-8")
    done.chmod(0o640)
    assert main(["upgrade", str(tmp_path), "--write"]) == 1  # U801 in left.yaml
    out = capsys.readouterr().out
    assert f"{done}: upgraded to canonical" in out and "U801" in out
    assert done.read_text(encoding="utf-8") == UPGRADED
    assert done.stat().st_mode & 0o777 == 0o640
    assert left.read_text(encoding="utf-8") == INEXACT  # never half-upgraded
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.yaml", "left.yaml"]
    assert main(["check", str(done), "--quiet"]) == 0


def test_diff_headers_name_the_file_as_git_does(tmp_path: Path, capsys, monkeypatch) -> None:
    """Relative to the working directory when the file is under it; an absolute path keeps no
    leading `/` after `a/` (never `a//tmp/...`); `git apply` takes the diff as printed."""
    import subprocess

    from noetl_compile.cli import main

    folder = tmp_path / "flows"
    folder.mkdir()
    playbook = folder / "done.yaml"
    playbook.write_text(CASE_V2, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    main(["upgrade", str(playbook)])
    headers = [
        line for line in capsys.readouterr().out.splitlines() if line[:4] in ("--- ", "+++ ")
    ]
    assert headers == ["--- a/flows/done.yaml", "+++ b/flows/done.yaml"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    main(["upgrade", str(playbook)])
    diff = capsys.readouterr().out
    absolute = str(playbook).lstrip("/")
    assert f"--- a/{absolute}\n+++ b/{absolute}\n" in diff and "a//" not in diff
    monkeypatch.chdir(tmp_path)
    main(["upgrade", "flows/done.yaml"])
    (tmp_path / "change.diff").write_text(capsys.readouterr().out, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    applied = subprocess.run(
        ["git", "apply", "--include=flows/done.yaml", "change.diff"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    assert playbook.read_text(encoding="utf-8") == UPGRADED


GUARDS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: guards, path: demo/guards}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'rows': [{'ok': 1}], 'row_count': 1}"}
    case:
      - when: "{{ event.name == 'step.exit' and response is defined and response.rows[0].ok == 1 }}"
        then:
          next: [{step: items}]
      - when: "{{ event.name == 'step.exit' and result.row_count == 0 and 'result' != 'x' }}"
        then:
          - next: [{step: done}]
  - step: items
    loop: {in: "{{ [1, 2] }}", iterator: i, mode: sequential}
    tool: {kind: python, args: {i: "{{ iter.i }}"}, code: "result = i"}
    case:
      - when: "{{ event.name == 'loop.done' }}"
        then:
          next: [{step: done}]
  - step: done
    tool: {kind: python, code: "result = {'ok': True}"}
    case:
      - when: "{{ event.name == 'call.done' and response.ok }}"
        then:
          next: [{step: last}]
  - step: last
    tool: {kind: python, code: "result = 1"}
"""


def test_guards_read_the_step_result_by_name_and_loop_done_call_done_become_arcs() -> None:
    upgrade = upgrade_text(GUARDS, "guards.yaml")
    assert [d.code for d in upgrade.diagnostics] == ["U804"], upgrade.diagnostics  # the loop
    text = upgrade.text
    # `response`/`result` at the step's exit are the step's result: its name in an arc; the
    # string 'result' is text and stays.
    assert '- {step: items, when: "{{ start.rows[0].ok == 1 }}"}' in text
    assert "- {step: done, when: \"{{ start.row_count == 0 and 'result' != 'x' }}\"}" in text
    # A `then` list of routing actions reads as one mapping.
    # loop.done on a loop step and call.done on a step without retry or `next`: chosen once.
    assert "        - {step: done}\n  - step: done" in text
    assert '- {step: last, when: "{{ done.ok }}"}' in text
    again = check_text(text, "guards.yaml")
    assert again.playbook.dialect == "canonical" and _findings(again.diagnostics) == []


@pytest.mark.parametrize(
    "change, reason",
    [
        # case-v2's `response` reads an HTTP body first: written out for `response.f`
        # (test_an_http_response_read_is_written_body_first), any other read is left.
        (
            [
                (
                    "kind: python, code: \"result = {'rows': [{'ok': 1}], 'row_count': 1}\"",
                    "kind: http, url: http://x",
                ),
                ("response.rows[0].ok == 1", "response['rows'][0].ok == 1"),
            ],
            "reads response",
        ),
        # At call.done the engine also fires a `next` at the exit: two targets, not one arc.
        (
            ("  - step: last\n", "    next: [last]\n  - step: last\n"),
            "waits for another event than `step.exit`",
        ),
        # A loop step's other rules run per iteration.
        (("'loop.done'", "'step.exit'"), "rules other than `loop.done`"),
        # `result.result`: each generation's fallback differs.
        ("result.row_count == 0", "result.result == 0"),
    ],
)
def test_a_guard_without_an_exact_arc_is_left(change, reason) -> None:
    if isinstance(change, str):
        change, reason = (change, reason), "reads result"
    text = GUARDS
    for old, new in change if isinstance(change, list) else [change]:
        assert old in text
        text = text.replace(old, new, 1)
    upgrade = upgrade_text(text, "guards.yaml")
    assert [d.code for d in upgrade.diagnostics] == ["U801"], upgrade.diagnostics
    assert reason in upgrade.diagnostics[0].message
    assert not upgrade.writable


V1_ASSERT = """\
apiVersion: noetl.io/v1
kind: Playbook
name: v1_assert
path: demo/v1_assert
workbook:
  - name: flag
    type: python
    assert:
      expects: [t]   # documents the input
      returns: [hot]
    code: |
      def main(t):
{blank}
          return {"hot": t > 25}
workflow:
  - step: start
    next:
      - when: "{{ workload.go }}"
        then: [{step: rate}]
  - step: rate
    type: workbook
    name: flag
    with: {t: 30}
    next:
      - when: "{{ result.hot }}"
        then: [{step: end}]
  - step: end
    type: end
""".replace("{blank}", " " * 10)  # a line of spaces inside the code: block-scalar text


def test_v1_assert_is_kept_as_a_comment_and_a_result_guard_reads_the_step() -> None:
    upgrade = upgrade_text(V1_ASSERT, "v1.yaml")
    assert upgrade.diagnostics == [], upgrade.diagnostics
    lines = upgrade.text.splitlines()
    at = lines.index("    # assert:")
    assert COMMENT_PREFIX in lines[at - 1] and "never read" in lines[at - 1]
    assert lines[at + 1 : at + 3] == [
        "    #   expects: [t]   # documents the input",
        "    #   returns: [hot]",
    ]
    assert '- {step: end, when: "{{ rate.hot }}"}' in upgrade.text
    # The blank line inside the code keeps its meaning (and the code its text).
    before = check_text(V1_ASSERT, "v1.yaml").playbook.workbook["flag"].config["code"]
    after = check_text(upgrade.text, "v1.yaml").playbook.workbook["flag"].config["code"]
    assert before == after
    # On a step without a tool, v1's `result` is the step before's: no arc reads that.
    routed = V1_ASSERT.replace('"{{ workload.go }}"', '"{{ result.hot }}"')
    left = upgrade_text(routed, "v1.yaml")
    assert [d.code for d in left.diagnostics] == ["U801"]
    assert "entry 1 of `next` of step 'start'" in left.diagnostics[0].message


def test_rebind_changes_only_root_names() -> None:
    from noetl_compile.upgrade.guards import rebind

    names = frozenset({"result", "response"})
    assert (
        rebind(
            "{{ result.x and x.result and 'result' and r | result and y is result }}", names, "s"
        )
        == "{{ s.x and x.result and 'result' and r | result and y is result }}"
    )
    assert rebind("{{ (response | length) > 0 and response[0].ok }}", names, "s") == (
        "{{ (s | length) > 0 and s[0].ok }}"
    )
    assert rebind("{{ f(result=1) }}", names, "s") is None
    assert rebind("{% for result in xs %}{{ result }}{% endfor %}", names, "s") is None


V1_PASSED = """\
apiVersion: noetl.io/v1
kind: Playbook
name: v1_passed
path: demo/v1_passed
workload:
  base: 2
workflow:
  - step: start
    type: python
    code: |
      def main():
          return {"n": 1}
    next:
      - step: twice
        with:
          n: "{{ start.n + workload.base }}"
  - step: twice
    type: python
    code: |
      def main(n):
          return {"twice": int(n) * 2}
"""


def test_v1_values_passed_along_the_only_arc_in_become_the_target_input() -> None:
    upgrade = upgrade_text(V1_PASSED, "v1.yaml")
    assert upgrade.diagnostics == [], upgrade.diagnostics
    assert "      - {step: twice}\n  - step: twice\n    input:\n" in upgrade.text
    assert '      n: "{{ start.n + workload.base }}"' in upgrade.text
    assert _payloads(upgrade.text, "v1.yaml") == _payloads(V1_PASSED, "v1.yaml")


@pytest.mark.parametrize(
    "old, new",
    [
        # A second way in (here a loop back) would run the target without the values.
        (
            '          return {"twice": int(n) * 2}\n',
            '          return {"twice": int(n) * 2}\n    next:\n      - step: twice\n',
        ),
        # The target's own input: the runtime lays passed values over it, not one mapping.
        (
            "  - step: twice\n    type: python",
            "  - step: twice\n    with: {k: 1}\n    type: python",
        ),
        # A name bound only where the step routes reads differently in the target.
        ("{{ start.n + workload.base }}", "{{ n }}"),
    ],
)
def test_values_that_cannot_move_to_the_target_are_left(old, new) -> None:
    text = V1_PASSED.replace(old, new)
    assert text != V1_PASSED
    upgrade = upgrade_text(text, "v1.yaml")
    assert [d.code for d in upgrade.diagnostics] == ["U801"], upgrade.diagnostics
    assert "cannot move to the target's `input`" in upgrade.diagnostics[0].message


VARS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: vars, path: demo/vars}
workload:
  limit: 2
workflow:
  - step: start
    tool: {kind: python, code: "result = {'users': [{'id': 7}], 'total': 1}"}
    vars:
      first: "{{ result.users[0].id }}"
    case:
      - when: "{{ event.name == 'step.exit' and response.total > 0 }}"
        then:
          set:
            - {name: total, value: "{{ response.total }}"}
          next: [{step: use}]
  - step: use
    tool:
      kind: python
      args: {first: "{{ vars.first }}", total: "{{ vars.total }}"}
      code: "result = {'seen': [first, total]}"
"""


def test_vars_become_ctx_variables() -> None:
    upgrade = upgrade_text(VARS, "vars.yaml")
    assert upgrade.diagnostics == [], upgrade.diagnostics
    text = upgrade.text
    assert '    set:\n      ctx.first: "{{ start.users[0].id }}"\n' in text
    assert (
        '- {step: use, when: "{{ start.total > 0 }}", set: {ctx.total: "{{ start.total }}"}}'
        in text
    )
    assert 'args: {first: "{{ ctx.first }}", total: "{{ ctx.total }}"}' in text
    again = check_text(text, "vars.yaml")
    assert again.playbook.dialect == "canonical" and _findings(again.diagnostics) == []


@pytest.mark.parametrize(
    "old, new, reason",
    [
        # `limit` is a workload key: the canonical ctx store would overwrite it.
        ('first: "{{ result', 'limit: "{{ result', "also names a workload key"),
        # A read of a `vars` name no step writes.
        ('total: "{{ vars.total }}"', 'total: "{{ vars.other }}"', "which no step writes"),
        # A bare read of a written name read the workload before.
        ('total: "{{ vars.total }}"', 'total: "{{ total }}"', "of a name written to `vars`"),
    ],
)
def test_vars_that_ctx_would_mix_are_left(old, new, reason) -> None:
    text = VARS.replace(old, new)
    assert text != VARS
    upgrade = upgrade_text(text, "vars.yaml")
    assert upgrade.diagnostics and {d.code for d in upgrade.diagnostics} == {"U801"}
    assert any(reason in d.message for d in upgrade.diagnostics), upgrade.diagnostics
    assert not upgrade.writable


V1_ITERATOR = """\
apiVersion: noetl.io/v1
kind: Playbook
name: upgrade_v1_iterator
path: tests/upgrade_v1_iterator
workload:
  items:
    - {name: a, value: 1}
    - {name: b, value: 2}
    - {name: c, value: 3}
workflow:
  - step: start
    next: [{step: each}]
  - step: each
    desc: one call per item
    type: iterator
    collection: "{{ workload.items }}"
    element: item
    mode: parallel   # each item on its own
    task:
      type: python
      with: {name: "{{ item.name }}", value: "{{ item.value }}"}
      code: |
        def main(name, value):
            return {"name": name, "twice": int(value) * 2}
    next: [{step: total}]
  - step: total
    type: python
    with: {results: "{{ each.results }}"}
    code: |
      def main(results):
          return {"sum": sum(r["twice"] for r in results)}
    next: [{step: end}]
  - step: end
    type: end
"""


def test_a_v1_iterator_becomes_a_canonical_loop_step() -> None:
    upgrade = upgrade_text(V1_ITERATOR, "iterator.yaml")
    assert [d.code for d in upgrade.diagnostics] == ["U804"], upgrade.diagnostics
    message = upgrade.diagnostics[0].message
    assert "128" in message and "at most 8 at a time" in message  # the bound and v1's pool
    assert upgrade.writable
    text = upgrade.text
    assert (
        "    # each item on its own\n"
        "    loop:\n"
        '      in: "{{ workload.items }}"\n'
        "      iterator: item\n"
        "      spec: {mode: parallel}\n"
        "    tool:\n"
        "      kind: python\n"
    ) in text
    assert '      args: {name: "{{ item.name }}", value: "{{ item.value }}"}\n' in text
    assert check_text(text, "iterator.yaml").playbook.dialect == "canonical"
    # The same loop, tool, args and routing for the runtime (the run: test_upgrade_runs.py).
    assert _payloads(text, "iterator.yaml") == _payloads(V1_ITERATOR, "iterator.yaml")


@pytest.mark.parametrize(
    "old, new, reason",
    [
        (  # each item's result saved: a sink
            "      type: python\n",
            "      type: python\n      save: {storage: postgres, table: t, auth: pg}\n",
            "canonical has no sink",
        ),
        ("    element: item\n", "    element: item\n    where: x\n", "`where` of the iterator"),
        ("      with: {", "      data: {x: 1}\n      with: {", "binds inputs under several keys"),
    ],
)
def test_an_iterator_without_an_exact_loop_is_left(old, new, reason) -> None:
    upgrade = upgrade_text(V1_ITERATOR.replace(old, new, 1), "iterator.yaml")
    assert not upgrade.writable
    assert any(d.code == "U801" and reason in d.message for d in upgrade.diagnostics), (
        upgrade.diagnostics
    )


def test_v1_inputs_under_two_keys_become_one_input() -> None:
    # NoETL's v1 worker merges a step's args/with/input/data (96458eef worker.py, task_data);
    # the reader binds the same (read/v1.py step_input), and the upgrade writes one `input`.
    from tests.test_upgrade_runs import TWO_KEYS

    upgrade = upgrade_text(TWO_KEYS, "two.yaml")
    assert upgrade.writable, upgrade.diagnostics
    assert '    input:\n      a: "{{ workload.base }}"\n      b: 3\n' in upgrade.text
    assert "with:" not in upgrade.text and "data:" not in upgrade.text
    assert _payloads(upgrade.text, "two.yaml") == _payloads(TWO_KEYS, "two.yaml")
    step = check_text(TWO_KEYS, "two.yaml").playbook.step("start")
    assert dict(step.input) == {"a": "{{ workload.base }}", "b": 3}
    # A key bound twice is decided by the worker's precedence: left for a hand (U801).
    clash = TWO_KEYS.replace("      b: 3\n", "      b: 3\n      a: 1\n")
    left = upgrade_text(clash, "two.yaml")
    assert not left.writable
    assert any("binds inputs under several keys" in d.message for d in left.diagnostics)
    # ...and the reader binds it as the worker does: `with` over `data`.
    assert check_text(clash, "two.yaml").playbook.step("start").input["a"] == "{{ workload.base }}"


def test_a_v1_step_payload_binds_arguments_except_an_http_body() -> None:
    # 58c2a16b's worker binds a step's `payload` between `with` and `input` (recorded:
    # dsl_keys/v1_python_payload_present); an http step's `payload` is its request body only.
    from tests.test_upgrade_runs import TWO_KEYS

    python = TWO_KEYS.replace("    data:\n      b: 3\n", "    payload:\n      b: 3\n      a: 1\n")
    python = python.replace("    with:\n", "    input:\n      b: 9\n    with:\n")
    step = check_text(python, "p.yaml").playbook.step("start")
    assert dict(step.input) == {"a": "{{ workload.base }}", "b": 3}
    # The upgrade cannot keep it as a canonical tool setting: left for a hand (U801).
    left = upgrade_text(python, "p.yaml")
    assert not left.writable
    assert any("`payload` of" in d.message and d.code == "U801" for d in left.diagnostics)
    http = (
        "apiVersion: noetl.io/v1\nkind: Playbook\nname: h\npath: tests/h\nworkflow:\n"
        "  - step: start\n    type: http\n    method: POST\n"
        "    endpoint: http://127.0.0.1:9/x\n    payload:\n      data: {k: 1}\n"
        "    next:\n      - step: end\n  - step: end\n"
    )
    step = check_text(http, "h.yaml").playbook.step("start")
    assert step.input is None
    assert dict(step.tool.config["payload"]) == {"data": {"k": 1}}


def test_values_along_a_v1_conditional_next_replace_a_forwarding_input() -> None:
    from tests.test_upgrade_runs import V1_PASSED

    upgrade = upgrade_text(V1_PASSED, "passed.yaml")
    assert upgrade.writable and upgrade.diagnostics == [], upgrade.diagnostics
    text = upgrade.text
    assert '- {step: report_warm, when: "{{ start.warm }}"}\n        - {step: report_cold}' in text
    # Each target's input is now the values its one way in passed; the forwarders are gone.
    assert text.count('city: "{{ workload.city }}"') == 2 and '"{{ city }}"' not in text
    assert "    # name: report_cold\n" in text  # a v1 label, kept as a comment
    assert check_text(text, "passed.yaml").diagnostics == []


@pytest.mark.parametrize(
    "change",
    [
        # The target's input does more than forward a passed value.
        ('city: "{{ city }}"\n      temperature', 'city: "{{ city | upper }}"\n      temperature'),
        # A key the arc does not pass: the target reads it from elsewhere.
        (
            'temperature: "{{ temperature }}"\n    code: |\n      def main(city, temperature):\n'
            '          return {"status": "warm"',
            'temperature: "{{ temperature }}"\n      unit: "{{ workload.n }}"\n    code: |\n'
            '      def main(city, temperature, unit):\n          return {"status": "warm"',
        ),
        # A second way into the target: it would run without the values.
        (
            '{"status": "cold", "city": city, "temperature": temperature}\n',
            '{"status": "cold", "city": city, "temperature": temperature}\n'
            "    next: [{step: report_warm}]\n",
        ),
    ],
)
def test_values_along_a_v1_conditional_next_are_left_when_not_the_same(change) -> None:
    from tests.test_upgrade_runs import V1_PASSED

    _assert_left(V1_PASSED, *change, "has no exact canonical arc")


def _assert_left(text: str, old: str, new: str, reason: str) -> None:
    """``text`` with ``old`` replaced by ``new`` is not written: a U801 says ``reason``."""
    assert old in text
    upgrade = upgrade_text(text.replace(old, new, 1), "passed.yaml")
    assert not upgrade.writable
    assert any(d.code == "U801" and reason in d.message for d in upgrade.diagnostics), (
        upgrade.diagnostics
    )


def test_args_along_a_case_v2_rule_next_move_to_the_target_input() -> None:
    from tests.test_upgrade_runs import CASE_V2_PASSED

    upgrade = upgrade_text(CASE_V2_PASSED, "passed.yaml")
    assert upgrade.writable and upgrade.diagnostics == [], upgrade.diagnostics
    text = upgrade.text
    # The step's result, `response` when the rule fired, is read by the step's name.
    block = '    input:\n      city: "{{ start.city }}"\n      temperature: "{{ start.temp }}"\n'
    assert text.count(block) == 2 and "args:\n            city" not in text
    assert check_text(text, "passed.yaml").diagnostics == []


@pytest.mark.parametrize(
    "old, new",
    [
        # The target binds step args of its own.
        (
            "\n  - step: report_warm\n    tool:",
            "\n  - step: report_warm\n    args: {unit: c}\n    tool:",
        ),
        # A second way into the target: it would run without the values.
        (
            "        result = {'status': 'cold', 'city': city, 'temperature': temperature}\n",
            "        result = {'status': 'cold', 'city': city, 'temperature': temperature}\n"
            "    next: [{step: report_warm}]\n",
        ),
        # A tool setting that reads a passed value under another key.
        (
            "        city: \"{{ city }}\"\n      code: |\n        result = {'status': 'warm'",
            '        city: "{{ city }}"\n        label: "{{ city }}!"\n      code: |\n'
            "        result = {'status': 'warm'",
        ),
    ],
)
def test_args_along_a_case_v2_rule_next_are_left_when_not_the_same(old, new) -> None:
    from tests.test_upgrade_runs import CASE_V2_PASSED

    _assert_left(CASE_V2_PASSED, old, new, "passed along `next`")
