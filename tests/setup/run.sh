#!/usr/bin/env bash
# Runs every test. The suite runs once against PostgreSQL when it answers (the production
# database), else against SQLite; the end-to-end tests run `proctor eval` against both.
set -u
cd "$(dirname "$0")/../.."
export PROCTOR_HOME="${PROCTOR_TEST_HOME:-$PWD/.proctor/test-home}"
mkdir -p "$PROCTOR_HOME" test-artifacts
if [ -z "${DATABASE_URL:-}" ] && .venv/bin/python - <<'PY' 2>/dev/null
import psycopg
psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", connect_timeout=3).close()
PY
then
  export DATABASE_URL="postgresql://postgres@127.0.0.1:5432/proctor"
fi
echo "[test] database for the suite: ${DATABASE_URL:-SQLite under $PROCTOR_HOME}"
# The suite starts `proctor` hundreds of times: its modules compiled once here are read by each
# start, even where PYTHONDONTWRITEBYTECODE keeps Python from writing them itself.
.venv/bin/python -m compileall -q proctor evals_app runner dashboard >/dev/null
.venv/bin/pytest "$@"
status=$?
# pytest's 5 means "no tests ran": never a pass.
exit $status
