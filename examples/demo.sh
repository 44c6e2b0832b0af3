#!/usr/bin/env bash
# `make demo`: grade the examples with nothing configured, then say where to look.
set -u
cd "$(dirname "$0")"
PROCTOR=../.venv/bin/proctor
# Outside examples/: the demo's history (and its bundles) outlives any edit, move or deletion
# of the eval files, so its batches can be rerun from the dashboard after all of those.
export PROCTOR_HOME="${PROCTOR_HOME:-$(cd .. && pwd)/.proctor/demo}"

# examples/tasks/ (Harbor and Terminal-Bench task folders) run in Docker: said and left out
# when no engine with Proctor's base image is here.
docker_problem=$(../.venv/bin/python -c \
  'from runner.sandboxes.docker import docker_problem; print(docker_problem() or "")' 2>/dev/null \
  || echo "the Docker check could not run")
echo "== Running the examples (SQLite and artifacts under $PROCTOR_HOME) =="
if [ -z "$docker_problem" ]; then
  $PROCTOR eval
else
  echo "   (skipping examples/tasks/, which runs task folders in Docker: $docker_problem)"
  $PROCTOR eval $(find . -name '*.eval.py' -not -path './tasks/*' | sort)
fi
status=$?
if [ $status -ne 0 ]; then
  echo "proctor eval exited $status" >&2
  exit $status
fi
if $PROCTOR help createuser >/dev/null 2>&1; then
  $PROCTOR createuser demo --org default --password proctor-demo >/dev/null
  signin="Sign in as demo / proctor-demo."
else
  signin=""
fi
cat <<MSG

== Where to look ==
  Results per batch:  $PROCTOR_HOME/artifacts/batches/<id>/benchmark.json
  Each trial:         $PROCTOR_HOME/artifacts/batches/<id>/trials/<id>/ (events.jsonl, conversation.json, workspace.diff)
  The dashboard:      make serve, then open http://127.0.0.1:8000/  $signin
  Again, as JSON:     cd examples && PROCTOR_HOME=$PROCTOR_HOME ../.venv/bin/proctor eval --json
MSG
