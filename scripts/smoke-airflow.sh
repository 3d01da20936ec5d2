#!/usr/bin/env bash
# The smoke suite on one Airflow version, installed as a platform installs it:
#
#   scripts/smoke-airflow.sh VERSION [VENV]
#
# Creates VENV (default: $NOETLC_AIRFLOW_VENVS/af-VERSION, NOETLC_AIRFLOW_VENVS defaulting to
# ~/.cache/noetlc/venvs) unless it holds that Airflow already, installs apache-airflow==VERSION
# and this checkout (editable, with the airflow, celery, lineage and dev extras) under
# constraints/airflow-VERSION.txt, then runs scripts/smoke_airflow.py with it: compile every
# bundled playbook, import every DAG, `noetlc run` every example of the README, and
# tests/test_compat.py. Prints how long the install and the suite took.
set -euo pipefail

version="${1:?usage: scripts/smoke-airflow.sh VERSION [VENV]}"
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${2:-${NOETLC_AIRFLOW_VENVS:-$HOME/.cache/noetlc/venvs}/af-$version}"
constraints="$root/constraints/airflow-$version.txt"
[[ -f "$constraints" ]] || { echo "no $constraints: see constraints/README.md" >&2; exit 2; }

start=$(date +%s)
if ! "$venv/bin/python" -c "import airflow, sys; sys.exit(airflow.__version__ != '$version')" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -c "$constraints" "apache-airflow==$version" \
    -e "$root[airflow,celery,lineage,dev]"
fi
# A venv made from another checkout: its editable install must be this one.
"$venv/bin/pip" install -q --no-deps -e "$root"
installed=$(date +%s)
echo "install: $((installed - start))s ($venv)"

cd "$root"
status=0
# The examples' HTTP API listens on 127.0.0.1:5555: where the tool allows (root), the suite runs in
# a network namespace of its own, so a demo already running on this machine does not collide.
if unshare --net true 2>/dev/null; then
  unshare --net bash -c 'ip link set lo up && exec "$@"' smoke \
    "$venv/bin/python" scripts/smoke_airflow.py || status=1
else
  "$venv/bin/python" scripts/smoke_airflow.py || status=1
fi
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_compat.py || status=1
echo "suite: $(( $(date +%s) - installed ))s"
exit $status
