#!/usr/bin/env bash
# Installs Arize Phoenix, the OpenTelemetry receiver the trace-export tests send to and read back
# from (tests/otel/), into .proctor/phoenix-venv: its own virtualenv, as Phoenix pins versions
# of protobuf, OpenTelemetry and web packages that are no business of Proctor's. Idempotent: the
# pinned version already installed is left alone (about 80 s the first time, nothing after).
# When it cannot be installed the tests' tier is skipped (or failed under CI's
# PROCTOR_REQUIRE_ALL_TIERS=1) with the reason.
set -u
cd "$(dirname "$0")/../.."
PHOENIX_VERSION=20.26.1
VENV="$PWD/.proctor/phoenix-venv"
log() { printf '[phoenix] %s\n' "$*"; }

if [ -x "$VENV/bin/phoenix" ] && [ "$(cat "$VENV/.proctor-version" 2>/dev/null)" = "$PHOENIX_VERSION" ]; then
  exit 0
fi
log "installing arize-phoenix $PHOENIX_VERSION"
rm -rf "$VENV"
if python3.11 -m venv "$VENV" >/dev/null 2>&1 \
  && "$VENV/bin/pip" install --quiet "arize-phoenix==$PHOENIX_VERSION" >/dev/null 2>&1; then
  echo "$PHOENIX_VERSION" >"$VENV/.proctor-version"
else
  log "could not install arize-phoenix: the trace-export tests will be skipped"
  rm -rf "$VENV"
fi
exit 0
