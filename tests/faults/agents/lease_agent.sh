#!/usr/bin/env bash
# One trial of the fault tests: notes "start <pid> <time>" in $RUNS_DIR/<prompt>.log, works for
# $WORK_S seconds, then finishes and notes "end <pid> <time>". Orphaned by a killed worker, it
# dies on its first write to the closed pipe and never notes an end.
log="$RUNS_DIR/$SPHYNX_PROMPT.log"
echo "start $$ $(date +%s.%N)" >> "$log"
echo '{"_tag":"Started","sessionId":"lease"}'
echo '{"_tag":"Message","role":"assistant","text":"working"}'
sleep "$WORK_S"
echo '{"_tag":"Message","role":"assistant","text":"done"}'
echo '{"_tag":"Finished","reason":"done"}'
echo "end $$ $(date +%s.%N)" >> "$log"
