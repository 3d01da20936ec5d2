"""The quantum tool's and cursor loops' check rules on small inline playbooks."""

from __future__ import annotations

from noetl_compile.diagnostics import Severity
from tests.check_support import canonical, findings, severities


# -- quantum -------------------------------------------------------------------------------------
def test_valid_quantum(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: quantum
          provider: aer
          circuit: |
            // a Bell pair
            OPENQASM 3.0;
            qubit[2] q;
          shots: 100
          transpile: {optimization_level: 2, seed_transpiler: 7}
          tags: [bell]
          device: GPU
        next: [{step: poll}]
      - step: poll
        tool: {kind: quantum, provider: "{{ workload.p }}", op: status, job_id: "{{ ctx.job }}",
               shots: "{{ workload.shots }}", circuit: "{{ workload.circuit }}"}
    """)
    assert findings(tmp_path, text) == []


def test_quantum_rules(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: quantum
          provider: ibmq
          shots: 0
          transpile: {optimization_level: 5}
          qubits: 2
          device: gpu
        next: [{step: b}]
      - step: b
        tool: {kind: quantum, op: results}
        next: [{step: c}]
      - step: c
        tool:
          kind: quantum
          op: launch
          circuit: |
            qreg q[2];
    """)
    assert findings(tmp_path, text) == [
        (
            "C511",
            8,
            11,
            "the quantum tool step 'start' needs a `circuit` (OpenQASM 2/3) for op run",
        ),
        (
            "C511",
            9,
            15,
            "`provider` of step 'start' must be one of aer, basic, ibm, not 'ibmq'; "
            "did you mean 'ibm'?",
        ),
        ("C511", 10, 12, "`shots` of step 'start' must be a positive integer, not 0"),
        (
            "C511",
            11,
            37,
            "`transpile.optimization_level` of step 'start' must be 0, 1, 2 or 3, not 5",
        ),
        ("C511", 12, 5, "unknown key 'qubits' in the quantum tool step 'start'"),
        (
            "C511",
            13,
            13,
            "`device` of step 'start' must be one of CPU, GPU, not 'gpu'; did you mean 'GPU'?",
        ),
        ("C511", 16, 29, "the quantum tool step 'b' needs a `job_id` for op results"),
        (
            "C511",
            21,
            9,
            "`op` of step 'c' must be one of run, submit, status, results, not 'launch'",
        ),
    ]


def test_quantum_literal_circuit_header(tmp_path):
    text = canonical("""\
      - step: start
        tool:
          kind: quantum
          circuit: |
            qreg q[2];
    """)
    assert findings(tmp_path, text) == [
        (
            "C511",
            10,
            7,
            "`circuit` of step 'start' must start with an `OPENQASM 2.0;` or "
            "`OPENQASM 3.0;` header",
        )
    ]


# -- cursor loops --------------------------------------------------------------------------------
def test_cursor_loops(tmp_path):
    text = canonical("""\
      - step: start
        loop:
          cursor: {kind: postgres, auth: "{{ pg_auth }}", claim: "UPDATE q SET s = 1 RETURNING id"}
          iterator: row
          spec: {mode: cursor}
        tool: {kind: noop}
        next: [{step: b}]
      - step: b
        loop:
          cursor: {kind: mysql, claim: "SELECT 1", batch: 2}
          iterator: row
          spec: {mode: cursor}
        tool: {kind: noop}
    """)
    assert findings(tmp_path, text) == [
        (
            "C512",
            15,
            13,
            "the cursor of step 'b' needs `auth` (a cursor needs a driver `kind`, a "
            "credential `auth` and a `claim` statement)",
        ),
        (
            "C512",
            15,
            20,
            "cursor driver 'mysql' of step 'b' is not registered here (registered: postgres); "
            "the runtime needs a package that declares it under the `noetl.cursor_drivers` "
            "entry points",
        ),
        ("C512", 15, 46, "unknown key 'batch' in the cursor of step 'b'"),
    ]
    assert severities(tmp_path, text, "C512") == [Severity.ERROR, Severity.WARNING, Severity.ERROR]
