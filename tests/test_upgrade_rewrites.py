"""`noetlc upgrade`, construct by construct: guards become arcs reading the step by name, values
passed along an arc move into the target's input, `vars` become ctx variables, a v1 iterator
becomes a loop step, v1 inputs under two keys become one; each left with its reason where the
rewrite would not be exact."""

from __future__ import annotations

import pytest

from noetl_compile.check import check_text
from noetl_compile.upgrade import upgrade_text
from noetl_compile.upgrade.edits import COMMENT_PREFIX
from noetl_compile.upgrade.guards import rebind
from tests.upgrade_payloads import findings, step_payloads

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
    assert again.playbook.dialect == "canonical" and findings(again.diagnostics) == []


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
    assert step_payloads(upgrade.text, "v1.yaml") == step_payloads(V1_PASSED, "v1.yaml")


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
    assert again.playbook.dialect == "canonical" and findings(again.diagnostics) == []


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
    assert step_payloads(text, "iterator.yaml") == step_payloads(V1_ITERATOR, "iterator.yaml")


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
    assert step_payloads(upgrade.text, "two.yaml") == step_payloads(TWO_KEYS, "two.yaml")
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
    # Clean but for the D9xx infos, which follow the generation (D936: 138c10ed's worker hands
    # a python tool its `input`, not its `args`).
    assert findings(check_text(text, "passed.yaml").diagnostics) == []


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
    # Clean but for the D9xx infos, which follow the generation (D936: 138c10ed's worker hands
    # a python tool its `input`, not its `args`).
    assert findings(check_text(text, "passed.yaml").diagnostics) == []


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
