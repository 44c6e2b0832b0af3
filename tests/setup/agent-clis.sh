#!/usr/bin/env bash
# Installs the real agent CLIs the harness tests run, from the package registries, into
# .proctor/agent-clis/ (npm packages under node_modules/.bin, Aider in its own virtualenv so its
# dependencies never meet Proctor's). Idempotent: a CLI already installed is left alone.
# What cannot be installed is reported; its tests then skip (or fail under CI's
# PROCTOR_REQUIRE_ALL_TIERS=1) with the reason.
set -u
cd "$(dirname "$0")/../.."
DEST="$PWD/.proctor/agent-clis"
mkdir -p "$DEST"
log() { printf '[agent-clis] %s\n' "$*"; }

npm_cli() {  # npm_cli PACKAGE BINARY
  if [ -x "$DEST/node_modules/.bin/$2" ]; then return 0; fi
  command -v npm >/dev/null || { log "npm is missing: cannot install $1"; return 1; }
  log "installing $1"
  npm install --prefix "$DEST" --no-audit --no-fund --loglevel=error "$1" >/dev/null 2>&1 \
    || log "could not install $1"
}

npm_cli @anthropic-ai/claude-code claude
npm_cli @openai/codex codex
npm_cli @google/gemini-cli gemini
npm_cli opencode-ai opencode

if [ ! -x "$DEST/aider-venv/bin/aider" ]; then
  log "installing aider-chat"
  python3.11 -m venv "$DEST/aider-venv" >/dev/null 2>&1 \
    && "$DEST/aider-venv/bin/pip" install --quiet aider-chat >/dev/null 2>&1 \
    || log "could not install aider-chat"
fi
exit 0
