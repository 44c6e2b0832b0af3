#!/bin/bash
# Two named rewards and a CTRF report with one result per test.
cd /app
greeting=0; notes=0
[ "$(cat greeting.txt 2>/dev/null)" = "$EXPECTED" ] && greeting=1
[ "$(cat notes.txt 2>/dev/null)" = "these notes must stay" ] && notes=1
status() { [ "$1" = 1 ] && echo passed || echo failed; }
printf '{"greeting": %s, "notes_kept": %s}\n' "$greeting" "$notes" > /logs/verifier/reward.json
cat > /logs/verifier/ctrf.json <<JSON
{"results": {"tool": {"name": "bash"}, "tests": [
  {"name": "test_greeting_written", "status": "$(status $greeting)", "duration": 1,
   "message": "greeting.txt holds: $(head -c 60 greeting.txt 2>/dev/null || echo nothing)"},
  {"name": "test_notes_kept", "status": "$(status $notes)", "duration": 1}
]}}
JSON
echo "greeting=$greeting notes=$notes"
