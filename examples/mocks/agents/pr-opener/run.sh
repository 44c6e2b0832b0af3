#!/usr/bin/env bash
# The right agent for pull_request.eval.py: opens the pull request with gh (the trial's mock).
set -euo pipefail
echo '{"_tag":"Started","sessionId":"pr-opener-1"}'
url=$(gh pr create --title "Fix the typo in README" --body "Small fix.")
echo '{"_tag":"Command","command":"gh pr create --title \"Fix the typo in README\"","exitCode":0}'
echo "{\"_tag\":\"Message\",\"role\":\"assistant\",\"text\":\"Opened $url\"}"
echo '{"_tag":"Finished","reason":"done"}'
