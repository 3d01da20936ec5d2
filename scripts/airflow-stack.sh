#!/usr/bin/env bash
# A throwaway Airflow 3 deployment of the compiled playbooks on this machine:
#   scripts/airflow-stack.sh up|down|status [--executor local|celery] [--dags DIR] [--state DIR]
#                            [--port N] [--pg-conn NAME]... [--env-file FILE]
# up: PostgreSQL 15 (metadata + event log + playbook data), airflow db migrate, api-server,
# scheduler, dag-processor, triggerer (and Redis + two Celery workers with --executor celery);
# prints the URL, user and password file, also in <state>/stack.json. State: $NOETL_STACK_DIR or
# <repo>/.stack. The work is done by airflow_plugin/deploy/stack.py (see its docstring).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
# The project's venv (the one scripts/test.sh makes), unless told which Python to use.
PY="${NOETLC_PYTHON:-}"
if [ -z "$PY" ]; then
  VENV="${NOETLC_VENV:-.venv}"
  case "$VENV" in /*) ;; *) VENV="$REPO/$VENV" ;; esac
  if [ -x "$VENV/bin/python" ]; then
    PY="$VENV/bin/python"
  else
    PY="$(command -v python3)"
  fi
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m airflow_plugin.deploy.stack "$@"
