#!/usr/bin/env bash
# The test command of the README and of CI: a fresh venv, the project with every extra,
# NoETL's public playbooks, then the whole suite. Tests that need Postgres start a throwaway
# cluster themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${NOETLC_VENV:-.venv}"
# System tools the tests use (Debian package names): graphviz for `noetlc graph --format svg|png`,
# PostgreSQL 15 for the throwaway clusters (tests/harness/postgres.py, scripts/airflow-stack.sh),
# redis-server for the Celery deployment of tests/deploy (scripts/airflow-stack.sh --executor
# celery), chromium for tests/deploy/test_ui_deployed.py (the Airflow UI, headless).
MISSING=()
command -v dot >/dev/null 2>&1 || MISSING+=(graphviz)
[ -x /usr/lib/postgresql/15/bin/initdb ] || MISSING+=(postgresql-15)
command -v redis-server >/dev/null 2>&1 || MISSING+=(redis-server)
command -v chromium >/dev/null 2>&1 || MISSING+=(chromium)
if [ "${#MISSING[@]}" -gt 0 ]; then
  # apt only as root, never with NOETLC_NO_APT=1, and at a terminal only once you say yes.
  use_apt=no
  if [ "${NOETLC_NO_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    use_apt=yes
    if [ -t 0 ]; then
      read -r -p "scripts/test.sh: install ${MISSING[*]} with apt-get? [Y/n] " answer || answer=n
      case "$answer" in [nN]*) use_apt=no ;; esac
    fi
  fi
  if [ "$use_apt" = yes ]; then
    echo "scripts/test.sh: apt-get install ${MISSING[*]} (NOETLC_NO_APT=1 skips this)" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${MISSING[@]}" >/dev/null
  else
    echo "scripts/test.sh: not installed: ${MISSING[*]} (Debian/Ubuntu: apt-get install" \
      "${MISSING[*]}); the tests that use them fail" >&2
  fi
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e '.[airflow,celery,lineage,dev]'
# NoETL's public playbooks, which the corpus tests read (tests/corpus.py): NOETLC_CORPUS, or
# ../shared/corpus beside the checkout, or else fetched once from github.com at pinned commits
# (sha256-checked) into ~/.cache/noetlc-tests/corpus. Without network the fetch fails and those
# tests are skipped, counted as NOT RUN at the end of the run: never a pass.
if [ -z "${NOETLC_CORPUS:-}" ] && [ ! -d ../shared/corpus ]; then
  "$VENV/bin/python" scripts/fetch-corpus.py || true
fi
export NOETLC_CORPUS_FETCH=0  # fetched (or not) just above: pytest does not try again
# Our own example DAGs must be exactly what the compiler makes of our playbooks.
"$VENV/bin/noetlc" check playbooks/
"$VENV/bin/noetlc" compile playbooks/ -o dags/ --check
# The Airflow matrix (NOETLC_AIRFLOW_MATRIX=1; .ci/run sets it): the smoke suite of the other
# supported minors the project keeps constraints for (3.1, 3.2; 3.0 is smoked by hand: compile
# every example, import every DAG, `noetlc run` each example, one deployed run per executor),
# each in its own cached virtualenv (scripts/smoke-airflow.sh), one version after the other in
# the background while pytest runs the full suite on the project's Airflow. Their logs:
# .artifacts/smoke/airflow-X.Y.Z.log.
matrix_pid=""
if [ "${NOETLC_AIRFLOW_MATRIX:-0}" = 1 ]; then
  own="$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("apache-airflow"))')"
  # every version with constraints but the project's own minor (the full suite) and 3.0 (smoked
  # by hand, `scripts/smoke-airflow.sh 3.0.6`: a third suite would not fit the 45 minutes)
  mapfile -t versions < <(bash scripts/matrix-versions.sh "$own")
  mkdir -p .artifacts/smoke
  rm -f .artifacts/smoke/*.log .artifacts/smoke/failed
  matrix() {
    for version in "${versions[@]}"; do
      bash scripts/smoke-airflow.sh "$version" >".artifacts/smoke/airflow-$version.log" 2>&1 \
        || echo "$version" >>.artifacts/smoke/failed
    done
  }
  # Beside pytest only in a network namespace of its own (as root): the README examples' HTTP
  # API listens on 127.0.0.1:5555, as in tests/runtime/test_readme_examples.py. Else after it.
  if unshare --net true 2>/dev/null; then
    matrix &
    matrix_pid=$!
    echo "scripts/test.sh: smoke suites of Airflow ${versions[*]} started (.artifacts/smoke/)" >&2
  else
    matrix_pid=after
  fi
fi
# --durations: the slowest tests are named at the end of every run (where a slow machine hurts).
status=0
"$VENV/bin/python" -m pytest -q -n 2 --durations=25 "$@" || status=$?
if [ -n "$matrix_pid" ]; then
  waited=$(date +%s)
  if [ "$matrix_pid" = after ]; then matrix; else wait "$matrix_pid"; fi
  echo "== Airflow matrix (waited $(( $(date +%s) - waited ))s after pytest)"
  for log in .artifacts/smoke/airflow-*.log; do
    grep -E '^(FAIL|airflow [0-9]|install:|suite:)' "$log" || echo "$log: no summary"
  done
  if [ -s .artifacts/smoke/failed ]; then
    echo "smoke FAILED on Airflow $(tr '\n' ' ' <.artifacts/smoke/failed)(see .artifacts/smoke/)"
    [ "$status" != 0 ] || status=1
  fi
fi
exit "$status"
