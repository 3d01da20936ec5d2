"""The NoETL execution view inside the Airflow UI (docs/ui.md).

``app.create_app()`` is a FastAPI app that Airflow's API server mounts (the plugin's
``fastapi_apps``), so every request goes through Airflow's own authentication (the UI's session
cookie or a bearer token) and authorization (``requires_access_dag``: a user who may not read a
DAG's runs cannot read their events). ``views.EXTERNAL_VIEWS`` adds it to the DAG run and task
instance pages. Nothing here is imported by a worker: the plugin builds the app on first use.
"""
