#!/usr/bin/env bash
# A scripted agent speaking the command harness protocol. Run with "sloppy" it gets the three
# sums wrong and the three words right; without, everything right.
echo '{"_tag":"Started","sessionId":"solver-1","model":"'"$SPHYNX_MODEL"'"}'
case "$SPHYNX_PROMPT" in
  *"Write the sum "*) answer="${SPHYNX_PROMPT##*= }" ;;
  *"Write the word "*) answer="${SPHYNX_PROMPT##*word }" ;;
esac
answer="${answer%%.*}"
if [ "$1" = sloppy ] && [[ "$SPHYNX_PROMPT" == *"sum"* ]]; then answer=0; fi
printf '%s\n' "$answer" > answer.txt
echo '{"_tag":"FileChange","paths":["answer.txt"]}'
echo '{"_tag":"Usage","inputTokens":100,"outputTokens":10}'
echo '{"_tag":"Message","role":"assistant","text":"Wrote '"$answer"'."}'
echo '{"_tag":"Finished","reason":"done"}'
