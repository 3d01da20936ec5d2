"""A YAML error says what to change, not only what PyYAML's parser could not do: each common
mistake's Y001 carries a hint after the parser's wording, at the parser's position."""

from __future__ import annotations

import pytest

from noetl_compile.check import check_text

HEAD = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: y, path: t/y}\nworkflow:\n"
CASES = [
    ("colon-in-value", "  - step: start\n    desc: total: 3\n", (6, 16), "quote the whole value"),
    (
        "indented-key",
        "  - step: start\n    tool: {kind: noop}\n     next: a\n",
        (7, 6),
        "keys of one mapping start in the same column",
    ),
    ("at-sign", "  - step: start\n    desc: @home\n", (6, 11), "needs quotes"),
    ("alias", "  - step: start\n    desc: *nowhere\n", (6, 11), "anchor `&name`"),
    (
        "flow-comma",
        "  - step: start\n    tool: {kind: noop code: 1}\n",
        (6, 11),
        "closes on that line",
    ),
]


@pytest.mark.parametrize(
    ("body", "where", "hint"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_yaml_error_carries_a_hint(body, where, hint):
    result = check_text(HEAD + body, "y.yaml")
    (error,) = [d for d in result.diagnostics if d.code == "Y001"]
    assert hint in error.message, error.message
    assert error.message.startswith("invalid YAML: ")
    assert (error.position.line, error.position.col) == where, error
