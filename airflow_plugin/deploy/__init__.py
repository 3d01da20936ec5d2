"""Deploying compiled playbooks on a real Airflow: the throwaway stack behind
``scripts/airflow-stack.sh`` (``stack``), a REST client for a running deployment (``rest``) and
the hostname callable that tells Celery workers apart (``hostname``).

Nothing here imports Airflow: the stack runs Airflow's own CLI in subprocesses and the client
speaks HTTP.
"""
