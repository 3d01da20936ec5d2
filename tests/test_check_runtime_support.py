"""C515: `noetlc check` warns about tool kinds the Airflow runtime cannot execute.

The compiler keeps its own list of executable kinds (``noetl_compile.runtime_support``) because
it must not import ``airflow_plugin``; the first tests hold that list equal to the runtime's
registry so that the two cannot drift apart.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from noetl_compile.check import check_text
from noetl_compile.diagnostics import Severity
from noetl_compile.read.base import TOOL_KINDS
from noetl_compile.rules import RULES, explain
from noetl_compile.runtime_support import (
    OPERATOR_KINDS,
    REGISTRY_KINDS,
    RUNTIME_KINDS,
    runtime_executes,
)

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,  # the assertion below shows stderr
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- the list and the runtime ----------------------------------------------------------------------


def test_list_equals_the_runtime_registry_plus_operator_kinds() -> None:
    # A fresh interpreter: other tests may register extra executors in this process.
    out = _python(
        "import json; from airflow_plugin.tools.registry import available_tools; "
        "print(json.dumps(available_tools()))"
    )
    registry = set(json.loads(out))
    assert REGISTRY_KINDS == registry
    assert RUNTIME_KINDS == registry | {"playbook", "playbooks", "workbook", "gate"}
    assert OPERATOR_KINDS == {"playbook", "playbooks", "workbook", "gate"}


def test_builtin_executors_match_in_process() -> None:
    from airflow_plugin.tools.registry import BUILTIN_TOOLS, PROVIDED_ABOVE

    # `playbook` runs the interpreter, so runtime/nested.py registers it from the floor above.
    assert set(BUILTIN_TOOLS) | set(PROVIDED_ABOVE) == REGISTRY_KINDS
    assert set(PROVIDED_ABOVE) == {"playbook", "playbooks"}


def test_quantum_is_executable() -> None:
    assert runtime_executes("quantum")
    assert runtime_executes("secret_manager") and runtime_executes("gate")
    assert runtime_executes("shell")
    assert not runtime_executes("nats")


def test_the_check_does_not_import_the_runtime() -> None:
    out = _python(
        "import sys, json\n"
        "from noetl_compile.check import check_text\n"
        "check_text('apiVersion: noetl.io/v2\\nkind: Playbook\\nmetadata: {name: a, path: a}\\n"
        "workflow:\\n  - step: start\\n    tool: {kind: nats, subject: a}\\n')\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('airflow', 'airflow_plugin'))))"
    )
    assert json.loads(out) == []


def test_rule_is_a_warning_with_an_explanation() -> None:
    rule = RULES["C515"]
    assert rule.severity is Severity.WARNING
    text = explain("C515")
    assert text is not None and "airflow_plugin" in text and "before:" in text


# -- where the rule fires ----------------------------------------------------------------------


def _findings(text: str) -> list[tuple[str, int, int, str]]:
    result = check_text(textwrap.dedent(text), "playbook.yaml")
    return [
        (d.code, d.position.line, d.position.col, d.message)
        for d in result.diagnostics
        if d.code in ("C515", "S110")
    ]


CANONICAL = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: p, path: p}}
workflow:
  - step: start
    tool:
      kind: {kind}
    next:
      arcs:
        - step: end
  - step: end
    tool: {{kind: noop}}
"""

NOT_EXECUTABLE = sorted(TOOL_KINDS["canonical"] - RUNTIME_KINDS)
EXECUTABLE = sorted(TOOL_KINDS["canonical"] & RUNTIME_KINDS)


@pytest.mark.parametrize("kind", NOT_EXECUTABLE)
def test_every_kind_without_executor_warns_at_its_kind(kind: str) -> None:
    assert _findings(CANONICAL.format(kind=kind)) == [
        (
            "C515",
            7,
            13,
            f"this runtime cannot execute tool kind {kind!r} (step 'start'), "
            "so it fails at run time",
        )
    ]


@pytest.mark.parametrize("kind", EXECUTABLE)
def test_executable_kinds_do_not_warn(kind: str) -> None:
    assert [f for f in _findings(CANONICAL.format(kind=kind)) if f[0] == "C515"] == []


def test_quantum_and_workbook_lists_cover_what_they_should() -> None:
    assert "quantum" not in NOT_EXECUTABLE and "nats" in NOT_EXECUTABLE
    assert "shell" not in NOT_EXECUTABLE
    assert {
        "python",
        "http",
        "postgres",
        "duckdb",
        "secrets",
        "transfer",
        "noop",
        "quantum",
    } <= set(EXECUTABLE)


def test_unknown_kind_is_s110_only() -> None:
    # A misspelt kind is already an error; a second finding would only repeat it.
    assert [f[0] for f in _findings(CANONICAL.format(kind="pyhton"))] == ["S110"]


def test_templated_kind_is_not_judged() -> None:
    assert _findings(CANONICAL.format(kind='"{{ workload.kind }}"')) == []


def test_pipeline_task_is_named() -> None:
    text = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: p, path: p}
    workflow:
      - step: start
        tool:
          - name: fetch
            kind: http
            url: http://example.test
          - name: load
            kind: snowflake
            command: SELECT 1
    """
    assert _findings(text) == [
        (
            "C515",
            11,
            15,
            "this runtime cannot execute tool kind 'snowflake' (task 'load' of step 'start'), "
            "so it fails at run time",
        )
    ]


def test_workbook_call_warns_once_on_the_task_naming_callers() -> None:
    text = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: p, path: p}
    workbook:
      - name: export
        tool: {kind: ducklake, command: SELECT 1}
      - name: greet
        tool: {kind: python, code: "result = 1"}
    workflow:
      - step: start
        tool: {kind: workbook, name: export}
        next:
          arcs:
            - step: again
      - step: again
        tool: {kind: workbook, name: export}
        next:
          arcs:
            - step: hello
      - step: hello
        tool: {kind: workbook, name: greet}
    """
    assert _findings(text) == [
        (
            "C515",
            6,
            18,
            "this runtime cannot execute tool kind 'ducklake' (workbook task 'export', "
            "called by steps 'start', 'again'), so it fails at run time",
        )
    ]


def test_v1_string_tool_and_iterator_task_resolve_to_the_real_kind() -> None:
    text = """\
    apiVersion: noetl.io/v1
    kind: Playbook
    name: p
    path: p
    workload:
      items: [1, 2]
    workflow:
      - step: start
        next:
          - step: each
      - step: each
        type: iterator
        collection: "{{ workload.items }}"
        element: item
        task:
          type: nats
          subject: hi
        next:
          - step: other
      - step: other
        tool: container
        next:
          - step: end
      - step: end
    """
    assert _findings(text) == [
        (
            "C515",
            16,
            13,
            "this runtime cannot execute tool kind 'nats' (step 'each'), so it fails at run time",
        ),
        (
            "C515",
            21,
            11,
            "this runtime cannot execute tool kind 'container' (step 'other'), "
            "so it fails at run time",
        ),
    ]


def test_sink_tool_kind_is_checked() -> None:
    text = """\
    apiVersion: noetl.io/v2
    kind: Playbook
    metadata: {name: p, path: p}
    workflow:
      - step: start
        tool: {kind: python, code: "result = 1"}
        case:
          - when: "{{ event.name == 'call.done' }}"
            then:
              sink:
                tool: {kind: gcs, table: runs}
        next:
          - step: end
      - step: end
        tool: {kind: noop}
    """
    assert _findings(text) == [
        (
            "C515",
            11,
            26,
            "this runtime cannot execute tool kind 'gcs' (the sink of step 'start'), "
            "so it fails at run time",
        )
    ]


_SINK_OF_START = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: p, path: p}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          sink:
            tool: TOOL
            table: runs
    next:
      - step: end
  - step: end
    tool: {kind: noop}
"""


def test_a_sink_tool_written_as_its_kind_is_checked() -> None:
    """`tool: postgress` (the kind alone, settings beside it): the runtime looks the kind up
    like a mapping's, so a kind it has no executor for fails there as well."""
    assert _findings(_SINK_OF_START.replace("TOOL", "Postgress")) == [
        (
            "C515",
            11,
            19,
            "this runtime cannot execute tool kind 'postgress' (the sink of step 'start'), "
            "so it fails at run time",
        )
    ]


@pytest.mark.parametrize(
    "tool", ["event_log", "event", "{kind: event_log}", "{kind: event}", "postgres", "duckdb"]
)
def test_event_log_and_sql_sinks_do_not_warn(tool: str) -> None:
    """The sink writes `event`/`event_log` to the event log itself: no executor needed."""
    assert _findings(_SINK_OF_START.replace("TOOL", tool)) == []


def test_a_postgres_sink_written_as_its_kind_needs_auth_beside_it() -> None:
    """`tool: postgres` with `table` and `data` but no `auth`: the runtime refuses the sink
    (dc55c492 completed such a run and wrote nothing: tools_case_v2/v2_case_sink_text_without_auth),
    so check says so at the kind, as it does for the `tool: {kind: postgres}` form."""
    text = _SINK_OF_START.replace("TOOL", "postgres")
    found = [
        (d.code, d.position.line, d.position.col)
        for d in check_text(text, "playbook.yaml").diagnostics
        if d.code == "C503"
    ]
    assert found == [("C503", 11, 19)]
    with_auth = text.replace("table: runs", "table: runs\n            auth: pg_local")
    assert "C503" not in {d.code for d in check_text(with_auth, "playbook.yaml").diagnostics}
