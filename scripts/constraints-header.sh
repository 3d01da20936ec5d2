#!/usr/bin/env bash
# `pip freeze --exclude-editable` on stdin -> a constraints file for Airflow $1 on stdout, with the
# header that says where it came from (constraints/README.md tells the whole procedure).
set -euo pipefail
version="${1:?usage: pip freeze --exclude-editable | scripts/constraints-header.sh VERSION}"
cat <<HEADER
# Constraints for apache-airflow==$version with noetlc[airflow,celery,lineage,dev], Python $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])').
# The frozen set of a virtualenv in which scripts/smoke-airflow.sh $version passed.
# Regenerate: see constraints/README.md (pip freeze --exclude-editable of a tested env).
HEADER
grep -v '^-e ' | grep -v '^noetlc'
