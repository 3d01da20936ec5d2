"""Gate answers and results (airflow_plugin.runtime.gates): typing, --signal / --value syntax."""

from __future__ import annotations

import pytest

from airflow_plugin.runtime.gates import (
    APPROVE,
    INPUT_OK,
    REJECT,
    GateAnswerError,
    answer_syntax,
    approval_result,
    input_result,
    parse_answer,
    sleep_result,
    typed_values,
)

PARAMS = {
    "discount": {"type": "number", "default": 0.0},
    "count": {"type": "integer"},
    "note": {"type": "string", "default": ""},
    "rush": {"type": "boolean", "default": False},
    "tags": {"type": "array", "default": []},
}
# The same params as Airflow's API serves them (Param.serialize()).
SERIALIZED = {
    "discount": {"value": 0.1, "schema": {"type": "number"}, "description": None},
    "count": {"value": None, "schema": {"type": "integer"}, "description": None},
}


def test_values_are_typed_per_param():
    typed = typed_values(
        PARAMS, {"discount": "0.2", "count": "3", "note": "007", "rush": "true", "tags": "[1]"}
    )
    assert typed == {"discount": 0.2, "count": 3, "note": "007", "rush": True, "tags": [1]}
    assert typed_values(PARAMS, {"discount": 1, "count": 4.0}) == {"discount": 1, "count": 4}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"discount": "lots"}, "param 'discount' expects number, got 'lots'"),
        ({"count": "1.5"}, "param 'count' expects integer, got '1.5'"),
        ({"count": True}, "param 'count' expects integer, got True"),
        ({"rush": "yes"}, "param 'rush' expects boolean, got 'yes'"),
        ({"tags": "{}"}, "param 'tags' expects array, got '{}'"),
        ({"nope": 1}, "unknown param(s) 'nope'; the gate takes 'discount', 'count', 'note'"),
    ],
)
def test_values_that_do_not_fit_are_errors(values, message):
    with pytest.raises(GateAnswerError) as caught:
        typed_values(PARAMS, values)
    assert str(caught.value).startswith(message)


def test_approve_answers():
    options = [APPROVE, REJECT]
    assert parse_answer(["approve"], options, {}) == ([APPROVE], {})
    assert parse_answer(["Reject"], options, {}) == ([REJECT], {})
    with pytest.raises(GateAnswerError, match="expected approve or reject, got 'maybe'"):
        parse_answer(["maybe"], options, {})
    with pytest.raises(GateAnswerError, match="give one answer, not 2"):
        parse_answer(["approve", "reject"], options, {})


def test_input_answers_pairs_json_and_defaults():
    chosen, values = parse_answer(["count=2", "discount=0.25"], [INPUT_OK], PARAMS)
    assert chosen == [INPUT_OK]
    assert values == {"discount": 0.25, "count": 2, "note": "", "rush": False, "tags": []}
    _, values = parse_answer(['{"count": 5, "note": "a=b"}'], [INPUT_OK], PARAMS)
    assert values["count"] == 5 and values["note"] == "a=b" and values["discount"] == 0.0
    # Airflow's serialized params: the default is `value`, the type is in `schema`.
    _, values = parse_answer(["count=7"], [INPUT_OK], SERIALIZED)
    assert values == {"discount": 0.1, "count": 7}
    with pytest.raises(GateAnswerError, match="no value for param\\(s\\) 'count'"):
        parse_answer(["discount=0.3"], [INPUT_OK], PARAMS)
    with pytest.raises(GateAnswerError, match="expected name=value or a JSON object, got 'x'"):
        parse_answer(["x"], [INPUT_OK], PARAMS)


def test_results_have_the_spec_shapes():
    assert approval_result([APPROVE], {"id": "ann", "name": "Ann"}, "t", False) == {
        "approved": True,
        "choice": "approve",
        "responded_by": "ann",
        "responded_at": "t",
        "timed_out": False,
    }
    assert approval_result([REJECT], None, None, True)["choice"] == "reject"
    assert input_result({"a": 1}, None, None, True) == {
        "values": {"a": 1},
        "responded_by": None,
        "responded_at": None,
        "timed_out": True,
    }
    assert sleep_result("2026-01-01T00:00:00+00:00") == {"slept_until": "2026-01-01T00:00:00+00:00"}


def test_answer_syntax_names_the_params():
    assert answer_syntax("ask", [INPUT_OK], SERIALIZED) == (
        "--signal ask=discount=<number> --signal ask=count=<integer>"
    )
    assert answer_syntax("ok", [APPROVE, REJECT], {}) == "--signal ok=approve|reject"
