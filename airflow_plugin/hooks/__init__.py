"""The bottom floor of the plugin: how the runtime reaches the outside world.

``connections`` (connection lookup: Airflow Connections, env vars), ``secrets`` (secret
references and their backends), ``postgres`` / ``duckdb`` (connections, pools and each
database's ``TableWriter``, contract in ``tables``), ``http`` (pooled httpx clients, what an
``auth`` connection adds to a request), ``sqltext`` (one SQL tokenizer),
``values`` (database values as JSON), ``state`` (where local state lives). It imports nothing
else of ``airflow_plugin``; templating, tools, events and drivers stand on it.

Airflow's provider hooks (``PostgresHook``, ``HttpHook``) are not used here: importing them
imports Airflow, which the tools and runtime must run without, and they hand out one connection
per call where the runtime keeps one small ``psycopg_pool`` per target and process. What they
would add, the connection lookup, is Airflow's own (``hooks.connections`` asks
``airflow.sdk.Connection`` inside a function).
"""
