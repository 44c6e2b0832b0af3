#!/usr/bin/env bash
# Makes the docker sandbox's tier runnable on this machine, where it can:
#   1. a Docker engine: Debian's docker.io installed if no engine answers, dockerd started if it
#      is installed but down (no bridge, no iptables: sandboxes use network "none" or "host");
#   2. the offline base image proctor-base:latest: no image registry is reachable, so it is
#      built with debootstrap from the Debian mirror apt already uses, then `docker import`ed.
# Every step is skipped when already done; the debootstrap tarball is cached under
# .proctor/docker/ so a rerun is fast. What cannot be done is reported and left to
# tests/conftest.py, which skips the docker tier with its reason (or fails it in CI).
set -u
cd "$(dirname "$0")/../.."
log() { printf '[setup] %s\n' "$*"; }
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"; else return 1; fi
}

IMAGE="${PROCTOR_DOCKER_IMAGE:-proctor-base:latest}"
STATE="$PWD/.proctor/docker"
ROOTFS_TAR="$STATE/proctor-base.tar"
DOCKERD_LOG="$STATE/dockerd.log"
SUITE=bookworm
PACKAGES=python3,bash,coreutils,procps,ca-certificates,git
mkdir -p "$STATE"

engine_answers() { docker info >/dev/null 2>&1; }

# --- the engine ------------------------------------------------------------------------------
if ! engine_answers && ! command -v dockerd >/dev/null; then
  log "installing docker.io (Docker engine)"
  if ! { as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
         as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null 2>&1; }; then
    log "could not install docker.io (no root or no apt): the docker tests will be skipped"
    exit 0
  fi
fi
# Starts dockerd in the background and waits for it; a dockerd that exits at once (an earlier
# one still shutting down holds its pid file) is started again, within the same 60 s.
start_dockerd() {
  local pid=""
  for _ in $(seq 1 60); do
    engine_answers && return 0
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      as_root nohup dockerd --bridge=none --iptables=false --ip6tables=false >>"$DOCKERD_LOG" 2>&1 </dev/null &
      pid=$!
    fi
    sleep 1
  done
  engine_answers
}
if ! engine_answers; then
  log "starting dockerd (log: $DOCKERD_LOG)"
  if ! start_dockerd; then
    log "dockerd did not answer within 60 s (see $DOCKERD_LOG): the docker tests will be skipped"
    exit 0
  fi
fi

# --- the base image --------------------------------------------------------------------------
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  exit 0
fi

# The mirror this machine's apt uses: the first Debian URI in its sources (deb822 or one-line).
apt_mirror() {
  local uri
  uri=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1)
  [ -n "$uri" ] || uri=$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
                           awk '{print $2}' | grep -v security | grep -i debian | head -n1)
  printf '%s' "${uri:-http://deb.debian.org/debian}"
}

if [ ! -s "$ROOTFS_TAR" ]; then
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 || {
      log "could not install debootstrap: the docker tests will be skipped"; exit 0; }
  fi
  mirror=$(apt_mirror)
  rootfs="$STATE/rootfs"
  as_root rm -rf "$rootfs"
  log "building the $IMAGE root file system with debootstrap ($SUITE from $mirror; a few minutes)"
  if ! as_root debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$mirror" >"$STATE/debootstrap.log" 2>&1; then
    log "debootstrap failed (see $STATE/debootstrap.log): the docker tests will be skipped"
    as_root rm -rf "$rootfs"
    exit 0
  fi
  # Apt's downloaded packages are not needed in the image.
  as_root rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  as_root tar -C "$rootfs" -cf "$ROOTFS_TAR.partial" . && mv "$ROOTFS_TAR.partial" "$ROOTFS_TAR"
  as_root rm -rf "$rootfs"
fi
log "importing $IMAGE"
if ! docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' "$ROOTFS_TAR" "$IMAGE" >/dev/null; then
  log "docker import failed: the docker tests will be skipped"
fi
exit 0
