#!/usr/bin/env bash
# Installs and starts what the test tiers need, where this machine allows it:
#   PostgreSQL and Redis (started if installed and down), Debian's Chromium for browser tests,
#   git and bubblewrap for the runner tests, Arize Phoenix for the trace-export tests.
# What cannot be installed or started is left to tests/conftest.py, which skips that tier with
# its reason (or fails it, when PROCTOR_REQUIRE_ALL_TIERS=1 as in CI).
set -u
log() { printf '[setup] %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"; else return 1; fi
}

apt_updated=0
apt_install() {
  command -v apt-get >/dev/null || return 1
  if [ $apt_updated = 0 ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || return 1
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
}

need_package() {  # need_package COMMAND PACKAGE
  command -v "$1" >/dev/null && return 0
  log "installing $2"
  apt_install "$2" || log "could not install $2 (no root or no apt): its tests will be skipped"
}

need_package git git
need_package chromium chromium
need_package bwrap bubblewrap

# PostgreSQL: start the cluster if it is installed but not answering.
if command -v pg_isready >/dev/null && ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    log "starting PostgreSQL"
    as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start >/dev/null 2>&1 || true
  fi
fi
if ! command -v pg_isready >/dev/null; then
  log "installing PostgreSQL"
  if apt_install postgresql; then
    as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start >/dev/null 2>&1 || true
  fi
fi

# Redis: start one if installed but not answering.
if ! (command -v redis-cli >/dev/null && redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1); then
  command -v redis-server >/dev/null || { log "installing Redis"; apt_install redis-server || true; }
  if command -v redis-server >/dev/null; then
    log "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null 2>&1 || true
  fi
fi
# Arize Phoenix, the OpenTelemetry receiver of the trace-export tests, in its own virtualenv.
bash "$(dirname "$0")/phoenix.sh"
# The real agent CLIs for the harness tests.
bash "$(dirname "$0")/agent-clis.sh"

# Docker: the engine and the offline base image of the docker sandbox's tests.
bash "$(dirname "$0")/docker.sh"
# The docker sandbox's image for the real agent CLIs: the base image plus node and the CLIs.
bash "$(dirname "$0")/agent-image.sh"
exit 0
