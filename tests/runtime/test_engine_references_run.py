"""References NoETL's engines resolve, run on real Airflow (``dag.test()``): each is a field of
the engine profile (noetl_compile/engine_profiles.py) with the engine line it follows."""

from __future__ import annotations

import textwrap

import pytest

from noetl_compile.cli import main


@pytest.fixture
def run_playbook(airflow_db, run_dag, tmp_path):
    def run(name: str, yaml_text: str, conf=None):
        source = tmp_path / f"{name}.yaml"
        source.write_text(textwrap.dedent(yaml_text))
        out = tmp_path / "dags"
        assert main(["compile", str(source), "-o", str(out)]) == 0
        (dag_file,) = out.glob("*.py")
        return run_dag(dag_file.read_text(), f"references.{name}", conf)

    return run


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
