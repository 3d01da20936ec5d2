"""Robustness: mutated real playbooks never raise and never yield a diagnostic without a position."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from noetl_compile.check import check_text
from tests.fuzz_mutations import mutated_playbook


@pytest.mark.corpus
@settings(
    max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
@given(mutated_playbook())
def test_mutated_playbooks_give_positioned_diagnostics(text):
    result = check_text(text, "mutated.yaml")
    lines = max(1, text.count("\n") + 1)
    for d in result.diagnostics:
        assert d.code != "E002", d.message  # an internal error is a bug, not a finding
        assert d.code and d.message
        assert 1 <= d.position.line <= lines + 1, d
        assert d.position.col >= 1, d


@pytest.mark.parametrize("kind", ["[]", "{}", "[python]"])
def test_a_v1_step_whose_type_is_not_text_gets_findings_not_an_internal_error(kind):
    # The fuzz above found it: the v1 dropped-keys lookup hashed a list `type`.
    text = (
        "kind:\n- 0\nworkflow:\n- step: start\n  next:\n  - step: t\n"
        f"- step: t\n  type: {kind}\n  params: {{a: 1}}\n  next:\n  - step: end\n- step: end\n"
    )
    codes = [d.code for d in check_text(text, "v1.yaml").diagnostics]
    assert "E002" not in codes
    assert codes  # the malformed `type` itself is reported
