"""Hostile cases, items 1 and 3 of issue 10: YAML loader limits and template truth (what\nparses but could never run, and says so)."""

from __future__ import annotations

import base64

from tests.hostile_support import (
    HEADER,
    STEPS,
    Case,
    assert_no_dag,
    http_step,
    laughs,
    one,
    playbook,
    python_step,
)

INPUT_CASES: list[Case] = [
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
        after=lambda d: assert_no_dag(d / "out"),
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
        after=lambda d: assert_no_dag(d / "out"),
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
]
