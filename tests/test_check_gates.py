"""The gate tool's check rules and durations on small inline playbooks."""

from __future__ import annotations

import pytest

from noetl_compile.check.gates import duration_seconds
from tests.check_support import canonical, findings


# -- gates ---------------------------------------------------------------------------------------
def test_valid_gates(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: gate
          gate: input
          subject: "Rate?"
          params:
            rate: {type: number, default: 0.05, minimum: 0, maximum: 1}
            mode: {type: string, default: a, enum: [a, b]}
          timeout: 1h30m
          on_timeout: default
          assignees: [alice]
        next: [{step: wait}]
      - step: wait
        tool: {kind: gate, gate: sleep, until: "{{ workload.at }}"}
        next: [{step: ok}]
      - step: ok
        tool: {kind: gate, gate: approve, subject: "Pay?", timeout: PT2H, on_timeout: default,
               default: reject}
        next: [{step: nap}]
      - step: nap
        tool: {kind: gate, gate: sleep, duration: 45m}
    """)
    assert findings(tmp_path, text) == []


def test_gate_rules(tmp_path):
    text = canonical("""\
      - step: start
        tool: {kind: gate, gate: approve, subject: "Pay?", on_timeout: default}
        next: [{step: ask}]
      - step: ask
        tool:
          kind: gate
          gate: input
          subject: "Values?"
          timeout: 2 days
          params: {}
        next: [{step: ask2}]
      - step: ask2
        tool:
          kind: gate
          gate: input
          subject: "Values?"
          timeout: 10d
          on_timeout: default
          params:
            rate: {type: float}
        next: [{step: nap}]
      - step: nap
        tool: {kind: gate, gate: sleep}
        next: [{step: nap2}]
      - step: nap2
        tool: {kind: gate, gate: sleep, duration: 5m, until: "2026-05-01T09:00:00Z", subject: x}
        next: [{step: bad}]
      - step: bad
        tool: {kind: gate, gate: aprove}
    """)
    assert findings(tmp_path, text) == [
        (
            "C505",
            7,
            28,
            "the approve gate step 'start' has no `timeout`; a forgotten execution "
            "would wait forever",
        ),
        (
            "C507",
            7,
            66,
            "`on_timeout: default` in step 'start' needs `default: approve` or `default: reject`",
        ),
        (
            "C510",
            14,
            14,
            "`timeout` of step 'ask' is not a duration: '2 days' (use e.g. 30s, 5m, "
            "2h, 10d, 1h30m or ISO-8601 PT2H)",
        ),
        (
            "C506",
            15,
            13,
            "the input gate step 'ask' needs a non-empty `params` mapping "
            "(name -> {type, default?})",
        ),
        (
            "C507",
            25,
            7,
            "param 'rate' of step 'ask2' has no `default`, but `on_timeout: default` "
            "uses every param's default",
        ),
        (
            "C510",
            25,
            20,
            "`type` of param 'rate' of step 'ask2' must be one of string, integer, "
            "number, boolean, object, array, not 'float'",
        ),
        (
            "C508",
            28,
            28,
            "the sleep gate step 'nap' has neither `duration` nor `until`; give exactly one",
        ),
        (
            "C508",
            31,
            49,
            "the sleep gate step 'nap2' has both `duration` and `until`; give exactly one",
        ),
        ("C510", 31, 80, "`subject` does not apply to a sleep gate (step 'nap2')"),
        (
            "C510",
            34,
            28,
            "`gate` of step 'bad' must be one of approve, input, sleep, not 'aprove'; "
            "did you mean 'approve'?",
        ),
    ]


def test_gate_in_loop_or_pipeline(tmp_path):
    text = canonical("""\
      - step: start
        loop: {in: "{{ workload.items }}", iterator: it}
        tool: {kind: gate, gate: sleep, duration: 1s}
        next: [{step: b}]
      - step: b
        tool:
          - {name: first, kind: noop}
          - {name: wait, kind: gate, gate: sleep, duration: 1s}
    """)
    assert findings(tmp_path, text) == [
        (
            "C509",
            8,
            16,
            "step 'start' is a gate inside a loop; move the gate into its own step "
            "before or after the loop",
        ),
        (
            "C509",
            13,
            26,
            "task 'wait' of step 'b' is a gate inside a pipeline; a gate must be a step of its own",
        ),
    ]


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("30s", 30),
        ("5m", 300),
        ("2h", 7200),
        ("10d", 864000),
        ("1h30m", 5400),
        ("PT2H", 7200),
        ("P10D", 864000),
        ("P1DT2H30M", 95400),
        ("PT0.5S", 0.5),
    ],
)
def test_durations(text, seconds):
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "30", "5 m", "1x", "P", "PT", "P1DT", "h", "-5m"])
def test_bad_durations(text):
    assert duration_seconds(text) is None
