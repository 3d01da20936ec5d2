#!/usr/bin/env bash
# The test command of the README and of CI: a fresh venv, the project with every extra,
# then the whole suite. Tests that need Postgres start a throwaway cluster themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${NOETLC_VENV:-.venv}"
# System tools the tests use: graphviz for `noetlc graph --format svg|png`, PostgreSQL 15 for the
# throwaway clusters (tests/harness/postgres.py, scripts/airflow-stack.sh), redis-server for the
# Celery deployment of tests/deploy (scripts/airflow-stack.sh --executor celery).
MISSING=()
command -v dot >/dev/null 2>&1 || MISSING+=(graphviz)
[ -x /usr/lib/postgresql/15/bin/initdb ] || MISSING+=(postgresql-15)
command -v redis-server >/dev/null 2>&1 || MISSING+=(redis-server)
# Debian's chromium: tests/deploy/test_ui_deployed.py drives the Airflow UI with it (headless).
command -v chromium >/dev/null 2>&1 || MISSING+=(chromium)
if [ "${#MISSING[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${MISSING[@]}" >/dev/null
  else
    echo "scripts/test.sh: please install ${MISSING[*]}" >&2
  fi
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e '.[airflow,celery,lineage,dev]'
# Our own example DAGs must be exactly what the compiler makes of our playbooks.
"$VENV/bin/noetlc" check playbooks/
"$VENV/bin/noetlc" compile playbooks/ -o dags/ --check
# --durations: the slowest tests are named at the end of every run (where a slow machine hurts).
exec "$VENV/bin/python" -m pytest -q -n 2 --durations=25 "$@"
