#!/usr/bin/env bash
# The Airflow versions CI's matrix smokes (scripts/test.sh), one a line:
#
#   scripts/matrix-versions.sh OWN     # OWN: the project's own Airflow version, e.g. 3.3.2
#
# Every version with constraints/airflow-X.Y.Z.txt, except the project's own minor (it gets the
# full suite instead) and 3.0: 3.0 runs all but approve/input gates and is smoked by hand
# (`scripts/smoke-airflow.sh 3.0.6`), since a third smoke suite beside pytest would not fit CI's
# 45-minute budget. CI keeps to the supported minors 3.1 and 3.2 (and 3.3's full suite).
set -euo pipefail
own="${1:?usage: scripts/matrix-versions.sh OWN_AIRFLOW_VERSION}"
cd "$(dirname "$0")/.."
for file in constraints/airflow-*.txt; do
  version="${file#constraints/airflow-}"; version="${version%.txt}"
  case "${version%.*}" in
    "${own%.*}" | 3.0) ;;
    *) echo "$version" ;;
  esac
done
