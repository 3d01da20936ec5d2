"""References NoETL's engines resolve, run on real Airflow (``dag.test()``): each is a field of
the engine profile (noetl_compile/engine_profiles.py) with the engine line it follows."""

from __future__ import annotations

import pytest

from tests.harness.compiled import playbook_runner


@pytest.fixture
def run_playbook(airflow_db, run_dag, tmp_path):
    return playbook_runner(run_dag, tmp_path, "references")


def test_a_pipeline_step_field_reads_the_last_task_for_pagination(run_playbook):
    """138c10ed engine.py:4543 promotes the last task's result under the pipeline's record, so
    the pagination guard `{{ fetch.has_more }}` after a two-task pipeline reads the last task's
    field (profile field pipeline_last_task_promoted); the record's own keys win."""
    run = run_playbook(
        "pipeline_promoted",
        """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: pipeline_promoted, path: references/pipeline_promoted}
        workflow:
          - step: start
            tool:
              - {name: page, kind: python, code: "result = {'items': [1, 2], 'cursor': 7}"}
              - name: collect
                kind: python
                input: {n: "{{ page.items | length }}"}
                code: "result = {'count': n, 'has_more': True, 'status': 'mine'}"
            next:
              arcs:
                - {step: more, when: "{{ start.has_more and start.status == 'ok' }}"}
                - {step: done}
          - step: more
            tool:
              kind: python
              input: {count: "{{ start.count }}", cursor: "{{ start.cursor }}"}
              code: "result = {'count': count, 'cursor': cursor}"
          - step: done
            tool: {kind: python, code: "result = 'done'"}
        """,
    )
    assert run.state == "success"
    # the first task's fields are not promoted: `start.cursor` is undefined, and the python tool
    # renders it '' (python_input_undefined_blank)
    assert run.xcom["more"]["result"] == {"count": 2, "cursor": ""}
    assert run.states["done"] == "skipped", run.states
    # the stored result stays NoETL's record
    assert "has_more" not in run.xcom["start"]["result"]


def test_canonical_references_resolve_to_the_engines_values(run_playbook):
    """References 138c10ed resolves that noetlc used to keep as text: `{{ ids.data }}` of a list
    result and `{{ a.status }}` of a result without one (engine.py:312 hydrated envelope,
    result_envelope_fields), `output.data.status` in an arc guard where the result has its own
    `data` (engine.py:413, output_data_own_data), `{{ error }}` in a python input on a success
    ('' in the engine's python tool, python_input_undefined_blank)."""
    run = run_playbook(
        "canonical_refs",
        """
        apiVersion: noetl.io/v2
        kind: Playbook
        metadata: {name: canonical_refs, path: references/canonical_refs}
        workflow:
          - step: start
            tool: {kind: python, code: "result = [3, 1, 2]"}
            next: [{step: probe}]
          - step: probe
            tool: {kind: python, code: "result = {'data': {'status': 'ready'}, 'n': 1}"}
            next:
              arcs:
                - {step: use, when: "{{ output.data.status == 'ready' }}"}
                - {step: other}
          - step: use
            tool:
              kind: python
              input:
                ids: "{{ start.data }}"
                count: "{{ start.data | length }}"
                st: "{{ probe.status }}"
                err: "{{ error }}"
              code: "result = {'ids': ids, 'count': count, 'st': st, 'err': err}"
          - step: other
            tool: {kind: python, code: "result = 'other'"}
        """,
    )
    assert run.state == "success", run.states
    assert run.states["other"] == "skipped"
    assert run.xcom["use"]["result"] == {"ids": [3, 1, 2], "count": 3, "st": "COMPLETED", "err": ""}
    assert run.xcom["start"]["result"] == [3, 1, 2]  # the stored result stays the value


def test_a_v1_loop_result_is_the_plain_list(run_playbook):
    """58c2a16b: `{{ loop.result }}` of an iterator step is the plain list of item results
    (render.py:148), so `| length` counts the items (loop_result_is_list)."""
    run = run_playbook(
        "v1_loop_result",
        """
        apiVersion: noetl.io/v1
        kind: Playbook
        metadata: {name: v1_loop_result, path: references/v1_loop_result}
        workload: {items: [1, 2, 3]}
        workflow:
          - step: start
            next: [{step: loop}]
          - step: loop
            type: iterator
            collection: '{{ workload.items }}'
            element: item
            task:
              type: python
              code: "def main(x):\\n    return {'sq': int(x) * int(x)}\\n"
              with: {x: '{{ item }}'}
            next: [{step: count}]
          - step: count
            type: python
            with: {n: '{{ loop.result | length }}', last: '{{ loop.result[2].sq }}'}
            code: "def main(n, last):\\n    return {'n': n, 'last': last}\\n"
            next: [{step: end}]
          - step: end
        """,
    )
    assert run.state == "success", run.states
    assert run.xcom["count"]["result"] == {"n": 3, "last": 9}
