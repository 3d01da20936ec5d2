"""Spans after the composed YAML tree is released, and the AST's shared field-name sets.

`load` keeps only libyaml's start marks (plus end offset and style for strings) and drops the
node tree once the values are built; the AST nodes share one set of field names per class.
Both exist to keep a large playbook's memory per step small; these tests hold the behaviour
that must not change with them: every position is still exact, the tree is really gone, and
the models still validate.
"""

from __future__ import annotations

import gc

import pytest
import yaml
from pydantic import ValidationError

from noetl_compile.ast import Arc, Step, Task
from noetl_compile.check import check_text
from noetl_compile.load import YList, YMap, YStr, load_text, span_of

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: spans, path: tests/spans}
workload:
  base: 1
  base: 2
workflow:
  - step: start
    tool:
      kind: python
      args: {x: "tab\\there {{ nosuch.value }}", n: 7}
      code: |
        a = 1
        result = {'v': "{{ missing_step.value }}"}
    next:
      - step: nowhere
  - step: other
    tool:
      kind: python
      code: >
        folded line
        and {{ gone.value }}
    nxt:
      - step: start
"""


def _where(needle: str, occurrence: int = 1) -> tuple[int, int]:
    """1-based line and column of the n-th occurrence of ``needle`` in PLAYBOOK."""
    index = -1
    for _ in range(occurrence):
        index = PLAYBOOK.index(needle, index + 1)
    line = PLAYBOOK.count("\n", 0, index) + 1
    return line, index - (PLAYBOOK.rfind("\n", 0, index) + 1) + 1


def test_diagnostics_point_at_the_source_after_the_node_tree_is_released():
    result = check_text(PLAYBOOK, "spans.yaml")
    found = {(d.code, d.position.line, d.position.col) for d in result.diagnostics}
    expected = {
        ("Y002", *_where("base", 2)),  # a key's own position
        ("T302", *_where("nosuch")),  # inside a double-quoted scalar with an escape before it
        ("T302", *_where("missing_step")),  # inside a literal block, second line
        ("T302", *_where("gone")),  # inside a folded block
        ("R201", *_where("nowhere")),  # a list item's mapping value
        ("S118", *_where("nxt")),  # an unknown key (a misspelt `next`: the edges are lost)
    }
    assert expected <= found, sorted(found)
    duplicate = next(d for d in result.diagnostics if d.code == "Y002")
    assert f"first defined on line {_where('base', 1)[0]}" in duplicate.message


def test_values_keep_exact_spans():
    data = load_text(PLAYBOOK, "spans.yaml").data
    tool = data["workflow"][0]["tool"]
    args = tool["args"]
    text = args["x"]
    assert isinstance(text, YStr)
    span = span_of(text)
    assert (span.line, span.col) == _where('"tab')
    assert PLAYBOOK[span.start : span.end] == '"tab\\there {{ nosuch.value }}"'
    assert span.style == '"'
    code = span_of(tool["code"])
    assert code.style == "|"
    assert PLAYBOOK[code.start : code.end].startswith("|\n        a = 1\n")
    assert isinstance(args, YMap) and isinstance(data["workflow"], YList)
    assert (args.value_span("n").line, args.value_span("n").col) == _where("7")
    assert (args.key_span("n").line, args.key_span("n").col) == _where("n: 7")
    second = data["workflow"].item_span(1)
    assert (second.line, second.col) == _where("step: other")
    assert (span_of(args).line, span_of(args).col) == _where("{x:")
    assert span_of(args).style is None


def _live_nodes() -> int:
    gc.collect()
    # type(), not isinstance(): isinstance asks an object for its __class__, and the lazy
    # module proxies other tests leave in memory (Airflow's) import on that question.
    return sum(issubclass(type(obj), yaml.Node) for obj in gc.get_objects())


def test_the_composed_node_tree_is_released():
    before = _live_nodes()
    document = load_text(PLAYBOOK, "spans.yaml")
    assert document.data is not None
    assert _live_nodes() == before  # the document holds values and marks, no nodes


def test_ast_nodes_share_their_field_names_and_still_validate():
    first, second = Step(name="a"), Step(name="b", desc="two")
    assert first.model_fields_set is second.model_fields_set
    assert first.model_fields_set == set(Step.model_fields)
    first.tool = Task(kind="python")  # assignment adds a name the shared set already holds
    assert first.model_fields_set == set(Step.model_fields)
    assert first.tool.kind == "python" and second.tool is None
    assert Arc(target="x").model_fields_set is not first.model_fields_set
    with pytest.raises(ValidationError):
        Step(name="a", no_such_field=1)  # extra="forbid" still holds
    with pytest.raises(ValidationError):
        Arc(target="x", group="not a number")
