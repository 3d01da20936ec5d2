"""`noetlc upgrade`: exact rewrites, constructs left with a comment, what `--write` writes.

Runs of original against upgraded playbooks (step results, final status) are in
tests/test_upgrade_runs.py; the corpus in tests/test_upgrade_corpus.py; each rewrite of a
construct (guards, values along arcs, vars, iterators, inputs) in
tests/test_upgrade_rewrites.py. Here the rewrite itself is held: the text it produces, what it
keeps byte for byte, comments.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from noetl_compile.check import check_text
from noetl_compile.upgrade import upgrade_text
from noetl_compile.upgrade.case_v2 import LOOP_BOUND, LOOP_CONCURRENCY
from noetl_compile.upgrade.edits import COMMENT_PREFIX
from tests.upgrade_payloads import findings

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
    assert findings(again.diagnostics) == []
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
