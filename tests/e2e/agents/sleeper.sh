#!/usr/bin/env bash
# Outlives any short time limit, ignores SIGTERM, and leaves a child and a grandchild behind.
trap '' TERM
echo '{"_tag":"Started","sessionId":"sleepy"}'
sleep 300 &
echo $! > "$CHILD_PID_FILE"
( sleep 300 & echo $! > "$GRANDCHILD_PID_FILE"; wait ) &
echo '{"_tag":"Message","text":"still working"}'
sleep 60
echo '{"_tag":"Finished","reason":"done"}'
