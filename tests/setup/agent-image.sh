#!/usr/bin/env bash
# Builds proctor-agents:latest, the docker sandbox's image for the real agent CLIs
# (docs/agents-in-docker.md): proctor-base:latest plus this machine's node and the CLIs that
# tests/setup/agent-clis.sh installed under .proctor/agent-clis/, offline:
#   /usr/local/bin/node                      the host's node binary
#   /opt/agent-clis/node_modules             Claude Code, Codex, Gemini CLI, OpenCode
#   /opt/agent-clis/aider-venv               Aider's virtualenv, on the image's python3.11
#   /usr/local/bin/{claude,codex,gemini,opencode,aider}
#   /etc/ssl/certs/ca-certificates.crt       the host's CA bundle, for package clients inside
# It is one `docker build` FROM the base image with COPY steps only (no RUN, so no network),
# from a context of hard links. The inputs' fingerprint is stored as a label; when it matches,
# nothing is rebuilt. What cannot be built is reported; the tests that need the image then
# skip (or fail under CI's PROCTOR_REQUIRE_ALL_TIERS=1) with the reason.
set -u
SCRIPT=$(readlink -f "$0")
cd "$(dirname "$SCRIPT")/../.."
log() { printf '[agent-image] %s\n' "$*"; }

IMAGE="${PROCTOR_AGENT_IMAGE:-proctor-agents:latest}"
BASE="${PROCTOR_DOCKER_IMAGE:-proctor-base:latest}"
CLIS="$PWD/.proctor/agent-clis"
STATE="$PWD/.proctor/docker"
CONTEXT="$STATE/agent-image-context"
LABEL=proctor.agent-image.inputs

docker info >/dev/null 2>&1 || { log "no Docker engine answers: $IMAGE not built"; exit 0; }
base_id=$(docker image inspect -f '{{.Id}}' "$BASE" 2>/dev/null) || {
  log "the base image $BASE is missing (tests/setup/docker.sh builds it): $IMAGE not built"; exit 0; }
node_bin=$(command -v node) && node_bin=$(readlink -f "$node_bin") || {
  log "node is not installed: $IMAGE not built"; exit 0; }
[ -d "$CLIS/node_modules/.bin" ] || { log "no CLIs under $CLIS (tests/setup/agent-clis.sh): $IMAGE not built"; exit 0; }

# What the image is made of; the same fingerprint means the same image.
fingerprint=$(
  {
    echo "$base_id"
    sha256sum "$SCRIPT" "$node_bin" "$CLIS/package-lock.json" /etc/ssl/certs/ca-certificates.crt 2>/dev/null | cut -d' ' -f1
    ls "$CLIS"/aider-venv/lib/python3*/site-packages 2>/dev/null
  } | sha256sum | cut -c1-16
)
if [ "$(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$IMAGE" 2>/dev/null)" = "$fingerprint" ]; then
  exit 0
fi

started=$(date +%s)
log "building $IMAGE from $BASE (node $("$node_bin" --version), the CLIs of $CLIS)"
rm -rf "$CONTEXT"
root="$CONTEXT/rootfs"
mkdir -p "$root/usr/local/bin" "$root/opt/agent-clis" "$root/etc/ssl/certs"
cp "$node_bin" "$root/usr/local/bin/node"
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || true
# Hard links: the context costs no copy (node_modules is about a gigabyte).
cp -al "$CLIS/node_modules" "$root/opt/agent-clis/node_modules" 2>/dev/null ||
  cp -a "$CLIS/node_modules" "$root/opt/agent-clis/node_modules"
for cli in claude codex gemini opencode; do
  [ -e "$CLIS/node_modules/.bin/$cli" ] && ln -s "/opt/agent-clis/node_modules/.bin/$cli" "$root/usr/local/bin/$cli"
done

# Aider's venv moves to /opt/agent-clis/aider-venv and runs on the image's Debian python3.11
# (the same ABI as the host's 3.11, so its compiled wheels load): its interpreter links and
# pyvenv.cfg point there, and its scripts' #! lines name the new place. Those few files are
# real copies; the libraries stay hard links.
venv="$CLIS/aider-venv"
if [ -x "$venv/bin/aider" ]; then
  target="$root/opt/agent-clis/aider-venv"
  mkdir -p "$target/bin"
  for part in lib lib64 include share; do
    [ -e "$venv/$part" ] && { cp -al "$venv/$part" "$target/$part" 2>/dev/null || cp -a "$venv/$part" "$target/$part"; }
  done
  printf 'home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11\n' >"$target/pyvenv.cfg"
  for name in python python3 python3.11; do ln -s /usr/bin/python3.11 "$target/bin/$name"; done
  for script in "$venv"/bin/*; do
    name=$(basename "$script")
    case $name in python|python3|python3.*|activate*|Activate*) continue ;; esac
    [ -f "$script" ] || continue
    sed "1s|^#!.*/python[0-9.]*\$|#!/opt/agent-clis/aider-venv/bin/python3.11|" "$script" >"$target/bin/$name"
    chmod 755 "$target/bin/$name"
  done
  ln -s /opt/agent-clis/aider-venv/bin/aider "$root/usr/local/bin/aider"
fi

cat >"$CONTEXT/Dockerfile" <<EOF
FROM $BASE
COPY rootfs/ /
LABEL $LABEL=$fingerprint
EOF
if ! DOCKER_BUILDKIT=0 docker build --network none -q -t "$IMAGE" "$CONTEXT" >"$STATE/agent-image.log" 2>&1; then
  log "docker build failed (see $STATE/agent-image.log): $IMAGE not built"
  rm -rf "$CONTEXT"
  exit 0
fi
rm -rf "$CONTEXT"
# The old image of this tag, if any, is now dangling: drop it (and its gigabyte) at once.
docker image prune -f --filter "label=$LABEL" >/dev/null 2>&1 || true

# Every CLI must start in the image; one that does not is named here, not in a test's timeout.
for cli in node claude codex gemini opencode aider; do
  if ! docker run --rm --network none --entrypoint "$cli" "$IMAGE" --version >/dev/null 2>>"$STATE/agent-image.log"; then
    log "$cli does not start in $IMAGE (see $STATE/agent-image.log)"
  fi
done
log "built $IMAGE in $(($(date +%s) - started)) s"
exit 0
