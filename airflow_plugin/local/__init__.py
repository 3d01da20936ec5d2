"""`noetlc run`: one playbook on a real, local Airflow with no set-up.

The compiler CLI (``noetl_compile.run_cli``) compiles the playbook and the playbooks it calls into a
managed Airflow home and starts ``python -m airflow_plugin.local`` with that home's environment:
Airflow reads ``AIRFLOW_HOME`` and its settings once, at import, so a fresh process is the only
clean way to point it somewhere. Modules, in the order a run meets them:

* ``home``        where the managed home lives, its layout, its run slots (a DB and a dags
                  folder each, so runs of one home run at once) and their locks, Airflow's
                  settings for each (pure Python: the CLI imports it without Airflow);
* ``connections`` ``--connections FILE`` -> ``AIRFLOW_CONN_*`` variables (pure Python);
* ``launch``      the CLI side: lock, start the child, hand it the run request, wait (pure Python);
* ``__main__``    the child: Airflow's output to a log file, warm up, read the request, exit;
* ``warmup``      makes the in-process Execution API cheap to start (the largest fixed cost);
* ``runner``      one request: the DB (created once), the DAGs, the run, progress, the report;
* ``driver``      the run loop: ``dag.test()``'s loop plus child runs of nested playbooks and
                  gates that stop the run instead of waiting forever;
* ``report``      task instances + XComs + runtime events -> one report per step (pure Python).
* ``warm``        the warm runner: one process per home serving many runs at once, each a fork
                  (``warm_fork``: the fork becoming one run in its slot);
* ``demo``        `noetlc demo up|down|status`: the Postgres (`pg_local`) and HTTP API the
                  bundled examples call, as background processes (pure Python).

Importing this package imports nothing from Airflow.
"""
