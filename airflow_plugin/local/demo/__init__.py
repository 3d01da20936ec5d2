"""`noetlc demo up|down|status`: the local services the bundled examples call.

* ``services``           the demo's state under the managed home, up / down / status;
* ``http_server``        the local HTTP API (127.0.0.1:5555 for the examples), also the tests';
* ``http_core``          its request model and route table;
* ``http_noetl_routes``, ``http_public_routes``  its routes.

Pure Python and standard library (the Postgres binaries are Debian's postgresql-15): the CLI
imports it without Airflow.
"""
