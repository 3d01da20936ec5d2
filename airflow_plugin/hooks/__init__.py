"""The bottom floor of the plugin: how the runtime reaches the outside world.

``connections`` (connection lookup: Airflow Connections, env vars), ``secrets`` (secret
references and their backends), ``state`` (where local state lives). It imports nothing else
of ``airflow_plugin``; tools, templating, events and drivers stand on it.
"""
