#!/usr/bin/env bash
# Says one thing, then works quietly for a while: its message must show before it finishes.
echo '{"_tag":"Started","sessionId":"quiet-worker"}'
echo '{"_tag":"Message","role":"assistant","text":"Looking at the failing test."}'
date +%s.%N > "$PRINTED_AT_FILE"
sleep 5
echo '{"_tag":"Message","role":"assistant","text":"Done."}'
echo '{"_tag":"Finished","reason":"done"}'
