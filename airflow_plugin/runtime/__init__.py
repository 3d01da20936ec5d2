"""NoETL step runtime: pure Python, no Airflow imports (unit-testable without Airflow).

Modules: ``payload`` (the compiler -> runtime contract), ``pipeline`` (tool pipelines and
policies), ``step`` (one step end to end), ``loop`` / ``cursor`` (iteration), ``interpreter``
(a region or a whole playbook in one process), ``nested`` (a child playbook run inline),
``catalog`` (catalog path -> compiled playbook), ``gates`` (approval, input, sleep).

Nothing is re-exported here: a package import stays free, so an operator that needs only
``runtime.payload`` at DAG parse time does not load the step machinery. What templates see
(render, context, proxy, ids) is the floor below, ``airflow_plugin.templating``.
"""
