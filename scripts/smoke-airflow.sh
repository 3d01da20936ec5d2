#!/usr/bin/env bash
# The smoke suite on one Airflow version, installed as a platform installs it:
#
#   scripts/smoke-airflow.sh VERSION [VENV]
#
# The virtualenv, unless VENV names one, is cached: $NOETLC_AIRFLOW_VENVS/af-VERSION-KEY
# (NOETLC_AIRFLOW_VENVS defaulting to ~/.cache/noetlc/venvs), KEY a hash of
# constraints/airflow-VERSION.txt, pyproject.toml (the extras) and this checkout's path: new pins
# or extras make a new one, and two checkouts never re-point each other's editable install. A
# missing or unfinished one is made: apache-airflow==VERSION and this checkout (editable, with the
# airflow, celery, lineage and dev extras) under the constraints, marked complete only when pip
# succeeded. Then scripts/smoke_airflow.py runs with it: compile every bundled playbook, import
# every DAG, `noetlc run` every example of the README (one warm runner), one deployed run per
# executor (scripts/airflow-stack.sh: LocalExecutor runs hello_world, a loop and a gate; Celery
# runs hello_world; NOETLC_SMOKE_STACK=0 leaves the deployment out); then tests/test_compat.py,
# tests/runtime/test_tool_secrets.py and tests/runtime/test_connection_secret_run.py. What the version cannot run (noetl_compile/airflow_versions.py:
# on 3.0 approve/input gates) must be refused with C518: the gates playbook then is neither
# compiled, run nor deployed (the stack runs hello_world and a loop).
# CI runs this for 3.1 and 3.2 (scripts/matrix-versions.sh); 3.0.6 by hand.
# Prints how long each part took.
set -euo pipefail

version="${1:?usage: scripts/smoke-airflow.sh VERSION [VENV]}"
root="$(cd "$(dirname "$0")/.." && pwd)"
constraints="$root/constraints/airflow-$version.txt"
[[ -f "$constraints" ]] || { echo "no $constraints: see constraints/README.md" >&2; exit 2; }
key="$( { cat "$constraints" "$root/pyproject.toml"; echo "$root"; } | sha256sum | cut -c1-12)"
venv="${2:-${NOETLC_AIRFLOW_VENVS:-$HOME/.cache/noetlc/venvs}/af-$version-$key}"
# The path alone (a CI cache step can save and restore it): NOETLC_SMOKE_PRINT_VENV=1.
if [[ "${NOETLC_SMOKE_PRINT_VENV:-0}" == 1 ]]; then echo "$venv"; exit 0; fi

start=$(date +%s)
has_airflow() {
  "$venv/bin/python" -c "import airflow, sys; sys.exit(airflow.__version__ != '$version')" 2>/dev/null
}
if [[ -n "${2:-}" ]] && has_airflow; then
  # A venv named on the command line may come from another checkout: its editable install must
  # be this one.
  "$venv/bin/pip" install -q --no-deps -e "$root"
elif [[ -n "${2:-}" || ! -f "$venv/.noetlc-complete" ]] || ! has_airflow; then
  [[ -n "${2:-}" ]] || rm -rf "$venv"  # an unfinished cached one
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  # uv resolves and installs the same pins in seconds where pip takes minutes (two of these
  # run beside the full suite in CI); pip is the fallback wherever uv cannot be had or fails.
  if "$venv/bin/pip" install -q uv >/dev/null 2>&1 \
    && "$venv/bin/uv" pip install -q --python "$venv/bin/python" -c "$constraints" \
      "apache-airflow==$version" -e "$root[airflow,celery,lineage,dev]"; then
    echo "installed with uv"
  else
    "$venv/bin/pip" install -q -c "$constraints" "apache-airflow==$version" \
      -e "$root[airflow,celery,lineage,dev]"
  fi
  touch "$venv/.noetlc-complete"
fi
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
# What differs between versions below the examples: compat's answers, the secrets hook
# (Airflow's own lookup differs by version; unit-test mode sets a Fernet key, as deployments do),
# and a Connection's password kept out of a run's logs, XComs and events.
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_compat.py \
  tests/runtime/test_tool_secrets.py tests/runtime/test_connection_secret_run.py || status=1
echo "suite: $(( $(date +%s) - installed ))s"
exit $status
